"""The Models page's picker with stored ids that carry a precision ('efficientnet_lite0--bf16'), and
the search of any timm / torchvision name (classify.zoo)."""
import shutil

from core.runstore import RunStore
from tests.pages.test_app import app, app_home, open_page  # noqa: F401  (fixtures)


def test_a_precision_suffix_picks_the_model_itself(app_home, app):  # noqa: F811
    store = RunStore(app_home)
    sample = store.open_run("sample")
    target = store.runs_dir / "bf16-run"
    shutil.copytree(sample.path, target)
    run = store.open_run("bf16-run")
    run.update_info(title="bf16 run", is_sample=False,
                    models=["efficientnet_lite0--bf16", "efficientnet_lite0--int8", "efficientnet_lite1"])
    at = open_page(app, "models")  # a rerun: the sidebar lists the new run
    at.sidebar.selectbox(key="run_id").set_value("bf16-run").run()
    assert not at.exception, [e.value for e in at.exception]
    picker = at.multiselect(key="pick-bf16-run")
    # The run's own models, once each, as registry ids; nothing 'added by name'.
    assert picker.value == ["efficientnet_lite0", "efficientnet_lite1"]
    assert "added by name" not in picker.label
    assert "bf16 on the CPU needs native bf16" in [s for s in at.selectbox if s.label == "Precision"][0].help


def test_the_search_lists_names_beyond_the_registry(app):  # noqa: F811
    at = open_page(app, "models")
    at.text_input(key="zoo-search").input("convnext").run()
    assert not at.exception, [e.value for e in at.exception]
    [found] = [d.value for d in at.dataframe if "fetch command" in d.value.columns]
    names = found["name"].tolist()
    assert "convnext_atto.d2_in1k" in names and len(names) > 20
    assert any("names contain" in c.value for c in at.caption)
