"""Browse: every image with its predictions, filtered (issue 12 item 4b/4c, being built)."""
import streamlit as st

st.title("Browse")
st.info("The image browser is being built; misclassified images are on the Confusions page.")
