"""Who can reach the dashboard and what they can do there (issue 22, item 17): the library half.

The import root (WILDLENS_IMPORT_ROOT; Import off on a shared dashboard without one) and the
upload caps (bytes, rows, models), enforced by the library entry points the pages call.
The real server (loopback by default, --share) and the password gate: tests/pages/test_serving_app.py.
"""
from __future__ import annotations

import pandas as pd
import pytest

from core.errors import WildLensError
from core.runstore import RunStore


def _class_folder(root, name="n02123045"):
    folder = root / name
    folder.mkdir(parents=True)
    return folder


# ---------------------------------------------------------------- the import root
def test_import_outside_the_root_is_refused_by_the_library(tmp_path, monkeypatch):
    from crawl.importer import import_new_run, plan_folders

    allowed, elsewhere = tmp_path / "allowed", tmp_path / "elsewhere"
    _class_folder(allowed / "photos")
    _class_folder(elsewhere)
    monkeypatch.setenv("WILDLENS_IMPORT_ROOT", str(allowed))
    assert plan_folders(allowed / "photos").folders  # inside: read as before
    for entry in (plan_folders, lambda src: import_new_run(src, store=RunStore(tmp_path / "home"))):
        with pytest.raises(WildLensError, match="outside the import folder") as caught:
            entry(elsewhere)
        assert "\n" not in str(caught.value)
    # '..' and a link out of the root are judged by the real path
    with pytest.raises(WildLensError, match="outside the import folder"):
        plan_folders(allowed / ".." / "elsewhere")
    (allowed / "out").symlink_to(elsewhere)
    with pytest.raises(WildLensError, match="outside the import folder"):
        plan_folders(allowed / "out")
    assert not (tmp_path / "home" / "runs").exists() or not any((tmp_path / "home" / "runs").iterdir())


def test_import_root_refuses_following_links_out_of_the_folder(tmp_path, monkeypatch):
    from crawl.importer import plan_folders

    _class_folder(tmp_path / "photos")
    monkeypatch.setenv("WILDLENS_IMPORT_ROOT", str(tmp_path))
    with pytest.raises(WildLensError, match="links"):
        plan_folders(tmp_path / "photos", follow_links=True)


def test_shared_dashboard_without_an_import_root_imports_nothing(tmp_path, monkeypatch):
    from crawl.importer import plan_folders

    _class_folder(tmp_path / "photos")
    monkeypatch.delenv("WILDLENS_IMPORT_ROOT", raising=False)
    monkeypatch.setenv("WILDLENS_SHARE", "1")
    with pytest.raises(WildLensError, match="WILDLENS_IMPORT_ROOT"):
        plan_folders(tmp_path / "photos")
    monkeypatch.delenv("WILDLENS_SHARE")
    assert plan_folders(tmp_path / "photos").folders  # on loopback, with no root: any folder, as before


def test_a_root_that_is_not_a_folder_is_one_line(tmp_path, monkeypatch):
    from core.serving import import_root

    monkeypatch.setenv("WILDLENS_IMPORT_ROOT", str(tmp_path / "missing"))
    with pytest.raises(WildLensError, match="WILDLENS_IMPORT_ROOT") as caught:
        import_root()
    assert "\n" not in str(caught.value)


# ---------------------------------------------------------------- the upload caps
def _predictions(path, models: int, rows_per_model: int = 1):
    rows = [{"model": f"m{m}", "image": f"i{r}", "true_wnid": "n02123045", "pred_wnid": "n02123045"}
            for m in range(models) for r in range(rows_per_model)]
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def _runs(home):
    runs = home / "runs"
    return sorted(p.name for p in runs.iterdir()) if runs.is_dir() else []


def test_an_upload_of_9600_models_is_a_one_line_refusal_and_makes_nothing(tmp_path, monkeypatch):
    """The hostile file of the issue (9,600 model ids took 160 s and made 9,600 folders): refused
    with the default caps before any metric is computed or any folder made."""
    from explain.export import import_predictions_as_run

    for name in ("WILDLENS_UPLOAD_MAX_MODELS", "WILDLENS_UPLOAD_MAX_ROWS", "WILDLENS_UPLOAD_MAX_MB"):
        monkeypatch.delenv(name, raising=False)
    path = _predictions(tmp_path / "many.csv", 9600)
    home = tmp_path / "home"
    with pytest.raises(WildLensError, match=r"9,600 models.*at most 100") as caught:
        import_predictions_as_run(path, RunStore(home), title="many")
    assert "\n" not in str(caught.value) and "WILDLENS_UPLOAD_MAX_MODELS" in str(caught.value)
    assert _runs(home) == []


