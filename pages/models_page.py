"""Models: the registry grouped CNN / transformer, which weights are usable here, and inference.

Inference runs on the local engine (this process) or, when Ray is installed, on Ray Data actors
(classify.engine.ray_engine): a Ray instance started in the dashboard's process, or a cluster. Without
Ray the engine choice is still shown, disabled, with the command that installs it: someone who
read about ``--engine ray`` finds where it would be and what it takes, instead of an option that
silently is not there.

*Also store features (for Probes)* is ``python -m classify --run RUN --features``: the same
library step (``classify.features.feature_options``, then ``predict_run``) stores each image's
frozen features beside its predictions, for the Probes page and ``python -m probe``. A run of
uploaded predictions (no images) gets no run form: the page says why and links to Import.
"""
import os

import pandas as pd
import streamlit as st

from classify.engine.options import DEFAULT_RESAMPLER, DEVICES, PRECISIONS, RESAMPLERS, split_model_id
from classify.models.registry import FAMILIES, FAMILY_TITLES
from core.errors import WildLensError
from core.serving import sharing
from pages.tables import download_csv, show_table
from pages.text import escape_markdown, plural, progress_bar, show_error
from pages.server import hold_ray_for_the_server
from pages.reads import manifest, model_family, predictions_only, predictions_only_note
from pages.run_state import page_link, require_run

REGISTRY_DOCS = {
    "usable": "Weights found on this machine (caches and installed packages only; nothing is downloaded).",
    "id": "The model's registry id: what predictions, tables and the command line call it.",
    "model": "The architecture's name.", "family": "CNN or transformer.",
    "label space": "The classes the model predicts (ImageNet-1k, -21k, ...).",
    "params (M)": "Parameters, in millions.", "input": "Input size, centre-crop fraction and resize interpolation.",
    "source": "Where the weights come from, and which.", "paper": "The paper that introduced the model.",
    "weights": "Where the weights were found, or the one command that fetches them on a machine with internet.",
}
REPORT_DOCS = {"model": "The model's registry id.", "predicted": "Predictions stored now (status ok).",
               "failed": "Images that could not be classified now (stored with status failed).",
               "skipped": "Images whose prediction was stored before: not classified again.",
               "rechecked": "int8 (the int8 -> fp32 cascade): images of this call whose int8 top-1 margin was at or "
                            "below the gate, so the fp32 model classified them again; each stored row says so "
                            "(int8_rechecked)."}


@st.cache_data(ttl=30, show_spinner="Looking for weights on this machine…")
def registry_table() -> pd.DataFrame:
    """One row per registered model with its weights status (no network access: local caches only)."""
    from classify.models.registry import list_models, listed_input_configs
    from classify.models.weights import weights_status

    rows = []
    entries = list_models()
    statuses = [weights_status(entry) for entry in entries]  # first: a missing listing is built with the others
    inputs = listed_input_configs(entries)
    for entry, status in zip(entries, statuses):
        cfg = inputs[entry.id]
        rows.append({"usable": status.available, "id": entry.id, "model": entry.name, "family": entry.family,
                     "label space": entry.label_space, "params (M)": round(entry.num_params / 1e6, 1),
                     "input": f"{cfg.size}px, crop {cfg.crop_pct:g}, {cfg.interpolation}",
                     "source": f"{entry.source}: {entry.weights}", "paper": entry.paper,
                     "weights": status.describe()})
    return pd.DataFrame(rows)


def registry_section(table: pd.DataFrame, label_space: str) -> None:
    """The whole registry per family, with where each model's weights are, and its CSV."""
    with st.expander(f"All {plural(len(table), 'registered model')}, with where their weights are"):
        for family in FAMILIES:
            part = table[table["family"] == family]
            if part.empty:  # e.g. no hybrid in the curated registry: no empty group
                continue
            st.subheader(f"{FAMILY_TITLES[family]} · {int(part['usable'].sum())} of {len(part)} usable here")
            show_table(part[["usable", "id", "model", "label space", "params (M)", "input", "paper", "weights"]],
                       docs=REGISTRY_DOCS, labels={"id": "Model id", "model": "Architecture"},
                       column_config={"usable": st.column_config.CheckboxColumn(
                           "Usable", help="`usable`: " + REGISTRY_DOCS["usable"])})
    download_csv(table, "models.csv", key="dl-models", label="Download the model list (CSV)", label_space=label_space)


