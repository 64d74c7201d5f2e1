"""classify.models.library_index: where timm's, torchvision's and open_clip's weights live and the registry's
input configs, listed once per installed library and read back by a new process without importing them
(the Models page's first load imported timm, torchvision, open_clip and torch._dynamo: 3.1-3.5 s -> 0.5 s).
Each answer equals the library's; a listing that is damaged or of the wrong types is listed again; one
that names another file (its checksum recomputed by hand) can misreport a status but never load it.
In this process, a fresh one is played by hiding the libraries from sys.modules (the sources then read
the listings), as tests/classify/models/test_zoo.py does for the names index."""
from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest

from classify.models import library_index
from classify.models.registry import input_config, list_models, listed_input_configs
from classify.models.weights import WeightsError, WeightsStatus, confirm_listed, note_listed, weights_status

LIBRARIES = ("timm", "torchvision", "open_clip")


@pytest.fixture()
def fresh(monkeypatch, tmp_path):
    """The libraries hidden from sys.modules (as in a new process) and a run store of its own."""
    import open_clip  # noqa: F401  (imported first, so the libraries' answers are at hand before hiding them)
    import timm  # noqa: F401
    import torchvision  # noqa: F401

    monkeypatch.setenv("WILDLENS_HOME", str(tmp_path / "home"))
    library_index._listings.cache_clear()
    truth = {e.id: weights_status(e) for e in list_models()}, {e.id: input_config(e) for e in list_models()}
    for name in LIBRARIES:
        monkeypatch.delitem(sys.modules, name)
    yield truth, tmp_path / "home" / "cache"
    library_index._listings.cache_clear()


def test_the_listings_give_the_libraries_answers_for_every_registry_model(fresh):
    (statuses, inputs), cache = fresh
    for _ in range(2):  # listed (the libraries asked), then read back
        assert {e.id: weights_status(e) for e in list_models()} == statuses
        assert listed_input_configs(list_models()) == inputs
        _hide()  # what building a listing imported, hidden again
    names = sorted(p.name.split("-1-")[0] for p in cache.glob("*.json"))
    assert names == ["clip-weights", "model-inputs", "model-names", "timm-weights", "torchvision-weights"], names


def _hide() -> None:
    for name in LIBRARIES:
        sys.modules.pop(name, None)


def _rewrite(path: Path, lists: dict) -> None:
    stored = json.loads(path.read_text())
    text = json.dumps(lists, sort_keys=True)
    path.write_text(json.dumps({**stored, "lists": lists, "sha256": hashlib.sha256(text.encode()).hexdigest()}))


def test_a_damaged_or_mistyped_listing_is_listed_again(fresh):
    (statuses, _), cache = fresh
    library_index.weight_places(cache, "timm")
    (path,) = cache.glob("timm-weights-*.json")
    good = json.loads(path.read_text())["lists"]
    for bad in ({"places": {"resnet50.tv_in1k": ["timm/\x1b[7m", "", ""]}},  # a control character
                {"places": {"resnet50.tv_in1k": "timm/resnet50.tv_in1k"}},  # a string where a list belongs
                {"places": []}):
        _rewrite(path, bad)
        library_index._listings.cache_clear()
        assert library_index.weight_places(cache, "timm") == {k: tuple(v) for k, v in good["places"].items()}
        assert json.loads(path.read_text())["lists"] == good, "written again"
    path.write_text(path.read_text()[:-40])  # cut short
    library_index._listings.cache_clear()
    assert library_index.weight_places(cache, "timm")["resnet50.tv_in1k"][0] == "timm/resnet50.tv_in1k"


def test_a_file_found_through_a_listing_is_read_only_when_the_library_names_it_too(tmp_path):
    """confirm_listed, which each source's load() calls with its library imported: a listing that named
    another model's file (a hostile edit with its checksum recomputed) stops the load in one line."""
    from classify.models import weights

    note_listed(tmp_path / "other.safetensors")
    truth = WeightsStatus("m", True, "hf-cache", str(tmp_path / "right.safetensors"), (), "fetch")
    try:
        with pytest.raises(WeightsError, match=r"^m: the cache's listing named .*other.safetensors.* the library names "
                                               r".*right.safetensors; delete /.*/cache/timm-weights-\*.json and run again"):
            confirm_listed(tmp_path / "other.safetensors", lambda: truth, "m", "timm-weights")
        asked = []
        confirm_listed(tmp_path / "checkpoint.pt", lambda: asked.append(1), "m", "timm-weights")
        assert not asked, "a file not found through a listing (a --checkpoint) is not asked about"
        same = WeightsStatus("m", True, "hf-cache", str(tmp_path / "other.safetensors"), (), "fetch")
        confirm_listed(tmp_path / "other.safetensors", lambda: same, "m", "timm-weights")
    finally:
        weights._FROM_LISTING.discard(str(tmp_path / "other.safetensors"))


def test_a_hostile_listing_reaches_the_load_check(fresh, monkeypatch):
    """A listing that sends a timm model to another repository: the status follows it (a status is
    display), and the path it found is marked, so load() asks timm before reading it."""
    (_, _), cache = fresh
    from classify.models.sources import timm_source

    library_index.weight_places(cache, "timm")
    _hide()
    (path,) = cache.glob("timm-weights-*.json")
    lists = json.loads(path.read_text())["lists"]
    lists["places"]["resnet50.tv_in1k"] = ["timm/vit_base_patch16_224.augreg2_in21k_ft_in1k", "", ""]
    _rewrite(path, lists)
    library_index._listings.cache_clear()
    found = cache / "planted.safetensors"
    found.write_bytes(b"x")
    monkeypatch.setattr(timm_source, "find_in_hf_cache",
                        lambda hub_id, filename: (found, "") if hub_id.startswith("timm/vit_base") else (None, "hub"))
    entry = next(e for e in list_models() if e.id == "resnet50.tv_in1k")
    assert weights_status(entry).path == str(found)
    from classify.models import weights

    assert str(found) in weights._FROM_LISTING


