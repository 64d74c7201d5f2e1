"""The Models page's engine choice (classify.engine.ray_engine): offered when Ray is installed, disabled
with the install command when it is not; a Ray choice reaches the options the page hands to
classify.targets.predict_run, its progress is drawn as it comes, the final label names the engine,
and a Ray or option error is one escaped line.

Inference itself is replaced here (Ray in AppTest would start an instance in the test process):
tests/classify/engine/test_ray_engine.py runs the engine for real, and the real dashboard was driven in
a browser with a real Ray run when this page was written."""
import pytest

from pages.text import escape_markdown
from tests.pages.test_app import open_page


def _run_button(at):
    return [b for b in at.button if b.label.startswith("Run ")][0]


def _fake_predict_run(monkeypatch, *, engine="ray (2 actors, the Ray cluster at ray://head:10001)", error=None):
    """predict_run replaced: records the options, sends the Ray engine's progress events, then
    returns a report naming ``engine`` (or raises ``error``). The page's start of Ray in a lasting
    thread (pages.server.hold_ray_for_the_server) is recorded, not done."""
    import classify.targets
    import pages.server
    from classify.engine.types import InferenceReport, ModelReport
    from core.progress import report

    seen = {"held": []}
    monkeypatch.setattr(pages.server, "hold_ray_for_the_server", lambda address, waiting=None: seen["held"].append(address))

    def fake(run, models, options=None, progress=None):
        seen.update(run=run.run_id, models=list(models), options=options)
        if error is not None:
            raise error
        report(progress, "inference", 0, 30, task="efficientnet_lite0", message="loading model on 2 Ray actors (pass 1/1)")
        report(progress, "inference", 16, 30, task="efficientnet_lite0", message="classifying on Ray")
        report(progress, "inference", 30, 30, task="efficientnet_lite0", message="classifying on Ray")
        return InferenceReport({"efficientnet_lite0": ModelReport("efficientnet_lite0", predicted=30)}, 30, 4.2, "ray",
                               "fp32", engine=engine)

    monkeypatch.setattr(classify.targets, "predict_run", fake)
    return seen


def _pick_lite0(at):
    at.multiselect(key="pick-sample").set_value(["efficientnet_lite0"]).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_the_engine_choice_is_offered_when_ray_is_installed(app, monkeypatch):
    import classify.engine.ray_engine

    monkeypatch.setattr(classify.engine.ray_engine, "ray_available", lambda: True)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    at = open_page(app, "models")
    engine = at.radio(key="engine-choice")
    assert engine.options == ["Local (this machine)", "Ray (actors on a Ray instance or cluster)"]
    assert engine.value == "local" and not engine.disabled
    assert "cluster" in engine.help and "same path" in engine.help
    assert not [w for w in at.text_input if w.key == "ray-address"]  # the Ray fields only once Ray is picked
    engine.set_value("ray").run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.text_input(key="ray-address").value == "" and at.number_input(key="ray-actors").value == 0
    [where] = [c.value for c in at.caption if "Ray is for a cluster" in c.value]
    assert "local engine is faster" in where and "shared filesystem" in where
    assert "RAY_ADDRESS is not set: a local Ray instance in the dashboard's process" in where
    # Blank address with RAY_ADDRESS set: the caption says that cluster (its address escaped).
    monkeypatch.setenv("RAY_ADDRESS", "ray://head:10001")
    at.run()
    [where] = [c.value for c in at.caption if "Ray is for a cluster" in c.value]
    assert f"Joins the Ray cluster at {escape_markdown('ray://head:10001')} (RAY_ADDRESS)" in where
    at.text_input(key="ray-address").input("[x](http://evil.example):10001").run()
    [where] = [c.value for c in at.caption if "Ray is for a cluster" in c.value]
    assert f"Joins the Ray cluster at {escape_markdown('[x](http://evil.example):10001')} (checked" in where


def test_without_ray_the_choice_is_disabled_with_the_install_command(app, monkeypatch):
    import classify.engine.ray_engine

    monkeypatch.setattr(classify.engine.ray_engine, "ray_available", lambda: False)
    at = open_page(app, "models")
    engine = at.radio(key="engine-choice-off")
    assert engine.disabled and engine.value == "local"
    assert not [w for w in at.radio if w.key == "engine-choice"]
    assert not [w for w in at.text_input if w.key == "ray-address"]
    assert any("pip install -e '.[ray]'" in c.value and "not installed" in c.value for c in at.caption)
    seen = _fake_predict_run(monkeypatch, engine="local")
    _run_button(_pick_lite0(at)).click().run()
    assert seen["options"].engine == "local" and seen["held"] == []


