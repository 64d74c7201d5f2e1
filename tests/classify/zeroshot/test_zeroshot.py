"""Zero-shot (language-augmented) models: open_clip as a model source, the text classifier, the runs.

Everything runs on a tiny randomly initialised open_clip model, a test double: its architecture is
added to open_clip's model configs here (never by the library), its random weights are saved as a
safetensors checkpoint in a temporary folder and given with --checkpoint, as a user gives a local
file. Its outputs are noise; only the plumbing is under test.
"""
from __future__ import annotations

import os
import socket
import subprocess
import sys

import numpy as np
import pytest
import torch

from classify.zeroshot.prompts import Recipe, class_prompts
from classify.models.registry import FAMILIES, FAMILY_TITLES, class_wnids, list_models
from classify.models.lookup import get_model
from classify.models.weights import count_parameters
from classify.models.registry import get_source
from classify.models.sources.openclip_source import clip_entry, is_clip_name, parse_clip_name, with_label_set, with_recipe
from classify.zeroshot.classifier import STAGE, ZeroShotHead, _prompt_chunks, build_settings, build_text_classifier
from classify.zeroshot_runs import zero_shot_models
from core.labels import get_label_space
from core.runstore import RunInfo, RunStore, valid_run_id
from tests.classify.doubles import TINY_CLIP, TINY_CLIP_CONFIG, register_tiny_clip
from tests.conftest import ROOT

pytestmark = pytest.mark.xdist_group("zeroshot")  # its module fixtures built once (tests/conftest.py)

open_clip = pytest.importorskip("open_clip")

TINY, TINY_CONFIG = TINY_CLIP, TINY_CLIP_CONFIG  # an open_clip architecture of the tests only
CAT = "sense:cat.n.01"
SIMPLE = Recipe(templates="simple7")


@pytest.fixture(scope="module")
def tiny_arch():
    from open_clip.factory import _MODEL_CONFIGS

    yield register_tiny_clip()
    _MODEL_CONFIGS.pop(TINY, None)


@pytest.fixture(scope="module")
def tiny_model(tiny_arch):
    entry = clip_entry(f"clip:{tiny_arch}")
    torch.manual_seed(0)
    model = get_source(entry).create(entry, device="cpu").eval()
    with torch.no_grad():
        model.logit_scale.fill_(np.log(50.0))  # a sharper softmax than random init's 1/0.07
    return entry, model


@pytest.fixture(scope="module")
def tiny_checkpoint(tiny_model, tmp_path_factory):
    from safetensors.torch import save_file

    _, model = tiny_model
    path = tmp_path_factory.mktemp("tiny_clip") / "tiny_clip.safetensors"
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(path))
    return path


# --------------------------------------------------------------------------- names and the registry
def test_registered_zero_shot_models_and_their_family():
    ids = {e.id for e in list_models("language-augmented")}
    assert {"clip/RN50.openai", "clip/ViT-B-32.openai", "clip/ViT-B-32.laion2b_s34b_b79k",
            "clip/ViT-B-32-256.datacomp_s34b_b86k", "clip/ViT-B-16.openai", "clip/MobileCLIP-S1.datacompdr"} <= ids
    assert "language-augmented" in FAMILIES and FAMILY_TITLES["language-augmented"]
    for entry in list_models("language-augmented"):
        assert entry.source == "clip" and entry.family == "language-augmented"
        assert valid_run_id(entry.id.replace("/", "_"))  # core.parts' rule for a model id
        assert get_model(f"clip:{entry.arch}.{entry.weights}") is entry
        assert entry.num_params == count_parameters(entry)


def test_input_configs_follow_open_clips_preprocessing():
    b32 = get_model("clip:ViT-B-32.openai").input_config()
    assert (b32.size, b32.resize_size, b32.crop_mode, b32.interpolation) == (224, 224, "center", "bicubic")
    assert b32.mean == pytest.approx((0.48145466, 0.4578275, 0.40821073))
    assert get_model("clip:ViT-B-32-256.datacomp_s34b_b86k").input_config().size == 256
    mobile = get_model("clip:MobileCLIP-S1.datacompdr").input_config()
    assert (mobile.size, mobile.interpolation, mobile.mean, mobile.std) == (256, "bilinear", (0.0,) * 3, (1.0,) * 3)


