"""Explain: for a confusion (true class, predicted class), the WordNet path between them."""

from textwrap import shorten

import pandas as pd
import streamlit as st

from core.errors import WildLensError
from core.labels import resolve_noun_synsets
from core.names import with_names
from core.wordnet import wnid_of
from explain.explanations import explain_pair
from explain.vocabulary import path_caption, relation_help, relation_sentence
from pages.charts import path_figure
from pages.reads import class_name, metric_tables
from pages.tables import download_csv, interval_texts, show_table
from pages.text import escape_markdown, listed, show_error
from pages.run_state import keep_widget_state, remember_url, require_run, url_from_outside, write_params

st.title("Explain a confusion")
run = require_run()
tables = metric_tables(run)
label_space = run.info.label_space
confusions = tables.confusions

# The mode lives in the URL too (`pair=any`, with `true` and `pred` the two concepts): a reload or a shared
# link of "Any two concepts" reopened the run's first confusion, and the URL still named the last one (a UI review).
# The widgets are keyed and set from the URL only when it changed from outside (pages.run_state.url_from_outside):
# set from it on every rerun, a typed concept was lost once the page wrote its wnid back (a hostile check).
MODES = ["From this run's confusions", "Any two concepts"]
ANY = "any"
URL_KEYS = ("pair", "true", "pred")
url_pair = tuple(st.query_params.get(k, "") for k in URL_KEYS)
linked = url_from_outside("explain", url_pair)
if linked:
    st.session_state["explain-mode"] = MODES[1] if url_pair[0] == ANY else MODES[0]
    if url_pair[0] == ANY:
        for key, value in (("explain-true", url_pair[1]), ("explain-pred", url_pair[2])):
            if value:
                st.session_state[key] = value[:200]  # outside text: shown in the box as typed, resolved likewise
    elif url_pair[0]:
        shown = url_pair[0] if len(url_pair[0]) <= 40 else url_pair[0][:39] + "…"
        st.warning(escape_markdown(f"The link's pair={shown} is not 'any' (two concepts of your choice): showing "
                                   "this run's confusions."), icon=":material/link_off:")
remember_url("explain", url_pair)  # seen: a stop below (a concept that resolves to nothing) keeps what is typed
keep_widget_state("explain-true", "explain-pred",  # through the other mode, which does not draw them
                  "explain-model", "explain-class", "explain-confused")
mode = st.radio("Pair", MODES, horizontal=True, key="explain-mode")
switched = st.session_state.get("_explain_mode_seen") == MODES[0] and mode == MODES[1] and not linked
st.session_state["_explain_mode_seen"] = mode
# The two concepts start from the confusion shown (a UI review: the switch reset the pair to tabby -> Egyptian cat),
# unless concepts were typed before in this session: those are kept through the other mode (a hostile check).
if switched and st.session_state.get("pair") and "explain-true" not in st.session_state \
        and "explain-pred" not in st.session_state:
    _, st.session_state["explain-true"], st.session_state["explain-pred"] = st.session_state["pair"]
