"""Query: a word -> its WordNet sense(s) -> the ImageNet classes under them -> a run with images.

Senses come sorted by how many classes of the label space lie under them (core.labels.senses);
those without a class are listed last, apart, and cannot be picked. When two or more senses have
classes and none is the word's clear meaning (core.labels.preselected_sense), the page asks and
shows nothing below until one is picked; several can be ticked to combine their classes in one
run (its run.json ``sense`` is then 'crane.n.04+crane.n.05'). Before a crawl, the search terms of
every class are shown in an editable table; what is in it is what the engine is asked."""
import hashlib

import pandas as pd
import streamlit as st

from core.errors import WildLensError
from core.intervals import DEFAULT_HALF_WIDTH, format_half_width, images_needed
from core.labels import (classes_table, combined_classes, get_label_space, hyponym_tree, label_space_names,
                         preselected_sense, preselection_note, senses)
from core.names import with_names
from crawl import available_engines
from crawl.crawler import clean_search_terms, default_search_terms, homonyms
from pages.tables import NA_DASH, download_csv, show_table
from pages.reads import concepts_table
from pages.text import escape_markdown, plural, progress_bar, show_error
from pages.run_state import make_current, open_run_link, remember_url, store, url_from_outside, write_params

IMPORT_PAGE = "pages/import_page.py"

# Readable headers of the class tables (core.labels.classes_table and the unseen classes); the raw
# names stay in the CSV and in each header's help.
CLASS_LABELS = {"wnid": "Class id", "index": "Index", "name": "Class", "lemmas": "Lemmas", "definition": "Definition",
                "synset": "Synset", "senses": "Senses", "path": "Path", "sim_to_seen": "Sim. to seen",
                "level": "Level", "nearest_seen": "Nearest seen class", "eligible": "Eligible", "reason": "Why not"}
CLASS_DOCS = {"wnid": "The class's WordNet 3.0 id.", "index": "The class's output index in the label space.",
              "name": "ImageNet's name of the class.", "lemmas": "WordNet's lemmas of the synset.",
              "definition": "WordNet's definition.", "synset": "The WordNet synset name.",
              "senses": "The chosen sense(s) the class lies under.",
              "path": "WordNet hypernym path from the sense down to the class.",
              "sim_to_seen": "The best Lin similarity to a class of the label space (ImageNet-CoG).",
              "level": f"ImageNet-CoG's concept generalization level (1 closest, 5 farthest). {NA_DASH} : outside "
                       "the five levels.",
              "nearest_seen": "The class of the label space closest to it: its name (wnid).",
              "eligible": "ImageNet-CoG counts it: it is in one of the five levels.",
              "reason": "Why it is outside the levels, if it is."}
CRAWL_DOCS = {"wnid": CLASS_DOCS["wnid"], "name": CLASS_DOCS["name"], "requested": "k, images asked for.",
              "accepted": "Usable images (accepted, not excluded).", "excluded": "Accepted, then excluded by hand.",
              "duplicate": "Images already stored (also under another class).",
              "ambiguous": "Accepted images found under another class too.", "rejected": "Files refused.",
              "short_by": "How many images short of k."}


st.title("Query")
st.caption("Type a word, pick its WordNet sense(s), see which ImageNet classes lie under them, then collect images.")

# The word and the label space live in the URL (`q`, `space`), so a reload, a bookmark or the browser's Back
# shows the same query (a fresh look at the sample, 2026-12-06: a reload went back to 'cat'); read by
# pages.run_state.url_from_outside's rule.
url_query = {"q": st.query_params.get("q"), "space": st.query_params.get("space")}
if url_from_outside("query", url_query):
    if url_query["q"] is not None:
        st.session_state["query"] = url_query["q"][:300]
    if url_query["space"] in label_space_names():
        st.session_state["label_space"] = url_query["space"]
left, right = st.columns([2, 1])
query = left.text_input("Word, synset name (cat.n.01) or wnid", key="query")
label_space = right.selectbox("Label space", label_space_names(), key="label_space",
                              help="Which classifier outputs count as classes: ImageNet-1k, or the 21k/22k/12k spaces.")
write_params({"q": query, "space": label_space})
remember_url("query", {"q": query, "space": label_space})

try:
    found = senses(query, label_space)
except WildLensError as exc:
    show_error(exc)
    st.stop()

with_classes = [s for s in found if s.n_classes]
empty = [s for s in found if not s.n_classes]
preselected = preselected_sense(found)
shown_query = escape_markdown(query.strip())

# ---------------------------------------------------------------- which sense(s)
if len(with_classes) >= 2 and preselected is None:
    st.markdown(f"**‘{shown_query}’ has {len(with_classes)} senses with classes in {label_space}: pick one or "
                "more.** Ticking several collects their classes in one run.")