def test_names_recipes_and_stored_ids():
    plain = get_model("clip:ViT-B-32.openai")
    assert plain.id == "clip/ViT-B-32.openai" and plain.name == "CLIP ViT-B/32 (OpenAI)"
    with_def = get_model("clip:ViT-B-32.openai+def")
    assert with_def.id == "clip/ViT-B-32.openai__def" and with_def.family == "language-augmented"
    assert get_model("clip/ViT-B-32.openai__def") == with_def  # the stored form reads back
    assert get_model("CLIP:vit-b-32.OpenAI+path+def").id == "clip/ViT-B-32.openai__def__path"
    assert parse_clip_name(with_def.id).display == "clip:ViT-B-32.openai+def"
    assert with_recipe(plain, Recipe(knowledge="def")) == with_def and with_recipe(with_def, "") == plain
    assert get_model("clip/ViT-B-32.openai__def--bf16".rpartition("--")[0]) == with_def  # a precision id's base
    other = get_model("clip:ViT-L-14.openai")  # any open_clip pair, outside the registry
    assert other.id == "clip/ViT-L-14.openai" and other.num_params > 400_000_000
    assert is_clip_name("clip:x") and is_clip_name("clip/x") and not is_clip_name("clipper")
    from classify.models.registry import UnknownModelError

    with pytest.raises(UnknownModelError, match="no pretrained tag 'nope'.*openai"):
        get_model("clip:ViT-B-32.nope")
    with pytest.raises(UnknownModelError, match="no architecture"):
        get_model("clip:ViT-Q-99.openai")
    with pytest.raises(UnknownModelError, match="not a recipe part"):  # pages catch UnknownModelError
        get_model("clip:ViT-B-32.openai+nonsense")


def test_building_a_model_downloads_nothing(monkeypatch):
    """pretrained=None builds the architecture with random weights; neither tower's own pretrained
    weights nor a tokenizer is fetched (the BPE vocabulary ships in open_clip's wheel)."""
    def refuse(*args, **kwargs):
        raise AssertionError("network access")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    import huggingface_hub

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", refuse)
    for entry in list_models("language-augmented"):
        model = get_source(entry).create(entry, device="meta")
        assert sum(p.numel() for p in model.parameters()) == entry.num_params
        assert open_clip.get_tokenizer(entry.arch)(["a photo of a cat."]).shape == (1, 77)