if mode == MODES[0]:
    if confusions.empty:
        write_params({"pair": None})
        st.info("This run has no confusions yet (no predictions, or no mistakes).")
        st.stop()
    # A link (Confusions' "Explain", a bookmark) names the pair in the URL; else this session's last pair.
    from_url = tuple(st.query_params.get(k) for k in ("model", "true", "pred"))
    wanted = from_url if all(from_url) else (st.session_state.get("pair") or (None, None, None))
    # Model -> true class -> one of its top confusions: three short lists instead of one list of
    # every confusion (30,000 entries for 10 models over ImageNet-1k).
    c1, c2, c3 = st.columns([1, 1, 2])
    # Keyed, and set from the URL when it changed from outside (a link, a reload, the browser's Back): set through
    # index= only, a Back whose index matched the box's first one kept the user's pick (a UI review: Back did
    # nothing, then showed a pair never picked); else kept, and a value the new options lack falls back.
    url_outside = all(from_url) and from_url != st.session_state.get("_explain_url")

    def _pick(key: str, options: list, want) -> None:
        if url_outside and want in options:
            st.session_state[key] = want
        elif st.session_state.get(key) not in options:
            st.session_state[key] = want if want in options else options[0]

    models = list(dict.fromkeys(confusions["model"]))
    _pick("explain-model", models, wanted[0])
    model = c1.selectbox("Model", models, key="explain-model")
    of_model = confusions[confusions["model"] == model]
    trues = list(dict.fromkeys(of_model["true_wnid"]))
    _pick("explain-class", trues, wanted[1])
    true_wnid = c2.selectbox("True class", trues, key="explain-class",
                             format_func=lambda w: f"{class_name(w, label_space)} ({w})")
    options = of_model[of_model["true_wnid"] == true_wnid].sort_values("rank")
    preds = options["pred_wnid"].tolist()
    share = dict(zip(preds, interval_texts(options, "mf") if "mf_ci_low" in options.columns  # as the tables' cells
                     else [f"{v:.1%}" for v in options["mf"].astype(float)]))
    relation = dict(zip(preds, options["relation"]))
    _pick("explain-confused", preds, wanted[2])
    pred_wnid = c3.selectbox("Confused with", preds, key="explain-confused",
                             format_func=lambda w: f"{class_name(w, label_space)} ({w}) · MF {share[w]} · {relation[w]}",
                             help="The model's most frequent confusions of this class, most frequent first. MF "
                                  "(misclassification frequency): the confusion's share of the class's mistakes, "
                                  "with its interval (Wilson over the class's mistakes); then its WordNet "
                                  "relation to the true class.")
    # A link naming what this run has no confusion of (a deleted model, a typo, a hand-made URL): said,
    # never another pair shown silently in its place. URL values are outside text: cut short, escaped.
    # Only a URL that came from outside: the pair this page wrote itself is stale after a run switch.
    lacking = [] if not url_outside else [
        f"{what} {listed([value], 1)}"
        for what, value, got in zip(("model", "true class", "predicted class"), from_url,
                                    (model, true_wnid, pred_wnid)) if value and value != got]
    if lacking:
        st.warning(escape_markdown(f"The link names what this run has no confusion of: {', '.join(lacking)}. "
                                   "Showing ") + f"**{escape_markdown(model)}**: "
                   + escape_markdown(f"{class_name(true_wnid, label_space)} → {class_name(pred_wnid, label_space)}")
                   + " instead.", icon=":material/link_off:")
    st.session_state["pair"] = (model, true_wnid, pred_wnid)
    write_params({"pair": None, "model": model, "true": true_wnid, "pred": pred_wnid})  # bookmarkable, one step
    st.session_state["_explain_url"] = (model, true_wnid, pred_wnid)
else:
    c1, c2 = st.columns(2)
    st.session_state.setdefault("explain-true", "n02123045")
    st.session_state.setdefault("explain-pred", "n02124075")
    true_text = c1.text_input("True concept (a word, a synset name or a wnid)", key="explain-true")
    pred_text = c2.text_input("Predicted concept (a word, a synset name or a wnid)", key="explain-pred")
    try:
        true_senses, pred_senses = resolve_noun_synsets(true_text), resolve_noun_synsets(pred_text)
    except WildLensError as exc:
        show_error(exc)
        st.stop()
    true_wnid, pred_wnid = wnid_of(true_senses[0]), wnid_of(pred_senses[0])
    for text, senses in ((true_text, true_senses), (pred_text, pred_senses)):
        if len(senses) > 1:  # a word of several senses: which one is shown, and how to name another
            # Definitions cut at a word, with an ellipsis, and the other sense's own (a UI review: "since prehistori);
            # type a synset name such as frump.n.01", a name that reads as no sense of 'dog' without its definition).
            st.caption(escape_markdown(f"'{text.strip()[:60]}' has {len(senses)} noun senses: showing its first, "
                                       f"{senses[0].name()} ({shorten(senses[0].definition(), 120, placeholder='…')}); "
                                       f"type a synset name such as {senses[1].name()} "
                                       f"({shorten(senses[1].definition(), 60, placeholder='…')}) for another."))
    write_params({"model": None, "pair": ANY, "true": true_wnid, "pred": pred_wnid})  # bookmarkable, one step
