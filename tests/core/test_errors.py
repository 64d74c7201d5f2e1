"""core.errors: the one line a command line prints after 'error: '."""
import pytest

from core.errors import WildLensError, one_line


@pytest.mark.parametrize("message, printed", [
    ("Folder /tmp/a\x1b[2J does not exist.", "Folder /tmp/a\\x1b[2J does not exist."),  # an escape sequence
    ("model m\u202egnp.exe", "model m\\u202egnp.exe"),  # a right-to-left override
    ("first line\nsecond line", "first line"),  # the first line only (a name's newline is escaped where it is named)
    ("first\r\nsecond", "first"),
    # Only a newline or carriage return ends the line: a line separator or form feed inside a folder's name
    # is escaped, not a cut (the message named another, shorter path and lost its reason: hostile check).
    ("Folder /tmp/a\u2028b\x0cc is not empty", "Folder /tmp/a\\u2028b\\x0cc is not empty"),
    ("chat noir: n02123045 (é, 猫)", "chat noir: n02123045 (é, 猫)"),  # printable text as it is
])
def test_one_line_is_the_first_line_with_control_characters_escaped(message, printed):
    assert one_line(WildLensError(message)) == printed


def test_one_line_of_an_empty_message_names_the_error_and_a_key_error_loses_its_quotes():
    assert one_line(WildLensError("")) == "WildLensError"
    assert one_line(KeyError("no run 'x'")) == "no run 'x'"


def test_another_errors_first_line_only():
    assert one_line(OSError("first line\nsecond line")) == "first line"
    assert one_line(RuntimeError("a\x1b[2J\nb")) == "a\\x1b[2J"


@pytest.mark.parametrize("argv, named", [
    (["crawl", "summary", "--out", "~no-such-user-here/x"], "--out ~no-such-user-here/x: "),
    (["crawl", "import", "SRC", "--out", "~no-such-user-here/x", "--no-progress"], "--out ~no-such-user-here/x: "),
    (["crawl", "import", "~no-such-user-here/src", "--out", "OUT", "--no-progress"], ""),
    (["classify", "--images", "~no-such-user-here/photos", "--out", "OUT/p.csv", "--no-progress"],
     "--images ~no-such-user-here/photos: "),
    (["classify", "--images", "SRC", "--out", "~no-such-user-here/p.csv", "--no-progress"],
     "--out ~no-such-user-here/p.csv: "),
    (["explain", "metrics", "--run", "r", "--out", "~no-such-user-here/x"], "--out ~no-such-user-here/x: "),
    (["explain", "metrics", "--run", "r", "HOME=~no-such-user-here/h"], "WILDLENS_HOME=~no-such-user-here/h: "),
])
def test_a_home_of_no_user_is_one_line_on_every_command(argv, named, tmp_path, capsys, monkeypatch):
    """'~name' that names no user here: Python's RuntimeError ended these commands in a traceback
    (core.userfile.expand_user; hostile check, 2026-12-07); the line names the option or variable the
    path came from."""
    from explain.cli import main as explain_main
    from classify.cli import main as classify_main
    from crawl.cli import main as crawl_main

    (tmp_path / "src" / "n02123045").mkdir(parents=True)
    argv = [a.replace("SRC", str(tmp_path / "src")).replace("OUT", str(tmp_path / "out")) for a in argv]
    if argv[-1].startswith("HOME="):
        monkeypatch.setenv("WILDLENS_HOME", argv.pop().removeprefix("HOME="))
    main = {"crawl": crawl_main, "classify": classify_main, "explain": explain_main}[argv[0]]
    assert main(argv[1:]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {named}") and err.count("\n") == 1
    assert "~no-such-user-here names no user's home here; give the full path." in err


def test_explain_writes_to_the_out_folder_it_checked(tmp_path, monkeypatch, capsys):
    """'--out ~/x': checked expanded and written literally ('./~/x', inside a run when run from its
    folder); now both the expanded one."""
    import pandas as pd

    from explain.cli import main as explain_main

    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(tmp_path)
    preds = tmp_path / "p.csv"
    pd.DataFrame({"model": ["m", "m"], "image": ["a", "b"], "true_wnid": ["n02123045", "n02123159"],
                  "pred_wnid": ["n02123045", "n02123045"]}).to_csv(preds, index=False)
    assert explain_main(["metrics", str(preds), "--out", "~/x", "--no-ci"]) == 0
    assert (home / "x" / "per_model.csv").is_file() and not (tmp_path / "~").exists()


def test_no_home_and_no_store_is_one_line(monkeypatch):
    import pathlib

    from core.runstore import StoreError, default_root

    monkeypatch.delenv("WILDLENS_HOME", raising=False)
    monkeypatch.setattr(pathlib.Path, "home", classmethod(lambda cls: (_ for _ in ()).throw(
        RuntimeError("Could not determine home directory."))))
    with pytest.raises(StoreError, match=r"^no home folder to keep runs in \(HOME is unset and user \d+ has none\); "
                                         r"set WILDLENS_HOME \(or HOME\)"):
        default_root()


@pytest.mark.parametrize("package", ["crawl", "classify", "explain", "probe", "wildlens"])
def test_a_ctrl_c_while_a_command_loads_ends_it_quietly(package, monkeypatch):
    """Ctrl-C in the first half second of `python -m crawl import ...` (its modules loading) printed a 24-44
    line KeyboardInterrupt traceback (hostile check, 2026-12-07): nothing was started, exit 130."""
    import runpy
    import sys

    class CtrlC:
        def find_spec(self, name, path=None, target=None):
            if name == f"{package}.cli":
                raise KeyboardInterrupt

    monkeypatch.delitem(sys.modules, f"{package}.cli", raising=False)
    monkeypatch.setattr(sys, "meta_path", [CtrlC(), *sys.meta_path])
    with pytest.raises(SystemExit) as ended:
        runpy.run_module(package, run_name="__main__")
    assert ended.value.code == 130