elif with_classes:
    st.markdown("**Sense**")
    note = preselection_note(found, query.strip()[:60], label_space)
    if note:  # why this sense: the usual one, or the only one with a class (the word's usual sense may have none)
        st.caption(escape_markdown(note))


def sense_label(sense) -> str:  # checkbox labels are Markdown: WordNet glosses hold backticks and $
    return f"{sense.name} · {plural(sense.n_classes, 'class')} · {escape_markdown(sense.definition)}"


picked = [s for s in with_classes
          if st.checkbox(sense_label(s), value=s is preselected, key=f"sense|{label_space}|{query}|{s.name}")]
if empty:
    lines = "\n".join(f"- {s.name} · no class in {label_space} · {escape_markdown(s.definition)}" for s in empty)
    if with_classes:
        with st.expander(f"{plural(len(empty), 'more sense')} with no class in {label_space}"):
            st.markdown(lines)
    else:  # the answer first, then the senses (a UI review: 'run' listed 16 senses before saying none has a class)
        under = (f"{empty[0].name}" if len(empty) == 1 else
                 f"any of the {len(empty)} noun senses of ‘{escape_markdown(query.strip()[:60])}’")
        st.warning(f"No class of {label_space} lies under {under}. Pick another word, a more general one, or a "
                   "larger label space such as imagenet-21k.")
        st.markdown(lines)
        st.stop()
if not picked:
    st.stop()  # the page asked above; nothing below until a sense is picked

sense_names = [s.name for s in picked]
sense_record = "+".join(sense_names)  # run.json's sense: 'crane.n.04+crane.n.05'
sense_shown = " + ".join(sense_names)
classes = combined_classes(sense_names, label_space)
space = get_label_space(label_space)
st.subheader(f"{plural(len(classes), f'{label_space} class')} under {sense_shown}")

# ImageNet-21k hyponyms of the sense(s) that this label space lacks: no model of it can name them
# (ImageNet-CoG's unseen concepts); shown with how close the seen classes come.
unseen = []
if label_space != "imagenet-21k":
    try:
        unseen = [c for c in combined_classes(sense_names, "imagenet-21k") if c.wnid not in space]
    except WildLensError:  # no IN-21k class under the sense(s) either
        unseen = []

tab_tree, tab_table, tab_unseen = st.tabs(["Hyponym tree", "Classes", f"Not in {label_space} ({len(unseen)})"])
with tab_tree:
    edges = list(dict.fromkeys(e for name in sense_names for e in hyponym_tree(name, label_space)))
    class_synsets = {c.synset for c in classes}
    if len(edges) > 400:
        st.caption(f"The tree has {len(edges)} edges; too large to draw. See the Classes tab.")
    else:
        wnid_of_synset = {c.synset: c.wnid for c in classes}
        name_of_synset = {c.synset: c.name for c in classes}

        def quoted(text: str) -> str:
            # A DOT string literal: WordNet names may hold quotes and backslashes.
            return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'

        def node(name: str) -> str:
            if name in class_synsets:
                # The class's name over its wnid (DOT's \n: a line break); the synset name on hover.
                label = quoted(name_of_synset[name])[:-1] + "\\n" + wnid_of_synset[name] + '"'
                return (f'{quoted(name)} [label={label}, tooltip={quoted(name)}, shape=box, style="filled,rounded", '
                        'fillcolor="#cfe3ff"]')
            if name in sense_names:
                return f'{quoted(name)} [shape=box, style="rounded,bold"]'
            return f"{quoted(name)} [shape=box, style=rounded]"

        nodes = sorted({n for e in edges for n in e} | set(sense_names))
        dot = ['digraph { rankdir=LR; node [fontsize=11, fontname="Helvetica"]; edge [arrowsize=0.6];']
        dot += [node(n) for n in nodes] + [f"{quoted(a)} -> {quoted(b)}" for a, b in edges] + ["}"]
        st.graphviz_chart("\n".join(dot), width="content")
        st.caption("Filled boxes are classes of the label space; the others are WordNet concepts on the way"
                   + (", from each chosen sense (bold)." if len(sense_names) > 1 else "."))
with tab_table:
    table = classes_table(classes)
    show_table(table, docs=CLASS_DOCS, labels=CLASS_LABELS)
    download_csv(table, f"classes_{sense_record}_{label_space}.csv", key="dl-classes", label_space=label_space)