remember_url("explain", tuple(st.query_params.get(k, "") for k in URL_KEYS))

explanation = explain_pair(true_wnid, pred_wnid)
st.markdown(f"**{escape_markdown(class_name(true_wnid, label_space))}** ({true_wnid}) → "
            f"**{escape_markdown(class_name(pred_wnid, label_space))}** ({pred_wnid}): "
            f"{relation_sentence(explanation.relation)}")
st.markdown(escape_markdown(explanation.lcs_phrase(class_name(true_wnid, label_space))),
            help=relation_help(markdown=False))

m = st.columns(6)
m[0].metric("Path length", explanation.path_length, help="Edges between the two in WordNet (NLTK shortest_path_distance); "
            "the path drawn below climbs to their lowest common hypernym and may be longer (said below the chart).")
m[1].metric("Path sim.", f"{explanation.path:.3f}", help="`path`: NLTK path_similarity(true, predicted).")
m[2].metric("LCH", f"{explanation.lch:.3f}", help="`lch`: NLTK lch_similarity (Leacock-Chodorow, D = 19).")
m[3].metric("WUP", f"{explanation.wup:.3f}", help="`wup`: NLTK wup_similarity (Wu-Palmer, true class first).")
m[4].metric("Lin", "–" if pd.isna(explanation.lin) else f"{explanation.lin:.3f}",
            help="`lin`: Lin similarity with ImageNet-CoG's information content. – : not defined, for a concept "
                 "outside ImageNet-21k (e.g. n04399382 teddy bear).")
m[5].metric("Severity", explanation.severity, help="Hypernym steps from the true class up to the lowest common ancestor. "
            + relation_help(markdown=False))

st.plotly_chart(path_figure(explanation), width="stretch")
st.caption(path_caption(explanation.relation))
apex = explanation.shortest_path_apex()
if apex is not None:
    st.caption(escape_markdown(
        f"Path length {explanation.path_length} (and Path sim., LCH) is WordNet's shortest path, up to "
        f"{class_name(apex, label_space)} ({apex}) and down; the path drawn ({len(explanation.edges)} edges) climbs "
        f"to their lowest common hypernym, {class_name(explanation.lcs_wnid, label_space)}, which the relation, "
        "severity and WUP use."))

path_table = explanation.path_table()
PATH_DOCS = {"step": "Position on the path, 0 = the true class.", "synset": "The WordNet 3.0 synset name.",
             "wnid": "The synset's WordNet id.", "role": "true (the true class), lcs (the lowest common subsumer), "
                                                         "pred (the predicted class); empty for a synset between them.",
             "lemmas": "The synset's lemma names.", "definition": "WordNet's gloss.",
             "depth": "Hypernym steps from the synset up to entity.n.01 (NLTK min_depth)."}
# Widths for the text: the names and the gloss were cut to a few words at the default widths (a UI review).
# Every row shown (a long path hid its last ones behind a scroll bar) and the gloss before the lemmas, which
# mostly repeat the name (the CSV keeps the library's order).
shown_path = with_names(path_table, label_space)
shown_path = shown_path[[c for c in shown_path.columns if c != "lemmas"] + ["lemmas"]]
show_table(shown_path, docs=PATH_DOCS, labels={"wnid": "Id", "synset": "Synset"},
           widths={"step": "small", "depth": "small", "role": "small", "lemmas": "medium", "definition": "large"},
           height=35 * (len(shown_path) + 1) + 3)
download_csv(path_table, f"path_{true_wnid}_{pred_wnid}.csv", key="dl-path", label_space=label_space)
