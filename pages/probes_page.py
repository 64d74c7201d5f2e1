"""Probes: linear probes and few-shot curves on stored features (issue 15, being built)."""
import streamlit as st

st.title("Probes")
st.info("Linear probes on frozen features are being built (python -m probe).")