st.title("Models")
run = require_run()
table = registry_table()
st.caption("Weights are looked for in this machine's caches only (Hugging Face, torch hub, installed packages); "
           "nothing is downloaded. A model marked unusable shows the one command that fetches its weights on a "
           "machine with internet.")
if predictions_only(run):  # uploaded predictions: nothing to classify
    predictions_only_note("no model can classify it here",
                          "To classify the images with these or other models, import them as a new run on the Import "
                          "page and run the models on it here. The registry below says which weights this machine has.")
    registry_section(table, run.info.label_space)
    st.stop()

# A compact picker per family: only models whose weights are on this machine can be picked; a new
# run starts with all of them ticked, a run that has models keeps its own. The full registry (with
# the fetch command of every model that lacks weights) is below it.
usable = table[table["usable"]]
done_here = list(dict.fromkeys(b for b in (split_model_id(m)[0] for m in run.info.models) if b in set(usable["id"])))
PICK = f"pick-{run.run_id}"  # one selection per run: switching runs starts from that run's own models
if PICK not in st.session_state:
    st.session_state[PICK] = done_here or usable["id"].tolist()


# --------------------------------------------------------------------------- any model by its own name
# Beyond the registry (issue 13): every pretrained timm name, torchvision weights and cached
# hf-hub model; the table is classify.models.zoo.search_table's (python -m classify models --search).
# Drawn above the picker so that "Add" changes the picker's options before the picker is drawn.
@st.cache_data(ttl=30, show_spinner="Searching timm and torchvision…")
def zoo_search(text: str) -> tuple[pd.DataFrame, int]:
    from classify.models.zoo import search_table

    return search_table(text, limit=200)


EXTRA = f"extra-models-{run.run_id}"  # names outside the registry added to this run's picker
# A stored id may carry a precision ('efficientnet_lite0--bf16'): the picker holds the model itself.
st.session_state.setdefault(EXTRA, list(dict.fromkeys(
    base for base in (split_model_id(m)[0] for m in run.info.models) if base not in set(table["id"]))))


def _add_found(names: list[str]) -> None:
    st.session_state[EXTRA] = list(dict.fromkeys(st.session_state[EXTRA] + names))
    st.session_state[PICK] = list(dict.fromkeys(st.session_state.get(PICK, []) + names))


with st.expander("Any timm, torchvision or Hugging Face model by its own name"):
    query = st.text_input("Search model names", key="zoo-search", placeholder="convnext",
                          help="Names across timm, torchvision and the Hub models in this machine's Hugging Face "
                               "cache. Any of them runs with: python -m classify --models NAME (label space and "
                               "family are inferred; --checkpoint NAME=PATH for a local weights file).")
    if query.strip():
        try:
            found, total = zoo_search(query.strip())
        except WildLensError as exc:
            show_error(exc)
        else:
            st.caption(f"{plural(total, 'name')} contain “{escape_markdown(query.strip())}”"
                       + (f"; the first {len(found)} are shown" if total > len(found) else "")
                       + ". Weights are looked for on this machine only; the last column fetches them online.")
            st.dataframe(found, hide_index=True, width="stretch")
            download_csv(found, "model-search.csv", key="dl-model-search", label="Download these names (CSV)")
            here = found.loc[found["weights here"].eq("yes") & found["in registry"].eq(""), "name"].tolist()
            if here:
                add = st.multiselect("Add to the models to run (weights on this machine)", here, key="zoo-add")
                st.button("Add", on_click=_add_found, args=(add,), disabled=not add)
            else:
                st.caption("None of these has weights on this machine: fetch them with the command in the "
                           "table (online), then search again.")


def _select_all_usable() -> None:
    st.session_state[PICK] = usable["id"].tolist() + [m for m in st.session_state[EXTRA] if m not in set(table["id"])]


