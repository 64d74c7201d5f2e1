"""Figures the pages draw. Layout and styling only: the data come from explain/."""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from explain.explanations import PairExplanation
from explain.vocabulary import PATH_ROLE_COLOURS, relation
from pages.tables import frame_digest

if TYPE_CHECKING:
    import networkx as nx


# Confusions' top bars: a value written at a bar's start ends within this share of the axis ("100.0%" at 1,400
# pixels); a whisker reaching back under it would cross it (the value is then written right of the whisker).
WHISKER_CLEAR = 0.1


def path_graph(explanation: PairExplanation) -> nx.DiGraph:
    """The WordNet path as a networkx graph, edges pointing from hyponym to hypernym. Each node's
    layer is its distance from the lowest common subsumer along the path, so the drawing reads as
    a V: the true class climbs on the left, the prediction on the right, the LCS on top."""
    import networkx as nx  # here, not at the top: 285 modules, ~0.25 s of the first Results or Confusions page

    graph = nx.DiGraph()
    lcs_index = next(i for i, n in enumerate(explanation.nodes) if "lcs" in n.roles)
    for i, node in enumerate(explanation.nodes):
        graph.add_node(node.wnid, layer=-abs(i - lcs_index), side=(i > lcs_index) - (i < lcs_index), data=node)
    for edge in explanation.edges:
        graph.add_edge(edge.child, edge.parent, kind=edge.kind)
    return graph


def path_figure(explanation: PairExplanation) -> go.Figure:
    import networkx as nx

    graph = path_graph(explanation)
    # multipartite_layout puts each layer on its own row; within a row, insertion order (true side first).
    pos = nx.multipartite_layout(graph, subset_key="layer", align="horizontal", scale=1.0)
    for wnid, (x, y) in pos.items():  # keep each branch on its own side even where a layer has one node
        side = graph.nodes[wnid]["side"]
        pos[wnid] = (x if side == 0 else side * max(abs(x), 0.35), y)

    edge_x, edge_y, label_x, label_y, label_text = [], [], [], [], []
    for child, parent, data in graph.edges(data=True):
        (x0, y0), (x1, y1) = pos[child], pos[parent]
        edge_x += [x0, x1, None]
        edge_y += [y0, y1, None]
        label_x.append((x0 + x1) / 2)
        label_y.append((y0 + y1) / 2)
        label_text.append("instance of" if data["kind"] == "instance_hypernym" else "is a")
    pred_colour = relation(explanation.relation).colour

    xs, ys, colours, texts, hovers, sizes = [], [], [], [], [], []
    for wnid in graph.nodes:
        node = graph.nodes[wnid]["data"]
        xs.append(pos[wnid][0])
        ys.append(pos[wnid][1])
        role = "pred" if "pred" in node.roles else "true" if "true" in node.roles else "lcs" if "lcs" in node.roles else "path"
        colours.append(pred_colour if role == "pred" else PATH_ROLE_COLOURS[role])
        sizes.append(26 if role in ("true", "pred") else 18)
        texts.append(node.lemma_names[0] if node.lemma_names else node.name)
        tag = {"true": "true class", "pred": "predicted", "lcs": "lowest common subsumer"}
        hovers.append(f"<b>{node.name}</b> ({wnid})<br>{', '.join(node.lemma_names)}<br>"
                      f"<i>{_wrap(node.definition)}</i><br>" + ", ".join(tag[r] for r in node.roles if r in tag))
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=edge_x, y=edge_y, mode="lines", line=dict(color="#999", width=2), hoverinfo="skip"))
    fig.add_trace(go.Scatter(x=label_x, y=label_y, mode="text", text=label_text, textfont=dict(size=10, color="#777"),
                             hoverinfo="skip"))
    fig.add_trace(go.Scatter(x=xs, y=ys, mode="markers+text", text=texts, textposition="middle right",
                             marker=dict(size=sizes, color=colours, line=dict(color="white", width=2)),
                             hovertext=hovers, hoverinfo="text"))
    fig.update_layout(showlegend=False, height=120 + 70 * (max(1, len(set(ys)))), margin=dict(l=10, r=10, t=10, b=10),
                      xaxis=dict(visible=False, range=[-1.3, 1.6]), yaxis=dict(visible=False),
                      plot_bgcolor="white")
    return fig