@pytest.mark.parametrize("variable, value, match", [
    ("WILDLENS_UPLOAD_MAX_ROWS", "5", r"6 rows.*at most 5"),
    ("WILDLENS_UPLOAD_MAX_MODELS", "2", r"3 models.*at most 2"),
    ("WILDLENS_UPLOAD_MAX_MB", "0.0001", r"MB.*at most"),
])
def test_each_upload_cap_is_configurable_and_refuses_with_one_line(tmp_path, monkeypatch, variable, value, match):
    from explain.export import import_predictions_as_run

    monkeypatch.setenv(variable, value)
    path = _predictions(tmp_path / "p.csv", models=3, rows_per_model=2)
    home = tmp_path / "home"
    with pytest.raises(WildLensError, match=match) as caught:
        import_predictions_as_run(path, RunStore(home))
    assert "\n" not in str(caught.value) and variable in str(caught.value)
    assert _runs(home) == []


def test_an_upload_within_the_caps_still_makes_its_run(tmp_path, monkeypatch):
    from explain.export import import_predictions_as_run

    monkeypatch.setenv("WILDLENS_UPLOAD_MAX_MODELS", "3")
    run, _ = import_predictions_as_run(_predictions(tmp_path / "p.csv", models=3), RunStore(tmp_path / "home"))
    assert sorted(run.info.models) == ["m0", "m1", "m2"]


def test_a_bad_cap_value_is_one_line(monkeypatch):
    from core.serving import upload_limits

    monkeypatch.setenv("WILDLENS_UPLOAD_MAX_ROWS", "lots")
    with pytest.raises(WildLensError, match="WILDLENS_UPLOAD_MAX_ROWS"):
        upload_limits()


@pytest.mark.parametrize("variable", ["WILDLENS_UPLOAD_MAX_MB", "WILDLENS_UPLOAD_MAX_ROWS", "WILDLENS_UPLOAD_MAX_MODELS"])
@pytest.mark.parametrize("value", ["inf", "nan", "-inf", "1e400", "0.5"])
def test_a_cap_that_is_no_finite_positive_limit_is_one_line(monkeypatch, variable, value):
    """Was: OverflowError ('cannot convert float infinity to integer') or ValueError (NaN) from
    upload_limits(), i.e. a traceback at every upload and at `wildlens app --share`'s notice."""
    from core.serving import exposure_notice, upload_limits

    monkeypatch.setenv(variable, value)
    if value == "0.5" and variable == "WILDLENS_UPLOAD_MAX_MB":
        assert upload_limits().max_bytes == 500_000  # half a megabyte is a limit
        return
    with pytest.raises(WildLensError, match=variable) as caught:
        upload_limits()
    assert "\n" not in str(caught.value) and "is not a positive" in str(caught.value)
    with pytest.raises(WildLensError, match=variable):
        exposure_notice("0.0.0.0", 8501)


# ---------------------------------------------------------------- addresses
@pytest.mark.parametrize("address, loopback", [
    ("127.0.0.1", True), ("localhost", True), ("::1", True), ("127.0.0.2", True),
    ("0.0.0.0", False), ("", False), ("::", False), ("192.0.2.7", False), ("myhost.example", False),
])
def test_is_loopback(address, loopback):
    from core.serving import is_loopback

    assert is_loopback(address) is loopback


def test_exports_stay_under_the_export_root(tmp_path, monkeypatch):
    """WILDLENS_EXPORT_ROOT fences where an export may write (checked by crawl.export, so no page can
    forget it), and a shared dashboard without one exports nowhere (code review: a visitor could fill
    any disk the server's user can write)."""
    from core.serving import EXPORT_ROOT_ENV, ServingError, check_export_destination

    root = tmp_path / "exports"
    root.mkdir()
    monkeypatch.delenv(EXPORT_ROOT_ENV, raising=False)
    monkeypatch.delenv("WILDLENS_SHARE", raising=False)
    assert check_export_destination(tmp_path / "anywhere") is None  # the command line on loopback: any folder
    monkeypatch.setenv("WILDLENS_SHARE", "1")
    with pytest.raises(ServingError, match="Export is off on a shared dashboard"):
        check_export_destination(root / "a")
    monkeypatch.setenv(EXPORT_ROOT_ENV, str(root))
    assert check_export_destination(root / "a") == root.resolve()
    for outside in (tmp_path / "elsewhere", root / ".." / "escape", root):
        with pytest.raises(ServingError, match="inside the export folder"):
            check_export_destination(outside)
    (root / "link").symlink_to(tmp_path)
    with pytest.raises(ServingError):
        check_export_destination(root / "link" / "x")
