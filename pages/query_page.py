"""Query: a word -> its WordNet sense -> the ImageNet classes under it -> a run with images."""
import pandas as pd
import streamlit as st

from core.errors import WildLensError
from crawl import available_engines
from core.labels import classes_table, get_label_space, hyponym_classes, hyponym_tree, label_space_names, senses
from pages.common import (concepts_table, download_csv, escape_markdown, open_run_link, progress_bar, show_error,
                          store)

st.title("Query")
st.caption("Type a word, pick its WordNet sense, see which ImageNet classes lie under it, then collect images.")

left, right = st.columns([2, 1])
query = left.text_input("Word, synset name (cat.n.01) or wnid", key="query")
label_space = right.selectbox("Label space", label_space_names(), key="label_space",
                              help="Which classifier outputs count as classes: ImageNet-1k, or the 21k/22k/12k spaces.")

try:
    found = senses(query, label_space)
except WildLensError as exc:
    show_error(exc)
    st.stop()

names = [s.name for s in found]
by_name = {s.name: s for s in found}
default = next((i for i, s in enumerate(found) if s.n_classes), 0)
sense_name = st.radio(
    "Sense", names, index=default,  # radio options are Markdown: WordNet glosses hold backticks and $
    format_func=lambda n: f"{n} · {by_name[n].n_classes} classes · {escape_markdown(by_name[n].definition)}",
)
sense = by_name[sense_name]
if sense.n_classes == 0:
    st.warning(f"No class of {label_space} lies under {sense.name}. Pick another sense, a more general word, "
               "or a larger label space such as imagenet-21k.")
    st.stop()

classes = hyponym_classes(sense.name, label_space)
st.subheader(f"{len(classes)} {label_space} classes under {sense.name}")

# ImageNet-21k hyponyms of the sense that this label space lacks: no model of it can name them
# (ImageNet-CoG's unseen concepts); shown with how close the seen classes come.
unseen = []
if label_space != "imagenet-21k":
    try:
        space = get_label_space(label_space)
        unseen = [c for c in hyponym_classes(sense.name, "imagenet-21k") if c.wnid not in space]
    except WildLensError:  # no IN-21k class under the sense either
        unseen = []

tab_tree, tab_table, tab_unseen = st.tabs(["Hyponym tree", "Classes", f"Not in {label_space} ({len(unseen)})"])
with tab_tree:
    edges = hyponym_tree(sense.name, label_space)
    class_synsets = {c.synset for c in classes}
    if len(edges) > 400:
        st.caption(f"The tree has {len(edges)} edges; too large to draw. See the Classes tab.")
    else:
        wnid_of_synset = {c.synset: c.wnid for c in classes}

        def quoted(text: str) -> str:
            # A DOT string literal: WordNet names may hold quotes and backslashes.
            return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'

        def node(name: str) -> str:
            if name in class_synsets:
                label = quoted(name)[:-1] + "\\n" + wnid_of_synset[name] + '"'  # DOT's \n: a line break
                return f'{quoted(name)} [label={label}, shape=box, style="filled,rounded", fillcolor="#cfe3ff"]'
            return f"{quoted(name)} [shape=box, style=rounded]"

        nodes = sorted({n for e in edges for n in e} | {sense.name})
        dot = ['digraph { rankdir=LR; node [fontsize=11, fontname="Helvetica"]; edge [arrowsize=0.6];']
        dot += [node(n) for n in nodes] + [f"{quoted(a)} -> {quoted(b)}" for a, b in edges] + ["}"]
        st.graphviz_chart("\n".join(dot), width="content")
        st.caption("Filled boxes are classes of the label space; the others are WordNet concepts on the way.")
with tab_table:
    table = classes_table(classes)
    st.dataframe(table, hide_index=True, width="stretch")
    download_csv(table, f"classes_{sense.name}_{label_space}.csv", key="dl-classes")

with tab_unseen:
    if not unseen:
        st.caption(f"Every ImageNet-21k class under {sense.name} is a class of {label_space}.")
    else:
        unseen_table = pd.DataFrame({"wnid": [c.wnid for c in unseen], "name": [c.name for c in unseen],
                                     "synset": [c.synset for c in unseen],
                                     "definition": [c.definition for c in unseen]})
        # Ranking all 21,843 concepts takes a few seconds the first time (then it is cached), so
        # it waits for the analyst to ask.
        if st.toggle("Rank them against the seen classes (ImageNet-CoG similarity and level)", key="unseen_cog"):
            levels = concepts_table(label_space).reindex(unseen_table["wnid"])
            unseen_table.insert(3, "sim_to_seen", levels["sim_to_seen"].to_numpy())
            unseen_table.insert(4, "level", levels["level"].to_numpy())
            unseen_table.insert(5, "nearest_seen", [f"{n} ({w})" if isinstance(w, str) else None
                                                    for n, w in zip(levels["nearest_seen_name"],
                                                                    levels["nearest_seen_wnid"])])
            unseen_table.insert(6, "eligible", levels["eligible"].to_numpy())
            unseen_table.insert(7, "reason", levels["reason"].to_numpy())
        st.caption(f"ImageNet-21k classes under {sense.name} that no {label_space} model can name. sim_to_seen: "
                   f"the best Lin similarity to a {label_space} class (ImageNet-CoG); level: CoG's concept "
                   "generalization level (1 closest, 5 farthest; empty outside the five levels). A model's "
                   "answer for them is judged by how close it comes to the nearest seen class.")
        st.dataframe(unseen_table, hide_index=True, width="stretch",
                     column_config={"sim_to_seen": st.column_config.NumberColumn(format="%.3f")})
        download_csv(unseen_table, f"unseen_{sense.name}_{label_space}.csv", key="dl-unseen")