with tab_unseen:
    if not unseen:
        st.caption(f"Every ImageNet-21k class under {sense_shown} is a class of {label_space}.")
    else:
        unseen_table = pd.DataFrame({"wnid": [c.wnid for c in unseen], "name": [c.name for c in unseen],
                                     "synset": [c.synset for c in unseen],
                                     "definition": [c.definition for c in unseen]})
        if len(sense_names) > 1:
            unseen_table.insert(3, "senses", [", ".join(c.senses) for c in unseen])
        # Ranking all 21,843 concepts takes a few seconds the first time (then it is cached), so
        # it waits for the analyst to ask.
        if st.toggle("Rank them against the seen classes (ImageNet-CoG similarity and level)", key="unseen_cog"):
            levels = concepts_table(label_space).reindex(unseen_table["wnid"])
            at = list(unseen_table.columns).index("definition")
            unseen_table.insert(at, "sim_to_seen", levels["sim_to_seen"].to_numpy())
            unseen_table.insert(at + 1, "level", levels["level"].to_numpy())
            unseen_table.insert(at + 2, "nearest_seen", [f"{n} ({w})" if isinstance(w, str) else None
                                                         for n, w in zip(levels["nearest_seen_name"],
                                                                         levels["nearest_seen_wnid"])])
            unseen_table.insert(at + 3, "eligible", levels["eligible"].to_numpy())
            unseen_table.insert(at + 4, "reason", levels["reason"].to_numpy())
        st.caption(f"ImageNet-21k classes under {sense_shown} that no {label_space} model can name. *Sim. to "
                   f"seen*: the best Lin similarity to a {label_space} class (ImageNet-CoG); *Level*: the CoG concept "
                   f"generalization level (1 closest, 5 farthest; {NA_DASH} outside the five levels). A model's "
                   "answer for them is judged by how close it comes to the nearest seen class.")
        show_table(unseen_table, docs=CLASS_DOCS, labels=CLASS_LABELS)
        download_csv(unseen_table, f"unseen_{sense_record}_{label_space}.csv", key="dl-unseen",
                     label_space=label_space)

# ---------------------------------------------------------------- collect
LEAVE_OUT_FROM = 200  # classes: above this many the box lists the ones left out, not the ones kept (below)
st.divider()
st.subheader("Collect images into a new run")
several = len(sense_names) > 1
sense_of = {c.wnid: ", ".join(c.senses) for c in classes + unseen}
wnids = [c.wnid for c in classes]


def class_label(w: str) -> str:
    return f"{space.display_name(w)} ({w}" + (f", {sense_of[w]})" if several else ")")


if len(wnids) <= LEAVE_OUT_FROM:
    chosen = st.multiselect("Classes", wnids, default=wnids, format_func=class_label)
else:
    # Many classes: all are collected unless picked here. Why: Streamlit matches each preselected value against the
    # options one by one, so 'entity' in ImageNet-21k (21,843 preselected) took 4 of its 6 s a rerun, and a box of
    # a thousand chips cannot be read (a UI review and a hostile check, 2026-12-08).
    left_out = set(st.multiselect(f"Classes: all {len(wnids):,} are collected; pick any to leave out", wnids,
                                  format_func=class_label, placeholder="None left out"))
    chosen = [w for w in wnids if w not in left_out]
if unseen:
    extra = st.multiselect(f"Also collect classes that {label_space} models have not seen", [c.wnid for c in unseen],
                           format_func=lambda w: f"{get_label_space('imagenet-21k').display_name(w)} ({w})",
                           help="Their strict accuracy is NA (the models cannot name them); the metrics say how "
                                "close the predictions come to the nearest class the models know.")
    chosen = chosen + [w for w in extra if w not in chosen]
c1, c2, c3 = st.columns(3)
# persist_state: k and the engine are drawn below the senses, and a word that asks for a sense stops
# the page above them; st.stop() skips Streamlit's clean-up of the widgets it did not draw, so without
# it the server kept k while the browser dropped it, and a tick brought k back at its default, 1 (issue
# 22 item 21). The analyst's k and engine now stay for the session, across words and pages.
k = c1.number_input("Images per class (k)", min_value=1, max_value=500, key="k", persist_state="session")
# What k buys (core.intervals, SPEC "Uncertainty"): the accuracy's worst-case 95 % half-width per class.
c1.caption(format_half_width(int(k)) + f"; ±{DEFAULT_HALF_WIDTH * 100:.0f} points needs "
           f"{images_needed(DEFAULT_HALF_WIDTH):,}.")
engines = available_engines()  # the crawler's own list, with a note per engine
engine = c2.selectbox("Search engine", list(engines), key="engine", persist_state="session",
                      help=" ".join(f"{name}: {note}" for name, note in engines.items() if note)
                      or "Bing works best; Flickr needs an API key.")
title = c3.text_input("Run title", value=f"{sense_shown} · {label_space}")

# The search terms, one row per chosen class: what crawl_run would search, editable.