def test_missing_weights_offline_name_the_fetch_command(tmp_path, monkeypatch, capsys):
    from classify.cli import main

    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-hf-cache"))
    import shutil

    from crawl.sample_photos import SAMPLE_PHOTOS, photo_path

    folder = tmp_path / "images" / "n02123045"
    folder.mkdir(parents=True)
    shutil.copy(photo_path(SAMPLE_PHOTOS[0]), folder / "chelsea.png")
    code = main(["--images", str(tmp_path / "images"), "--out", str(tmp_path / "p.csv"), "--models",
                 "clip:ViT-B-32.openai", "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and err.startswith("error: No weights for model 'clip/ViT-B-32.openai'")
    assert "python -c \"import open_clip; open_clip.create_model_and_transforms('ViT-B-32', pretrained='openai')\"" in err
    status = get_source("clip").locate(get_model("clip:ViT-B-32.openai"))
    assert not status.available and "timm/vit_base_patch32_clip_224.openai" in status.looked_in[0]


# --------------------------------------------------------------------------- the text classifier
@pytest.mark.parametrize("recipe", [SIMPLE, Recipe(knowledge="def", templates="simple7")], ids=lambda r: r.tag())
def test_text_classifier_equals_open_clips(tiny_model, recipe):
    """Same prompts, same ensemble: open_clip's build_zero_shot_classifier to 1e-6, in any chunking."""
    entry, model = tiny_model
    tokenizer = open_clip.get_tokenizer(entry.arch)
    wnids = get_label_space(CAT).wnids
    prompts = class_prompts(wnids, recipe)
    count = len(prompts[wnids[0]])
    templates = [lambda wnid, i=i: prompts[wnid][i] for i in range(count)]
    theirs = open_clip.zero_shot_classifier.build_zero_shot_classifier(model, tokenizer, list(wnids), templates,
                                                                      num_classes_per_batch=10).numpy()
    ours = build_text_classifier(model, tokenizer, wnids, recipe, chunk_classes=6, batch_prompts=32)
    assert ours.dtype == np.float32 and ours.shape == theirs.shape == (16, len(wnids))
    assert np.abs(ours - theirs).max() < 1e-6
    assert np.allclose(np.linalg.norm(ours, axis=0), 1.0, atol=1e-5)


def _towers():
    """open_clip text towers of each kind the context rule tells apart (tiny, random weights)."""
    from open_clip.transformer import TextTransformer

    kw = dict(context_length=77, vocab_size=49408, width=32, heads=2, layers=2, output_dim=16)
    torch.manual_seed(1)
    return {"causal-argmax": TextTransformer(**kw), "causal-eos": TextTransformer(**kw, pool_type="eos", eos_id=49407),
            "bidirectional": TextTransformer(**kw, no_causal_mask=True),
            "last": TextTransformer(**kw, pool_type="last"),
            "cls-token": TextTransformer(**kw, embed_cls=True)}


def test_the_text_context_is_cut_only_where_the_padding_cannot_change_the_embedding(tiny_model):
    """A causal tower pooled at end-of-text gives the full-context embedding with the context cut
    after the longest prompt; any other tower keeps 77 tokens and says why."""
    from classify.zeroshot.classifier import CUT_REASON, encode_text_cut, text_context_rule

    entry, model = tiny_model
    tokenizer = open_clip.get_tokenizer(entry.arch)
    tokens = tokenizer(["a photo of a tabby cat.", "a bad photo of the Egyptian cat, a kind of domestic cat.", "cat"])
    tower, reason = text_context_rule(model)  # open_clip's CLIP class: the tower's parts live on the model
    assert tower is model and reason == CUT_REASON
    with torch.inference_mode():
        assert torch.allclose(encode_text_cut(model, tokens), model.encode_text(tokens, normalize=True), atol=1e-6)
    for name, text_tower in _towers().items():
        text_tower.eval()
        custom = type("CustomTextCLIP", (), {"text": text_tower})()
        cut_tower, reason = text_context_rule(custom)
        if name.startswith("causal"):
            assert cut_tower is text_tower and reason == CUT_REASON
            with torch.inference_mode():
                full = torch.nn.functional.normalize(text_tower(tokens), dim=-1)
                assert torch.allclose(encode_text_cut(text_tower, tokens), full, atol=1e-6), name
        else:
            assert cut_tower is None and reason.startswith("full context: "), name
    with torch.inference_mode():  # a tower that attends both ways sees the padding: a cut would change it
        both_ways, length = _towers()["bidirectional"].eval(), int(tokens.argmax(-1).max()) + 1
        assert not torch.allclose(both_ways(tokens[:, :length]), both_ways(tokens), atol=1e-4)
    assert text_context_rule(object())[0] is None  # e.g. a Hugging Face text tower: full context


def test_cut_and_full_context_give_the_same_classifier(tiny_model, monkeypatch):
    """Sorted by length, cut per batch: the same class embeddings as in order at 77 tokens, to 1e-6."""
    from classify.zeroshot import classifier

    entry, model = tiny_model
    tokenizer = open_clip.get_tokenizer(entry.arch)
    prompts = list(class_prompts(get_label_space(CAT).wnids, Recipe(knowledge="def", templates="simple7")).values())
    full = classifier.encode_class_prompts(model, tokenizer, prompts, batch_prompts=16, cut_context=False)
    lengths = []
    real_cut = classifier.encode_text_cut
    monkeypatch.setattr(classifier, "encode_text_cut",
                        lambda tower, tokens: lengths.append(int(tokens.argmax(-1).max()) + 1) or real_cut(tower, tokens))
    cut = classifier.encode_class_prompts(model, tokenizer, prompts, batch_prompts=16)
    assert (cut - full).abs().max() < 1e-6
    assert lengths == sorted(lengths) and max(lengths) < 77  # sorted by length, each batch cut short


def test_chunks_hold_few_classes_and_keep_whole_set_names(monkeypatch):
    """Bounded memory: prompts are made a chunk at a time (plus the few classes sharing a name with
    one of the chunk's), and equal the whole set's: the two ImageNet 'crane's stay told apart."""
    import classify.zeroshot.prompts as prompts_module

    wnids = ("n02012849", "n01440764", "n02123045", "n03126707", "n07920052")  # crane (bird) ... crane (device)
    whole = class_prompts(wnids, SIMPLE)
    assert whole["n02012849"][0] != whole["n03126707"][0]
    sizes = []
    original = prompts_module.class_prompts

    def counting(chunk, recipe=None):
        sizes.append(len(chunk))
        return original(chunk, recipe)

    monkeypatch.setattr(prompts_module, "class_prompts", counting)
    chunked = [p for _, prompts in _prompt_chunks(wnids, SIMPLE, 1) for p in prompts]
    assert chunked == [whole[w] for w in wnids]
    assert sizes == [2, 1, 1, 2, 1]  # each crane comes with the other


def test_an_imagenet_21k_label_set_is_streamed(tiny_model, monkeypatch):
    """21,843 classes: never more than one chunk's prompts at once; progress per chunk."""
    import classify.zeroshot.prompts as prompts_module

    entry, model = tiny_model
    wnids = get_label_space("imagenet-21k").wnids[:600]  # the real set's first chunks; the rest is the same loop
    seen = []
    original = prompts_module.class_prompts
    monkeypatch.setattr(prompts_module, "class_prompts", lambda c, r=None: seen.append(len(c)) or original(c, r))
    events = []
    out = build_text_classifier(model, open_clip.get_tokenizer(entry.arch), wnids, Recipe(templates="simple7"),
                                chunk_classes=200, batch_prompts=700, progress=events.append, task="t")
    assert out.shape == (16, 600) and max(seen) <= 200 + 10
    assert [(e.stage, e.done, e.total) for e in events] == [(STAGE, 0, 600), (STAGE, 200, 600), (STAGE, 400, 600),
                                                            (STAGE, 600, 600)]


def test_the_classifier_is_cached_and_keyed(tiny_model, tiny_checkpoint, tmp_path, monkeypatch):
    import classify.zeroshot.classifier as zeroshot

    entry = with_recipe(with_label_set(tiny_model[0], CAT), SIMPLE)
    cache = tmp_path / "cache"
    events = []
    with build_settings(progress=events.append, cache_dir=cache):
        head = get_source(entry).load(entry, tiny_checkpoint)
        assert isinstance(head, ZeroShotHead) and head.classifier.shape == (16, len(class_wnids(entry)))
        files = sorted(cache.glob("*.npy"))
        assert len(files) == 1 and files[0].name.startswith(f"{TINY}-")
        assert np.array_equal(np.load(files[0], allow_pickle=False), head.classifier.numpy())
        assert events[-1].stage == STAGE and events[-1].done == events[-1].total == len(class_wnids(entry))

        def no_build(*args, **kwargs):
            raise AssertionError("rebuilt although cached")

        monkeypatch.setattr(zeroshot, "build_text_classifier", no_build)
        again = get_source(entry).load(entry, tiny_checkpoint)
        assert torch.equal(again.classifier, head.classifier)
        monkeypatch.undo()
        get_source(entry).load(with_recipe(entry, Recipe(knowledge="def", templates="simple7")), tiny_checkpoint)
        get_source(entry).load(with_label_set(entry, "imagenet-r"), tiny_checkpoint)
    assert len(list(cache.glob("*.npy"))) == 3  # another recipe, another label set: other files
    assert not list(cache.glob(".*"))  # no temporary file left


def test_the_head_outputs_logits_over_the_label_set_in_its_order(tiny_model, tiny_checkpoint, tmp_path):
    entry = with_recipe(with_label_set(tiny_model[0], CAT), SIMPLE)
    _, model = tiny_model
    with build_settings(cache_dir=tmp_path):
        head = get_source(entry).load(entry, tiny_checkpoint).eval()
    images = torch.randn(3, 3, 64, 64)
    with torch.no_grad():
        features = model.encode_image(images, normalize=True)
        tokenizer = open_clip.get_tokenizer(entry.arch)
        wnids = class_wnids(entry)
        prompts = class_prompts(wnids, SIMPLE)
        text = torch.stack([model.encode_text(tokenizer(prompts[w]), normalize=True).mean(0) for w in wnids])
        text = text / text.norm(dim=1, keepdim=True)
        expected = 50.0 * features @ text.T
        assert torch.allclose(head(images), expected, atol=1e-4)


# --------------------------------------------------------------------------- runs
def _sample_run():
    from crawl.sample_photos import SAMPLE_PHOTOS, write_sample_images

    store = RunStore()
    run = store.create_run(RunInfo(run_id="zs", title="zero-shot", wnids=sorted({p.wnid for p in SAMPLE_PHOTOS})))
    write_sample_images(run)
    return run


def test_a_zero_shot_run_with_a_local_checkpoint_feeds_explain_metrics(tiny_arch, tiny_checkpoint, capsys):
    """The issue's 'done when': offline, --checkpoint and --label-set sense:cat.n.01; the stored
    predictions are a classifier's (top-5 wnids of the label set, probabilities, the label set
    recorded as label_space) and python -m explain metrics reads them."""
    from classify.cli import main

    run = _sample_run()
    model = f"clip:{tiny_arch}+simple7"
    code = main(["--run", run.run_id, "--models", model, "--checkpoint", f"clip:{tiny_arch}={tiny_checkpoint}",
                 "--label-set", CAT, "--no-progress", "--workers", "0", "--device", "cpu"])
    assert code == 0, capsys.readouterr().err
    stored = run.read_predictions()
    assert set(stored["model"]) == {f"clip/{tiny_arch}__simple7"}
    assert len(stored) == 30 and (stored["status"] == "ok").all() and set(stored["label_space"]) == {CAT}
    cat_wnids = set(get_label_space(CAT).wnids)
    for column in ("pred_wnid", "pred_wnid_2", "pred_wnid_5"):
        assert set(stored[column]) <= cat_wnids
    assert (stored["prob_1"] >= stored["prob_2"]).all() and stored["prob_1"].between(0, 1).all()
    assert f"clip/{tiny_arch}__simple7" in RunStore().open_run(run.run_id).info.models

    done = subprocess.run([sys.executable, "-m", "explain", "metrics", "--run", run.run_id], cwd=ROOT,
                          capture_output=True, text=True, env={**os.environ}, timeout=600)
    assert done.returncode == 0, done.stderr
    assert f"clip/{tiny_arch}__simple7" in done.stdout

    # Resuming with another label set would mix two label sets under one model id: refused.
    code = main(["--run", run.run_id, "--models", model, "--checkpoint", f"clip:{tiny_arch}={tiny_checkpoint}",
                 "--label-set", "imagenet-1k", "--no-progress", "--workers", "0", "--device", "cpu"])
    assert code == 2 and "one model keeps one label set in a run" in capsys.readouterr().err


def test_zero_shot_options_need_a_zero_shot_model(capsys):
    from classify.cli import main

    code = main(["--images", "x", "--out", "p.csv", "--models", "efficientnet_lite0", "--label-set", CAT])
    assert code == 2 and "--label-set is for zero-shot models" in capsys.readouterr().err


def test_label_set_and_recipe_options_apply_to_names_without_a_recipe(tiny_arch, tiny_checkpoint):
    entries, checkpoints = zero_shot_models([f"clip:{tiny_arch}", f"clip:{tiny_arch}+path"], CAT,
                                            Recipe(knowledge="def"), {f"clip:{tiny_arch}": str(tiny_checkpoint)})
    assert [e.id for e in entries] == [f"clip/{tiny_arch}__def", f"clip/{tiny_arch}__path"]
    assert {e.label_space for e in entries} == {CAT}
    assert checkpoints == {e.id: str(tiny_checkpoint) for e in entries}


def test_a_folder_run_writes_the_label_set_and_keeps_it(tiny_arch, tiny_checkpoint, tmp_path, capsys):
    import shutil

    import pandas as pd

    from classify.cli import main
    from crawl.sample_photos import SAMPLE_PHOTOS, photo_path

    folder = tmp_path / "images" / "n02123045"
    folder.mkdir(parents=True)
    shutil.copy(photo_path(SAMPLE_PHOTOS[0]), folder / "chelsea.png")
    out = tmp_path / "preds.csv"
    args = ["--images", str(tmp_path / "images"), "--out", str(out), "--models", f"clip:{tiny_arch}",
            "--templates", "simple7", "--checkpoint", f"clip:{tiny_arch}={tiny_checkpoint}", "--workers", "0"]
    assert main([*args, "--label-set", "imagenet-r"]) == 0
    err = capsys.readouterr().err
    assert "initialized randomly" not in err and "text classifier" in err  # the build's progress bar, no false alarm
    table = pd.read_csv(out)
    assert list(table["model"]) == [f"clip/{tiny_arch}__simple7"] and list(table["label_space"]) == ["imagenet-r"]
    assert table.loc[0, "pred_wnid"] in get_label_space("imagenet-r")
    assert main([*args, "--label-set", CAT, "--no-progress"]) == 2
    assert "over label set imagenet-r, not sense:cat.n.01" in capsys.readouterr().err


def _tower_views(tmp_path):
    import shutil

    from crawl.sample_photos import SAMPLE_PHOTOS, photo_path

    folder = tmp_path / "images" / "n02123045"
    folder.mkdir(parents=True)
    for i, photo in enumerate(SAMPLE_PHOTOS):
        shutil.copy(photo_path(photo), folder / f"photo-{i}.png")
    return tmp_path / "images"


def test_the_image_tower_runs_on_onnx_runtime_with_the_same_predictions(tiny_arch, tiny_checkpoint, tmp_path):
    """A zero-shot head's image tower is exported alone (keyed on the weights, not the label set or
    the recipe), checked on the head's logits, and gives PyTorch's predictions; the export is
    cached, read by a run too small to export, and shared by another recipe."""
    from classify.engine.types import InferenceOptions
    from classify.targets import predict_folder

    images = _tower_views(tmp_path)
    models = [f"clip:{tiny_arch}+simple7"]
    by_id = {f"clip/{tiny_arch}": str(tiny_checkpoint), f"clip/{tiny_arch}__simple7": str(tiny_checkpoint),
             f"clip/{tiny_arch}__path": str(tiny_checkpoint)}
    common = dict(device="cpu", cache_dir=str(tmp_path / "onnx"), checkpoints=by_id, num_workers=0)
    with build_settings(cache_dir=tmp_path / "zeroshot"):
        torch_table, torch_report = predict_folder(images, models, options=InferenceOptions(**common, backend="torch"))
        onnx_table, onnx_report = predict_folder(images, models, options=InferenceOptions(**common, backend="onnxruntime"))
        (backend,) = onnx_report.backends.values()
        assert backend.startswith("onnxruntime image_encoder (exported now") and "the rest on torch" in backend
        assert list(torch_report.backends.values()) == ["torch (asked for)"]
        assert (onnx_table["pred_wnid"] == torch_table["pred_wnid"]).all()
        assert np.abs(onnx_table["prob_1"] - torch_table["prob_1"]).max() < 1e-5
        exports = sorted((tmp_path / "onnx").glob("*.onnx"))
        assert len(exports) == 1 and "image-tower" in exports[0].name
        # Too few images to export (the default threshold), but the cached export is read, by
        # another recipe too: the tower does not depend on the prompts.
        again_table, again = predict_folder(images, [f"clip:{tiny_arch}+path"], options=InferenceOptions(**common))
        assert list(again.backends.values())[0].startswith("onnxruntime image_encoder (cached export)")
        assert sorted((tmp_path / "onnx").glob("*.onnx")) == exports


def test_the_towers_check_bounds_the_logits_of_every_label_set(tiny_model, tiny_checkpoint, tmp_path):
    """ZeroShotHead.logit_bound: no unit-norm classifier moves a logit further than it says, and a
    worst-case classifier (the difference's own direction) comes close, so one check of an exported
    tower holds for every label set and recipe that shares it."""
    entry = with_recipe(with_label_set(tiny_model[0], CAT), SIMPLE)
    with build_settings(cache_dir=tmp_path):
        head = get_source(entry).load(entry, tiny_checkpoint).eval()
    gen = torch.Generator().manual_seed(1)
    a = torch.randn(8, 16, generator=gen)
    b = a + 0.01 * torch.randn(8, 16, generator=gen)
    bound = head.logit_bound(a, b)
    na, nb = torch.nn.functional.normalize(a, dim=-1), torch.nn.functional.normalize(b, dim=-1)
    for _ in range(5):
        columns = torch.nn.functional.normalize(torch.randn(16, 1000, generator=gen), dim=0)
        assert float((float(head.logit_scale) * (na - nb) @ columns).abs().max()) <= bound + 1e-6
    worst = torch.nn.functional.normalize(na - nb, dim=-1).T  # each row's own direction
    assert float((float(head.logit_scale) * (na - nb) @ worst).abs().max()) == pytest.approx(bound, rel=1e-5)


def test_an_image_tower_that_fails_its_check_stays_on_pytorch(tiny_arch, tiny_checkpoint, tmp_path, monkeypatch):
    import classify.engine.onnx_backend as backend
    from classify.engine.types import InferenceOptions
    from classify.targets import predict_folder
    from core.errors import OptionError

    images = _tower_views(tmp_path)
    models = [f"clip:{tiny_arch}+simple7"]
    common = dict(device="cpu", cache_dir=str(tmp_path / "onnx"), num_workers=0,
                  checkpoints={f"clip/{tiny_arch}__simple7": str(tiny_checkpoint)}, onnx_export_min_images=1)
    real = backend.OnnxClassifier.__call__
    monkeypatch.setattr(backend.OnnxClassifier, "__call__", lambda self, x: real(self, x) + 1.0)  # a wrong graph
    with build_settings(cache_dir=tmp_path / "zeroshot"):
        table, report = predict_folder(images, models, options=InferenceOptions(**common))
        (reason,) = report.backends.values()
        assert reason.startswith("torch (ONNX Runtime and PyTorch logits differ by") and (table["status"] == "ok").all()
        with pytest.raises(OptionError, match="cannot run on ONNX Runtime: export failed before"):
            predict_folder(images, models, options=InferenceOptions(**common, backend="onnxruntime"))
    assert not list((tmp_path / "onnx").glob("*.onnx"))  # nothing kept


def test_the_default_label_set_of_a_run_is_its_classes(tiny_arch):
    run = _sample_run()
    (entry,), _ = zero_shot_models([f"clip:{tiny_arch}"], None, None, run=run.run_id)
    assert entry.label_space.startswith("file:") and set(class_wnids(entry)) == set(run.info.wnids)
    (entry,), _ = zero_shot_models([f"clip:{tiny_arch}"])  # no run (--images): ImageNet-1k
    assert entry.label_space == "imagenet-1k"


def test_features_of_a_zero_shot_model_carry_its_text_classifier_to_the_probes(tiny_arch, tiny_checkpoint, capsys):
    """--features on a zero-shot model stores its image embeddings and, beside them, the text
    classifier it used (core.features.write_text_classifier): probe/ reads only stored artefacts,
    and with it runs ELEVATER's language-initialised head and the zero-shot point N = 0."""
    import numpy as np

    from classify.cli import main
    from core.features import read_feature_meta, read_features

    run = _sample_run()
    code = main(["--run", run.run_id, "--models", f"clip:{tiny_arch}", "--checkpoint",
                 f"clip:{tiny_arch}={tiny_checkpoint}", "--label-set", "run", "--templates", "simple7", "--features",
                 "--no-progress", "--workers", "0", "--device", "cpu"])
    assert code == 0, capsys.readouterr().err
    [model] = set(run.read_predictions()["model"])
    meta = read_feature_meta(run, model)
    index, array = read_features(run, model)
    record = meta["text_classifier"]
    assert meta["kind"] == "image-embedding" and array.shape == (30, TINY_CONFIG["embed_dim"])
    assert sorted(record["wnids"]) == sorted(run.info.wnids) and record["logit_scale"] > 0
    text = np.load(run.path / "features" / model.replace("/", "_") / record["path"], allow_pickle=False)
    assert text.shape == (TINY_CONFIG["embed_dim"], len(record["wnids"]))

    done = subprocess.run([sys.executable, "-m", "probe", "--run", run.run_id, "--models", model, "--shots", "1,2",
                           "--seeds", "22"], cwd=ROOT, capture_output=True, text=True, env={**os.environ}, timeout=600)
    assert done.returncode == 0, done.stderr
    from probe.artefact import read_results

    results = read_results(run)
    assert {"linear", "language-init"} <= set(results["variant"])
    zero = results[(results["variant"] == "language-init") & (results["shots"] == 0)]
    assert len(zero) == 1
    # N = 0 is the zero-shot classifier itself: its top-1 equals the stored predictions' accuracy.
    stored = run.read_predictions()
    assert zero["top1"].iloc[0] == pytest.approx((stored["pred_wnid"] == stored["true_wnid"]).mean())