names = dict(zip(table["id"], table["model"]))
extras = [m for m in st.session_state[EXTRA] if m not in names]  # added by name from the search above
options = usable["id"].tolist() + extras
left, right = st.columns([4, 1])
selected = left.multiselect(
    f"Models to run · {len(usable)} of {plural(len(table), 'registered model')} have weights here"
    + (f", {plural(len(extras), 'more model')} added by name" if extras else ""),
    options, key=PICK, format_func=lambda m: names.get(m, m),  # ids: in the registry table below
    help="Grouped by family below. A model without weights on this machine cannot be picked: its row in the "
         "table says how to fetch them. Models outside the registry are added with the search above.")
right.button("Select all usable", on_click=_select_all_usable, width="stretch")
family_of = dict(zip(table["id"], table["family"])) | {m: model_family(m) for m in extras}
st.caption(" · ".join(f"{FAMILY_TITLES[f]}: {sum(family_of.get(m) == f for m in selected)} picked of "
                      f"{int((usable['family'] == f).sum()) + sum(family_of[m] == f for m in extras)} usable"
                      for f in FAMILIES if (table["family"] == f).any() or any(family_of[m] == f for m in extras)))

registry_section(table, run.info.label_space)
images = manifest(run)
n_images = int(((images["status"] == "accepted") & ~images["excluded"].astype(bool)).sum()) if not images.empty else 0
runnable = list(selected)

st.divider()
# run.json's model list is outside text (a run copied from elsewhere): escaped. A slot, so that it
# shows the run's models after an inference below, not the list from before it.
state_line = st.empty()


def show_state() -> None:
    state_line.markdown(f"**{plural(n_images, 'usable image')}** in run `{run.run_id}` · models already run: "
                        f"{escape_markdown(', '.join(run.info.models)) or 'none'}")


show_state()

ENGINES = {"local": "Local (this machine)", "ray": "Ray (actors on a Ray instance or cluster)"}
RAY_FOR = ("Ray is for a cluster or many GPUs; on one small machine the local engine is faster. Every worker needs "
           "WildLens installed (`pip install -e '.[ray]'`, same version) and this run's store on a shared "
           "filesystem: at the same path as here, or where the node's Ray was started with WILDLENS_HOME.")
RAY_HELP = ("Local: this process classifies. Ray: Ray Data actors, each holding the models once, classify shares "
            "of the images and this process stores the rows (the same rows and resume as local). " + RAY_FOR)


def engine_options() -> tuple[str, str | None, int | None]:
    """The engine row of the options: (engine, Ray address or None, Ray actors or None)."""
    from classify.engine import ray_engine

    if not ray_engine.ray_available():
        st.radio("Engine", list(ENGINES), format_func=ENGINES.get, horizontal=True, disabled=True,
                 key="engine-choice-off", help=RAY_HELP)
        st.caption("Ray is not installed here: `pip install -e '.[ray]'`, then restart the dashboard, to run on "
                   "Ray actors (python -m classify --engine ray on the command line).")
        return "local", None, None
    engine = st.radio("Engine", list(ENGINES), format_func=ENGINES.get, horizontal=True, key="engine-choice",
                      help=RAY_HELP)
    if engine != "ray":
        return "local", None, None
    r1, r2 = st.columns([3, 1])
    address = r1.text_input("Ray cluster address", key="ray-address", placeholder="blank: RAY_ADDRESS, else local",
                            help="e.g. ray://head:10001 or auto. Blank: the RAY_ADDRESS variable when it is set, "
                                 "else a Ray instance started in the dashboard's process.").strip()
    actors = r2.number_input("Ray actors (0 = automatic)", 0, 1024, 0, key="ray-actors",
                             help="Each actor holds the models once. Automatic: one per GPU of the cluster, else 1.")
    if address and sharing():  # joining a cluster lets it run code in this process (core/serving.py)
        st.warning("A shared dashboard joins only the cluster its operator set (RAY_ADDRESS); the address typed "
                   "here is not used.")
        address = ""
    env = os.environ.get("RAY_ADDRESS", "").strip()
    if address:
        where = f"Joins the Ray cluster at {escape_markdown(address)} (checked for a connection first)."
    elif env:
        where = f"Joins the Ray cluster at {escape_markdown(env)} (RAY_ADDRESS)."
    else:
        where = ("RAY_ADDRESS is not set: a local Ray instance in the dashboard's process, started by the first Ray "
                 "run (a few seconds) and kept for later ones.")
    st.caption(RAY_FOR + " " + where)
    return "ray", address or None, int(actors) or None


