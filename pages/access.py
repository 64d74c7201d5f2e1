"""Who may use the dashboard: the serving mode and the password gate (issue 22, item 17).

app.py calls both before any page runs (and before the sample run is built, which no visitor
should be able to trigger). Not a page (app.py lists those).

* :func:`note_serving_mode`: ``streamlit run app.py --server.address HOST`` bypasses the launcher;
  an address beyond loopback given that way turns on the same limits (core/serving.py) and
  prints the same notice, once per process.
* :func:`require_password`: when ``WILDLENS_PASSWORD`` is set, a session sees only a password
  field until it gives the password (compared with hmac.compare_digest; never echoed, never
  kept in the session: the form clears it). A wrong one is a one-line error and a delay that
  grows with the session's failures. It is a simple gate for a trusted network; real
  authentication belongs to a proxy in front (README, "Security").
"""
from __future__ import annotations

import hmac
import os
import sys
import time

import streamlit as st

from core.serving import PASSWORD_ENV, exposure_notice, is_loopback, mark_sharing, sharing

AUTHENTICATED = "_wl_authenticated"
FAILURES = "_wl_password_failures"
FIELD = "_wl_password_field"


def note_serving_mode() -> None:
    address = st.get_option("server.address")
    if address and not is_loopback(address) and not sharing():
        mark_sharing()
        print(exposure_notice(address, st.get_option("server.port")), file=sys.stderr, flush=True)


def require_password() -> None:
    """Stop the script here, showing only the password form, until the session has given it."""
    secret = os.environ.get(PASSWORD_ENV, "")
    if not secret or st.session_state.get(AUTHENTICATED):
        return
    st.title("WildLens")
    with st.form("wl-password", clear_on_submit=True):
        entered = st.text_input("Password", type="password", key=FIELD)
        submitted = st.form_submit_button("Open the dashboard", type="primary")
    if submitted:
        if hmac.compare_digest(entered.encode("utf-8"), secret.encode("utf-8")):
            st.session_state[AUTHENTICATED] = True
            st.session_state.pop(FAILURES, None)
            st.session_state.pop(FIELD, None)  # the widget is not drawn again: its value would stay
            st.rerun()
        failures = st.session_state.get(FAILURES, 0) + 1
        st.session_state[FAILURES] = failures
        time.sleep(min(2.0 * (failures - 1), 10.0))  # slows guessing in one session; the proxy does the rest
        st.error("Wrong password.")
    st.caption(f"This dashboard asks for the password its operator set ({PASSWORD_ENV}).")
    st.stop()