def test_torch_hubs_folder_is_found_without_importing_torch(monkeypatch, tmp_path):
    import torch.hub

    from classify.models.weights import torch_hub_checkpoints

    for env in ({"TORCH_HOME": str(tmp_path / "th")}, {"XDG_CACHE_HOME": str(tmp_path / "xdg")}, {}):
        with monkeypatch.context() as m:
            for key in ("TORCH_HOME", "XDG_CACHE_HOME"):
                m.delenv(key, raising=False)
            for key, value in env.items():
                m.setenv(key, value)
            expected = Path(torch.hub.get_dir()) / "checkpoints"
            m.delitem(sys.modules, "torch")
            assert torch_hub_checkpoints() == expected


@pytest.mark.parametrize("model, stem", [("resnet50.tv_in1k", "timm-weights"),
                                         ("torchvision/resnet50.IMAGENET1K_V2", "torchvision-weights"),
                                         ("clip/RN50.openai", "clip-weights")])
def test_each_sources_load_asks_its_library_before_reading_a_listed_file(model, stem, tmp_path):
    """The wiring: a file marked as found through a listing, which the library itself does not name (its
    weights are not on this machine), is refused by load() before it is read."""
    from classify.models import weights
    from classify.models.registry import get_source

    entry = next(e for e in list_models() if e.id == model)
    planted = tmp_path / "planted.safetensors"
    planted.write_bytes(b"not read")
    note_listed(planted)
    try:
        with pytest.raises(WeightsError, match=rf"the cache's listing named .*planted.safetensors.* delete /.*/cache/{stem}-\*.json"):
            get_source(entry).load(entry, planted)
    finally:
        weights._FROM_LISTING.discard(str(planted))


def test_a_listing_is_keyed_on_the_librarys_config_files_and_on_wildlens_own_code(tmp_path, monkeypatch):
    """Code review: open_clip's image sizes live in model_configs/*.json, which an edit in place changed
    under the same version; and a fix to WildLens's own code that turns a library's answer into a listing
    must list again without a version bump."""
    package = tmp_path / "site" / "fakelib"
    (package / "model_configs").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "model_configs" / "RN50.json").write_text('{"image_size": 224}')
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    before = library_index.package_files("fakelib", ".,model_configs")
    (package / "model_configs" / "RN50.json").write_text('{"image_size": 288}')
    assert library_index.package_files("fakelib", ".,model_configs") != before

    ours = tmp_path / "ours.py"
    ours.write_text("SIZE = 224\n")
    built = []

    def listing():
        return library_index.cached_listing(tmp_path / "cache", "probe-1", lambda: built.append(1) or {"n": [1]},
                                            lambda lists: lists == {"n": [1]}, code=(str(ours),))

    listing(), listing()
    assert len(built) == 1, "read back while nothing changed"
    ours.write_text("SIZE = 288\n")
    listing()
    assert len(built) == 2 and len(list((tmp_path / "cache").glob("probe-1-*.json"))) == 2


@pytest.mark.parametrize("where", [["a/b/c", "", ""], ["..", "", ""], ["a--b/c", "", ""], ["-a/b", "", ""],
                                   ["timm/resnet50.tv_in1k@../../../big1g", "", ""],
                                   ["timm/resnet50.tv_in1k", "../../x.bin", ""], ["timm/resnet50.tv_in1k", "/etc/passwd", ""],
                                   ["timm/resnet50.tv_in1k", "", "file:///etc/passwd"]])
def test_a_listed_place_the_hub_would_refuse_is_listed_again(fresh, where):
    """Hostile campaign: places huggingface_hub refuses crashed the Models page (HFValidationError), and a
    revision '../../../big1g' made a fresh process read a 1 GB file outside the cache (15 s, 3.2 GB)."""
    (statuses, _), cache = fresh
    library_index._listings(cache)
    _hide()
    (path,) = cache.glob("timm-weights-*.json")
    lists = json.loads(path.read_text())["lists"]
    real = list(lists["places"]["resnet50.tv_in1k"])
    lists["places"]["resnet50.tv_in1k"] = where
    _rewrite(path, lists)
    library_index._listings.cache_clear()
    entry = next(e for e in list_models() if e.id == "resnet50.tv_in1k")
    assert weights_status(entry) == statuses[entry.id]
    assert json.loads(path.read_text())["lists"]["places"]["resnet50.tv_in1k"] == real, "listed again"


@pytest.mark.parametrize("field, value", [(0, -7), (0, 10 ** 4000), (1, float("nan")), (1, 10 ** 400),
                                          (2, "bilinear\u034f"), (3, [10 ** 400, 0, 0]), (4, [0.2, float("inf"), 0.2]),
                                          (5, "x" * 1000)])
def test_an_input_listing_holds_only_values_a_real_config_has(fresh, field, value):
    (_, inputs), cache = fresh
    listed_input_configs(list_models())
    _hide()
    (path,) = cache.glob("model-inputs-*.json")
    lists = json.loads(path.read_text())["lists"]
    lists["inputs"]["resnet50.tv_in1k"][field] = value
    stored = json.loads(path.read_text())
    text = json.dumps(lists, sort_keys=True)
    path.write_text(json.dumps({**stored, "lists": lists, "sha256": hashlib.sha256(text.encode()).hexdigest()}))
    assert listed_input_configs(list_models()) == inputs