st.divider()
st.subheader("Collect images into a new run")
chosen = st.multiselect("Classes", [c.wnid for c in classes], default=[c.wnid for c in classes],
                        format_func=lambda w: f"{get_label_space(label_space).display_name(w)} ({w})")
if unseen:
    extra = st.multiselect(f"Also collect classes that {label_space} models have not seen", [c.wnid for c in unseen],
                           format_func=lambda w: f"{get_label_space('imagenet-21k').display_name(w)} ({w})",
                           help="Their strict accuracy is NA (the models cannot name them); the metrics say how "
                                "close the predictions come to the nearest class the models know.")
    chosen = chosen + [w for w in extra if w not in chosen]
c1, c2, c3 = st.columns(3)
k = c1.number_input("Images per class (k)", min_value=1, max_value=500, key="k")
engines = available_engines()  # the crawler's own list, with a note per engine
engine = c2.selectbox("Search engine", list(engines), key="engine",
                      help=" ".join(f"{name}: {note}" for name, note in engines.items() if note)
                      or "Bing works best; Flickr needs an API key.")
title = c3.text_input("Run title", value=f"{sense.name} · {label_space}")


def new_run(source: str):
    return store().create_run(title=title, query=query, sense=sense.name, label_space=label_space,
                              wnids=list(chosen), images_per_class=int(k), source=source)


tab_crawl, tab_import = st.tabs(["Crawl the web", "Import a local folder"])
with tab_crawl:
    st.caption("Search terms come from each class's ImageNet lemmas. Images are validated, de-duplicated "
               "(also across classes) and stored by content hash; re-running a run tops it up to k.")
    if st.button("Create run and crawl", type="primary", disabled=not chosen):
        from crawl import CrawlConfig, EngineUnreachable, check_engine, crawl_run

        with st.spinner(f"Checking that {engine} can be reached…"):
            reach = check_engine(engine)
        if not reach.ok:
            st.error(f"Cannot reach {escape_markdown(reach.host)}: {escape_markdown(reach.detail)}. No internet? Bring your own images with "
                     "**Import a local folder** (one sub-folder per class, named by wnid or class name).",
                     icon=":material/wifi_off:")
            st.stop()
        run = new_run(f"crawl:{engine}")
        try:
            with st.status(f"Crawling {len(chosen)} classes into {run.run_id}…", expanded=True) as status:
                summary = crawl_run(run, list(chosen), int(k), engine=engine, config=CrawlConfig(),
                                    progress=progress_bar())
                status.update(label=f"Crawl finished: {summary.new_accepted} images accepted", state="complete")
        except EngineUnreachable as exc:
            show_error(exc, note=f"What was fetched before is kept in run {run.run_id}.", icon=":material/wifi_off:")
            st.stop()
        except WildLensError as exc:
            show_error(exc)
            st.stop()
        st.dataframe(summary.per_class, hide_index=True, width="stretch")
        download_csv(summary.per_class, f"{run.run_id}_crawl_summary.csv", key="dl-crawl-summary")
        for note in summary.notes:  # engine texts and search terms: outside text
            st.caption(escape_markdown(note))
        open_run_link(run.run_id)
with tab_import:
    st.caption("A folder on the machine that runs WildLens, laid out as `<wnid or class name>/<images>`. "
               "Nothing in it is changed; accepted images are copied into the run.")
    folder = st.text_input("Folder", placeholder="/data/my_images")
    if st.button("Create run from folder", disabled=not folder):
        from pathlib import Path

        from crawl import import_folder

        source = Path(folder).expanduser()
        if not source.is_dir():
            st.error("That is not a folder on this machine.")
            st.stop()
        run = new_run("import")
        try:
            summary = import_folder(source, run, label_space=label_space, progress=progress_bar())
        except WildLensError as exc:
            show_error(exc)
            st.stop()
        except OSError as exc:  # the folder vanished or cannot be read mid-import
            show_error(exc, note="Check that the folder is readable by the user running WildLens.")
            st.stop()
        st.success(f"Imported {summary.new_accepted} images of {summary.files_seen} files into {run.run_id}.")
        st.dataframe(summary.per_class, hide_index=True, width="stretch")
        download_csv(summary.per_class, f"{run.run_id}_import_summary.csv", key="dl-import-summary")
        for note in summary.notes:  # what was skipped and why: folder and file names, escaped
            st.caption(escape_markdown(note))
        open_run_link(run.run_id)
