"""Import: a local folder of class sub-folders becomes a new run (issue 12 item 2, being built)."""
import streamlit as st

st.title("Import")
st.info("Importing a local folder is still on the Query page's 'Import a local folder' tab.")