with st.expander("Options"):
    c1, c2, c3, c4 = st.columns(4)
    batch_size = c1.number_input("Batch size (0 = automatic)", 0, 512, 0)
    device = c2.selectbox("Device", DEVICES, help="auto: CUDA, then MPS, then CPU.")
    from classify.engine.device import cpu_bf16_instructions

    bf16_here = ", ".join(cpu_bf16_instructions()) or "none"
    precision = c3.selectbox("Precision", PRECISIONS,
                             help="auto: bf16/fp16 autocast on a GPU, fp32 on the CPU. fp32 on a GPU is true fp32. "
                                  f"bf16 on the CPU needs native bf16 instructions (this CPU: {bf16_here}). int8: "
                                  "CNNs only, ONNX Runtime static quantization calibrated on a fixed packaged set, "
                                  "with fp32 re-checking the images int8 is unsure of. Results of bf16 / int8 are "
                                  "stored as MODEL--bf16 / MODEL--int8, beside fp32's.")
    # python -m classify --int8-recheck none: int8 alone, its own model id (classify.engine.options.PLAIN_INT8).
    int8_alone = precision == "int8" and c3.checkbox(
        "int8 alone", key="int8-alone",
        help="No fp32 re-check: faster, but top-1 agrees with fp32 on only 92-97 % of the benchmark's views. "
             "Stored as MODEL--int8-plain. Without it, fp32 classifies again every image whose int8 top-1 "
             "probability margin is at or below a gate chosen on the calibration set (>= 99.5 % agreement there).")
    resampler = c4.selectbox("Resize", RESAMPLERS, index=RESAMPLERS.index(DEFAULT_RESAMPLER),
                             help="torch: torchvision's uint8 kernel, 2-3x faster, within 1/255 of Pillow on under "
                                  "1% of the values. pil: Pillow, exactly the pixels of timm's eval transform.")
    engine, ray_address, ray_actors = engine_options()
# Zero-shot (language-augmented) models classify into a label set chosen here, with prompts built
# from each class's wnid by a recipe (classify.zeroshot.prompts); the same choices as python -m classify's
# --label-set, --names, --knowledge, --templates and --style.
zero_shot = [m for m in runnable if family_of.get(m) == "language-augmented"]
if zero_shot:
    with st.container(border=True):
        st.markdown(f"**Zero-shot: {plural(len(zero_shot), 'model')}** · the label set and the prompts")
        label_sets = ["run", "imagenet-1k", "imagenet-21k"] + [f"sense:{s}" for s in (run.info.sense or "").split("+") if s]
        z1, z2, z3, z4 = st.columns(4)
        label_set = z1.selectbox("Label set", label_sets, key="zs-label-set",
                                 help="run: this run's classes. A label space: all its classes. sense:S: every "
                                      "WordNet noun under the sense, ImageNet class or not.")
        knowledge = z2.selectbox("Knowledge", ["name", "def", "path", "def+path"], key="zs-knowledge",
                                 help="What the prompt adds to the class name: nothing, its WordNet definition, the "
                                      "lemmas of its hypernym chain, or both (ELEVATER's knowledge, by wnid).")
        templates = z3.selectbox("Templates", ["openai80", "simple7"], key="zs-templates",
                                 help="OpenAI's 80 ImageNet templates, or open_clip's 7.")
        style = z4.selectbox("Prompt style", ["plain", "elevater"], key="zs-style",
                             help="plain: a readable sentence; elevater: ELEVATER's exact format.")