def _wrap(text: str, width: int = 60) -> str:
    import html
    import textwrap

    # WordNet definitions are trusted data, but escape anyway: Plotly hover text reads HTML tags.
    return "<br>".join(textwrap.wrap(html.escape(text), width))


# --------------------------------------------------------------------------- intervals (issue 23)
MUTED = "rgba(150, 150, 150, 0.55)"  # a difference without evidence
SUPPORTED = "#1a5fa0"  # a dark blue, no relation's colour: a difference the run supports


def error_offsets(df, column: str):
    """(above, below): how far ``column``'s interval (``<column>_ci_high`` / ``_ci_low``) reaches from
    each value, what Plotly's error_y / error_x take; None where the table has no bounds for it. An
    undefined bound draws no bar (NaN)."""
    import numpy as np

    low, high = f"{column}_ci_low", f"{column}_ci_high"
    if low not in df.columns or high not in df.columns:
        return None
    value = np.asarray(df[column].astype("float64"), dtype=np.float64)
    return (np.asarray(df[high].astype("float64"), dtype=np.float64) - value,
            value - np.asarray(df[low].astype("float64"), dtype=np.float64))


def claims_figure(claims, statistic: str) -> go.Figure:
    """The differences of one statistic, one row per pair (A − B) with its interval: a difference the
    run supports in blue, one without evidence muted grey; the claim's sentence (with its verdict)
    on hover. ``claims``: explain.claims.Claim of that statistic."""
    import html

    from explain.claims import PHRASES

    phrase = PHRASES[statistic]
    rows = [c for c in claims if c.statistic == statistic and c.diff is not None][::-1]  # first pair on top
    fig = go.Figure()
    for supported in (False, True):
        part = [c for c in rows if c.supported == supported]
        if not part:
            continue
        lows = [None if c.ci_low is None else (c.diff - c.ci_low) * phrase.scale for c in part]
        highs = [None if c.ci_high is None else (c.ci_high - c.diff) * phrase.scale for c in part]
        colour = SUPPORTED if supported else MUTED
        fig.add_trace(go.Scatter(
            x=[c.diff * phrase.scale for c in part], y=[html.escape(f"{c.a} − {c.b}") for c in part], mode="markers",
            marker=dict(size=11, color=colour), name="supported (q < 0.05)" if supported else "no evidence",
            error_x=dict(type="data", symmetric=False, array=highs, arrayminus=lows, color=colour, thickness=2),
            hovertext=[html.escape(f"{c.verdict}: {c.sentence}") for c in part], hoverinfo="text"))
    fig.add_vline(x=0, line=dict(color="#666", width=1, dash="dot"))
    unit = phrase.unit.strip() or "difference"
    fig.update_layout(height=max(180, 36 * len(rows) + 110), margin=dict(t=30, b=10), legend_title_text="",
                      xaxis_title=f"A − B, {phrase.label} ({unit})" if phrase.unit else f"A − B, {phrase.label}",
                      yaxis=dict(type="category"))
    return fig


# ---------------------------------------------------------------- built once per content
@st.cache_resource(max_entries=32, show_spinner=False)
def _figure(name: str, key: tuple, _build, _args: tuple, _kwargs: dict) -> go.Figure:
    return _build(*_args, **_kwargs)


def _key_of(value) -> str:
    return f"frame:{frame_digest(value)}" if isinstance(value, pd.DataFrame) else repr(value)


def cached_figure(build: Callable[..., go.Figure], *args, **kwargs) -> go.Figure:
    """``build(*args, **kwargs)``, kept per content: DataFrame arguments by their digest (every value,
    in order: pages.tables.frame_digest), the others by ``repr``. ``build`` must depend on its
    arguments and on module constants alone. The figure is shared between reruns and sessions:
    st.plotly_chart only reads it (it serialises the figure), and no caller changes it. Why: Plotly
    Express validates every property it sets; building Results' four figures again cost 0.35 s of
    every rerun at 1,000,000 predictions, whatever the click was."""
    try:
        key = tuple(_key_of(a) for a in args) + tuple((k, _key_of(v)) for k, v in sorted(kwargs.items()))
    except TypeError:  # a frame pandas cannot hash (a column of lists): built every time, as before
        return build(*args, **kwargs)
    return _figure(f"{build.__code__.co_filename}:{build.__qualname__}", key, build, args, kwargs)
