"""Knowledge: zero-shot prompt recipes of one model side by side (issue 14 item 6, being built)."""
import streamlit as st

st.title("Knowledge")
st.info("The comparison of zero-shot prompt recipes is being built; python -m classify prompts --coverage shows the coverage.")