# python -m classify --run RUN --features: the same pass also stores each image's frozen features, which
# the Probes page maps and python -m probe trains its probes on (classify.features).
store_features = st.checkbox(
    "Also store features (for Probes)", key="store-features",
    help="Also store each image's frozen features in the run (features/<model>/: a classifier's pooled pre-logit "
         "features, a zero-shot model's image embedding), taken in the same pass as the predictions: the Probes "
         "page maps them and `python -m probe` trains its probes on them. Every model then runs on PyTorch (int8 "
         "is ONNX Runtime only: refused), and images whose predictions are stored without features are classified "
         "again for them. The same as `python -m classify --run RUN --features`.")
if st.button(f"Run {plural(len(runnable), 'model')}", type="primary", disabled=not runnable or n_images == 0):
    import contextlib

    from classify.engine.types import InferenceOptions
    from classify.targets import predict_run

    # Worker processes are for the command line; inside the server one process decodes.
    options = InferenceOptions(batch_size=batch_size or None, device=device, num_workers=0, precision=precision,
                               int8_recheck="none" if int8_alone else "auto",
                               resampler=resampler, engine=engine, ray_address=ray_address, ray_actors=ray_actors)
    try:
        if store_features:  # the command line's own step (classify.cli): features on, PyTorch backend
            from classify.features import feature_options

            options = feature_options(options)
        with st.status(f"Classifying {plural(n_images, 'image')} with {plural(len(runnable), 'model')}"
                       + (" and storing their features" if store_features else "")
                       + (" on Ray" if engine == "ray" else "") + "…", expanded=True) as status:
            if engine == "ray":
                st.caption("Ray: joining or starting the instance, checking every node, then loading the models "
                           "on the actors; progress follows per batch stored.")
                wait_line = st.empty()
                joining = ray_address or os.environ.get("RAY_ADDRESS")

                def waiting(seconds: float) -> None:
                    wait_line.caption(f"Waiting for Ray{f' at {escape_markdown(joining)}' if joining else ''}: "
                                      f"{seconds:.0f} s")

                hold_ray_for_the_server(ray_address, waiting)  # not from this script thread: pages.server says why
                wait_line.empty()
            models = [m for m in runnable if m not in zero_shot]
            settings = contextlib.nullcontext()
            if zero_shot:
                from classify.zeroshot.prompts import Recipe
                from classify.zeroshot.classifier import build_settings
                from classify.zeroshot_runs import zero_shot_models

                entries, _ = zero_shot_models(zero_shot, label_set, Recipe(knowledge=knowledge, templates=templates,
                                                                           style=style), run=run)
                models += entries
                settings = build_settings(progress=progress_bar(), device=device)  # the text classifier's build
            with settings:
                report = predict_run(run, models, options, progress_bar())
            # report.engine names the Ray instance or the cluster's address (outside text): escaped.
            on = f" on {report.device}" if report.engine == "local" else ""  # Ray's device is its actors'
            status.update(label=f"Done in {report.seconds:.1f} s{on} · engine: {escape_markdown(report.engine)}",
                          state="complete")
    except WildLensError as exc:  # missing weights; a device or precision this machine lacks
        show_error(exc)
        st.stop()
    reported = pd.DataFrame([vars(r) for r in report.models.values()])
    if reported["rechecked"].isna().all():  # no int8 cascade ran: the column would say nothing
        reported = reported.drop(columns="rechecked")
    show_table(reported, docs=REPORT_DOCS, width="content")
    st.caption(escape_markdown(report.summary()))
    show_state()  # run.json now lists the models just run
    if store_features:
        from classify.features import features_summary

        for line in features_summary(run, list(report.models)).splitlines():  # names folders: escaped
            st.caption(escape_markdown(line))
    st.success(("Predictions and features" if store_features else "Predictions") + " stored. Re-running skips "
               "what is stored.")
    page_link("pages/results_page.py", run.run_id, "See the results", icon=":material/leaderboard:")
    if store_features:
        page_link("pages/probes_page.py", run.run_id, "See the embedding map (Probes)", icon=":material/show_chart:")