TERMS = "search terms"
terms: dict[str, list[str]] = {}
terms_ok = bool(chosen)
if chosen:
    defaults = default_search_terms(chosen, label_space)
    names = {w: (space if w in space else get_label_space("imagenet-21k")).display_name(w) for w in chosen}
    shared = {w: sorted({o for others in homonyms(w, label_space).values() for o in others}) for w in chosen}
    editor_rows = pd.DataFrame({
        "name": [names[w] for w in chosen], "wnid": chosen,
        "sense": [sense_of.get(w, "") for w in chosen],
        TERMS: ["; ".join(defaults[w]) for w in chosen],
        "shares a name with": [", ".join(f"{space.display_name(o)} ({o})" for o in shared[w]) for w in chosen],
    })
    st.markdown("**Search terms**")
    st.caption("What the engine is asked for each class, tried in turn until k images are accepted. Edit a cell to "
               "change it; separate several terms with ‘;’. A name two classes share is searched with a word of "
               "the class's hypernym (the bird 'crane' as 'crane bird'), never alone.")
    digest = hashlib.sha1("|".join([label_space, sense_record, *chosen]).encode()).hexdigest()[:12]
    edited = st.data_editor(
        editor_rows, key=f"terms-{digest}", hide_index=True, width="stretch",
        disabled=[c for c in editor_rows.columns if c != TERMS],
        column_config={"name": st.column_config.TextColumn("Class", help="ImageNet's name of the class."),
                       "wnid": st.column_config.TextColumn("Class id", help="The class's WordNet 3.0 id."),
                       "sense": st.column_config.TextColumn("Sense", help="The chosen sense the class lies under."),
                       TERMS: st.column_config.TextColumn("Search terms", help="Searched in this order; several "
                                                          "terms are separated by ‘;’.", width="large"),
                       "shares a name with": st.column_config.TextColumn(
                           "Shares a name with", help="Other classes of the label space with one of this class's "
                                                      "names.")})
    empty_terms = []
    for wnid, text in zip(edited["wnid"], edited[TERMS]):
        try:
            terms[wnid] = clean_search_terms("" if text is None or pd.isna(text) else str(text))
        except WildLensError as exc:
            show_error(exc)
            terms_ok = False
        if not terms.get(wnid):
            empty_terms.append(f"{names[wnid]} ({wnid})")
    if empty_terms:
        st.warning(f"Give at least one search term for {', '.join(escape_markdown(n) for n in empty_terms)}.")
        terms_ok = False


def new_run(source: str):
    return store().create_run(title=title, query=query, sense=sense_record, label_space=label_space,
                              wnids=list(chosen), images_per_class=int(k), source=source)


st.caption("Images are validated, de-duplicated (also across classes) and stored by content hash; re-running a run "
           "tops it up to k.")
if st.button("Create run and crawl", type="primary", disabled=not (chosen and terms_ok)):
    from crawl import CrawlConfig, EngineUnreachable, check_engine, crawl_run

    with st.spinner(f"Checking that {engine} can be reached…"):
        reach = check_engine(engine)
    if not reach.ok:
        st.error(f"Cannot reach {escape_markdown(reach.host)}: {escape_markdown(reach.detail)}. No internet? Bring "
                 "your own images on the Import page, **Import a local folder** (one sub-folder per class, named by "
                 "wnid or class name).", icon=":material/wifi_off:")
        st.page_link(IMPORT_PAGE, label="Import a local folder instead", icon=":material/drive_folder_upload:")
        st.stop()
    run = new_run(f"crawl:{engine}")
    make_current(run.run_id)  # current at once: also when the crawl stops part-way (what it fetched is kept there)
    try:
        with st.status(f"Crawling {plural(len(chosen), 'class')} into {run.run_id}…", expanded=True) as status:
            summary = crawl_run(run, list(chosen), int(k), engine=engine, config=CrawlConfig(),
                                progress=progress_bar(), search_terms=terms)
            status.update(label=f"Crawl finished: {plural(summary.new_accepted, 'image')} accepted", state="complete")
    except EngineUnreachable as exc:
        show_error(exc, note=f"What was fetched before is kept in run {run.run_id}.", icon=":material/wifi_off:")
        st.stop()
    except WildLensError as exc:
        show_error(exc)
        st.stop()
    show_table(with_names(summary.per_class, label_space), docs=CRAWL_DOCS, labels={"wnid": "Class id", "name": "Class"})
    download_csv(summary.per_class, f"{run.run_id}_crawl_summary.csv", key="dl-crawl-summary",
                 label_space=label_space)
    for note in summary.notes:  # engine texts and search terms: outside text
        st.caption(escape_markdown(note))
    open_run_link(run.run_id)
st.page_link(IMPORT_PAGE, label="Import a local folder instead", icon=":material/drive_folder_upload:",
             help="No internet, or images of your own: one sub-folder per class, named by wnid or class name.")
