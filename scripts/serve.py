"""Start the dashboard (``make run``): ``streamlit run app.py`` plus one setting that Streamlit
has no option for.

    .venv/bin/python scripts/serve.py [streamlit run options, e.g. --server.port 8502]

``app.py`` declares its pages with ``st.navigation``. Until a session has run it once, Streamlit
takes a ``pages/`` folder beside the entry point for a legacy (v1) multipage app: the first deep
link to a new server (``/results``) is looked up among the folder's file names, is not found,
and the browser shows a "Page not found" dialog before ``st.navigation`` renders the page.
``st.navigation`` switches that legacy mode off on its first call; here it is off from the
start. ``streamlit run app.py`` still works, with that one dialog on a new server's first deep
link (tests/test_browser.py checks that the launcher has none).
"""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main(argv: list[str] | None = None) -> int:
    from streamlit.web import cli

    try:
        from streamlit.runtime.pages_manager import PagesManager

        PagesManager.uses_pages_directory = False  # what st.navigation sets on its first call
    except (ImportError, AttributeError):  # another Streamlit: only the first deep link suffers
        pass
    args = ["run", str(ROOT / "app.py"), *(sys.argv[1:] if argv is None else argv)]
    cli.main(args=args, prog_name="streamlit")  # click: serves until stopped, then exits
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
