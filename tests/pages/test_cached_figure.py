"""pages.charts.cached_figure: a figure is built once per content of its arguments, again when any
value changes (frames by every value in order, other arguments by repr), and a frame pandas cannot
hash is built every time."""
import pandas as pd
import plotly.graph_objects as go


def _bars(frame: pd.DataFrame, title: str) -> go.Figure:
    _bars.calls += 1
    return go.Figure(go.Bar(x=frame["x"].tolist(), y=frame["y"].tolist()), layout={"title": title})


def test_a_figure_is_built_once_per_content():
    from pages.charts import cached_figure

    _bars.calls = 0
    frame = pd.DataFrame({"x": ["a", "b"], "y": [1.0, 2.0]})
    first = cached_figure(_bars, frame, "t")
    assert cached_figure(_bars, frame.copy(), "t") is first and _bars.calls == 1  # same values: the same figure
    changed = cached_figure(_bars, frame.assign(y=[1.0, 2.5]), "t")
    assert changed is not first and list(changed.data[0].y) == [1.0, 2.5]
    assert cached_figure(_bars, frame.iloc[::-1].reset_index(drop=True), "t") is not first  # order counts
    assert cached_figure(_bars, frame, title="u") is not first  # another argument
    assert _bars.calls == 4
    listed = pd.DataFrame({"x": ["a"], "y": [1.0], "z": [[1, 2]]})  # unhashable cells: built each time
    cached_figure(_bars, listed, "t")
    cached_figure(_bars, listed, "t")
    assert _bars.calls == 6


def test_digests_tell_types_and_bounds_apart():
    """frame_digest hashes an object column's value types too (pandas hashes its values as text), and
    the interval texts are keyed by the exact floats of each value and bound: a changed bound is new text."""
    from pages.tables import frame_digest, styled

    assert frame_digest(pd.DataFrame({"a": [True]}, dtype=object)) != frame_digest(pd.DataFrame({"a": ["True"]}))
    frame = pd.DataFrame({"accuracy": [0.5, 0.25], "accuracy_ci_low": [0.4, 0.1], "accuracy_ci_high": [0.6, 0.4]})
    big = pd.concat([frame] * 20_000, ignore_index=True)  # over STYLE_MAX_CELLS: the '_interval' column path
    first = styled(big)["accuracy_interval"].tolist()[:2]
    moved = big.copy()
    moved.loc[1, "accuracy_ci_high"] = 0.45
    assert styled(moved)["accuracy_interval"].tolist()[:2] == [first[0], "[10.0, 45.0]"] and first[1] == "[10.0, 40.0]"
    small = styled(frame)  # a Styler: each cell's text
    assert "50.0% [40.0, 60.0]" in small.to_html() and "25.0% [10.0, 40.0]" in small.to_html()
