"""Start the dashboard: what ``make run`` and ``wildlens app`` (``python -m wildlens app``) do.

    python -m wildlens app [--share] [streamlit run options, e.g. --server.port 8502]

It listens on 127.0.0.1 only. ``--share`` (or Streamlit's ``--server.address HOST`` with any
other address) serves beyond this machine: it prints what that exposes and turns on the limits
of core/serving.py (Import only under WILDLENS_IMPORT_ROOT, no typed Ray address); the password
gate (pages/access.py) asks for WILDLENS_PASSWORD whenever it is set. Streamlit's own upload
limit follows WildLens's (``WILDLENS_UPLOAD_MAX_MB``).

It lives in ``pages/`` because it is Streamlit code, and only ``app.py`` and ``pages/`` import
Streamlit (tests/core/test_architecture.py); it is not a page (``app.py`` lists those).

It is ``streamlit run app.py`` plus two things Streamlit has no option for:

* ``app.py`` declares its pages with ``st.navigation``. Until a session has run it once,
  Streamlit takes a ``pages/`` folder beside the entry point for a legacy (v1) multipage app: the
  first deep link to a new server (``/results``) is looked up among the folder's file names, is
  not found, and the browser shows a "Page not found" dialog before ``st.navigation`` renders the
  page. ``st.navigation`` switches that legacy mode off on its first call; here it is off from the
  start (tests/pages/test_browser.py checks that the launcher shows no such dialog).
* Streamlit reads ``.streamlit/config.toml`` from the working directory and from beside the entry
  script, which covers a source checkout. ``pip install .`` puts ``app.py`` into site-packages,
  where no ``.streamlit`` folder can go, and the settings file under
  ``<prefix>/share/wildlens/.streamlit``; from there the settings (headless, no usage statistics,
  no file watcher, ...) are passed as flags. Options given on the command line come after them
  and win.
"""
from __future__ import annotations

import sys
import tomllib
from pathlib import Path


def app_script() -> Path:
    """``app.py``: beside the ``pages`` package, in a checkout and in site-packages alike."""
    return Path(__file__).resolve().parent.parent / "app.py"


def installed_config_file() -> Path | None:
    """The settings file of an installed WildLens, when Streamlit will not find one beside app.py."""
    if (app_script().parent / ".streamlit" / "config.toml").is_file():
        return None  # a checkout: Streamlit reads it itself
    candidate = Path(sys.prefix) / "share" / "wildlens" / ".streamlit" / "config.toml"
    return candidate if candidate.is_file() else None


def config_flags(path: Path | None) -> list[str]:
    """``[server] headless = true`` -> ``--server.headless true``; nested tables are not used."""
    if path is None:
        return []
    flags = []
    for section, values in tomllib.loads(path.read_text()).items():
        for key, value in values.items():
            text = str(value).lower() if isinstance(value, bool) else str(value)
            flags += [f"--{section}.{key}", text]
    return flags


def _option(args: list[str], name: str) -> str | None:
    """The value of ``--name VALUE`` or ``--name=VALUE`` among Streamlit's options (the last wins)."""
    value = None
    for i, arg in enumerate(args):
        if arg == name and i + 1 < len(args):
            value = args[i + 1]
        elif arg.startswith(name + "="):
            value = arg.split("=", 1)[1]
    return value


def streamlit_options(argv: list[str]) -> tuple[list[str], str | None]:
    """The options for ``streamlit run`` and, when the dashboard is served beyond loopback, the
    notice saying what that exposes (None on loopback). Without ``--share`` and without an
    address the server listens on 127.0.0.1; with ``--share`` alone on every interface."""
    import math

    from core.serving import LOOPBACK, exposure_notice, is_loopback, upload_limits

    share = "--share" in argv
    args = [arg for arg in argv if arg != "--share"]
    given = _option(args, "--server.address")
    extra = []
    if given is None:
        extra += ["--server.address", "0.0.0.0" if share else LOOPBACK]
    address = given if given is not None else extra[1]
    if _option(args, "--server.maxUploadSize") is None:  # Streamlit refuses bigger files before we see them
        extra += ["--server.maxUploadSize", str(max(1, math.ceil(upload_limits().max_mb)))]
    notice = None
    if share or not is_loopback(address):
        notice = exposure_notice(address, _option(args, "--server.port") or "8501")
    return extra + args, notice  # the user's options last: they win where they repeat one


def serve(argv: list[str] | None = None) -> int:
    from streamlit.web import cli

    from core.errors import WildLensError, one_line
    from core.serving import mark_sharing

    try:
        from streamlit.runtime.pages_manager import PagesManager

        PagesManager.uses_pages_directory = False  # what st.navigation sets on its first call
    except (ImportError, AttributeError):  # another Streamlit: only the first deep link suffers
        pass
    script = app_script()
    if not script.is_file():
        print(f"error: the dashboard's entry script {script} is missing; reinstall WildLens ('pip install .').",
              file=sys.stderr)
        return 2
    try:
        options, notice = streamlit_options(list(sys.argv[1:] if argv is None else argv))
    except WildLensError as exc:  # a bad WILDLENS_UPLOAD_MAX_* or WILDLENS_IMPORT_ROOT
        print(f"error: {one_line(exc)}", file=sys.stderr)
        return 2
    if notice:
        mark_sharing()  # this process's library calls (Import, Ray) follow core/serving.py's rules
        print(notice, file=sys.stderr, flush=True)
    args = ["run", str(script), *config_flags(installed_config_file()), *options]
    cli.main(args=args, prog_name="streamlit")  # click: serves until stopped, then exits
    return 0