def test_choosing_ray_hands_engine_address_and_actors_to_the_library(app, monkeypatch):
    import classify.engine.ray_engine

    monkeypatch.setattr(classify.engine.ray_engine, "ray_available", lambda: True)
    seen = _fake_predict_run(monkeypatch)
    at = _pick_lite0(open_page(app, "models"))
    at.radio(key="engine-choice").set_value("ray").run()
    at.text_input(key="ray-address").input("  ray://head:10001 ").run()
    at.number_input(key="ray-actors").set_value(2).run()
    _run_button(at).click().run()
    assert not at.exception, [e.value for e in at.exception]
    options = seen["options"]
    assert (options.engine, options.ray_address, options.ray_actors) == ("ray", "ray://head:10001", 2)
    assert seen["held"] == ["ray://head:10001"]  # Ray started or joined outside the script thread first
    assert seen["models"] == ["efficientnet_lite0"] and seen["run"] == "sample"
    # The engine's progress events drew the page's bar (the last one: 30/30); the label names the engine.
    [bar] = at.get("progress")
    assert bar.value == 100 and "30/30" in bar.proto.text and "classifying on Ray" in bar.proto.text
    [status] = at.status
    assert status.label == f"Done in 4.2 s · engine: {escape_markdown('ray (2 actors, the Ray cluster at ray://head:10001)')}"
    assert any("ray (2 actors" in c.value.replace("\\", "") for c in at.caption)  # the report's summary
    assert [s.value for s in at.success] == ["Predictions stored. Re-running skips what is stored."]
    # Blank fields: no address (RAY_ADDRESS or a local instance, the engine decides) and automatic actors.
    at.text_input(key="ray-address").input("").run()
    at.number_input(key="ray-actors").set_value(0).run()
    _run_button(at).click().run()
    assert (seen["options"].engine, seen["options"].ray_address, seen["options"].ray_actors) == ("ray", None, None)


@pytest.mark.parametrize("kind", ["ray", "option"])
def test_a_ray_error_is_one_escaped_line(app, monkeypatch, kind):
    import classify.engine.ray_engine
    from core.errors import OptionError

    monkeypatch.setattr(classify.engine.ray_engine, "ray_available", lambda: True)
    first = ("Ray node 10.0.0.7 cannot read /data/[x](http://evil.example)/*a*.jpg: put the run store on a filesystem "
             "every node mounts at the same place" if kind == "ray" else
             "4 actors x 1 GPUs need 4 GPUs; the Ray cluster has 1: lower --ray-actors")
    error = (classify.engine.ray_engine.RayEngineError if kind == "ray" else OptionError)(first + "\nTraceback-like second line")
    _fake_predict_run(monkeypatch, error=error)
    at = _pick_lite0(open_page(app, "models"))
    at.radio(key="engine-choice").set_value("ray").run()
    _run_button(at).click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert [e.value for e in at.error] == [escape_markdown(first)]
    assert not at.success


def test_the_page_waits_for_ray_with_a_clock_and_hands_back_its_errors(monkeypatch):
    """pages.server.hold_ray_for_the_server enters core.raysession.ray_session (which starts Ray in
    a thread that outlives the rerun: tests/classify/engine/test_ray_engine.py checks that with a real
    instance) off the script thread, shows the wait each second, and hands the engine's errors to
    the caller."""
    import threading
    from contextlib import contextmanager

    import core.raysession
    import pages.server

    entered, answer = [], threading.Event()

    @contextmanager
    def fake_session(address=None):
        if address == "refused:1":
            raise core.raysession.RayEngineError("Cannot reach the Ray cluster at refused:1")
        if address == "slow:1":
            answer.wait(30)
        entered.append(address)
        yield f"at {address}"

    monkeypatch.setattr(core.raysession, "ray_session", fake_session)
    assert pages.server.hold_ray_for_the_server(None) == "at None"
    with pytest.raises(core.raysession.RayEngineError, match="refused:1"):
        pages.server.hold_ray_for_the_server("refused:1")
    waits = []

    def waiting(seconds):
        waits.append(seconds)
        if len(waits) == 2:
            answer.set()

    assert pages.server.hold_ray_for_the_server("slow:1", waiting) == "at slow:1"
    assert len(waits) == 2 and entered == [None, "slow:1"]
