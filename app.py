"""WildLens dashboard entry point (placeholder until the dashboard lands): query -> classes."""
import streamlit as st

from explain.labels import QueryError, hyponym_classes, label_space_names, senses

st.set_page_config(page_title="WildLens", layout="wide")
st.title("WildLens")
st.caption("How ImageNet classifiers fail on web images, explained through WordNet.")

space = st.selectbox("Label space", label_space_names())
query = st.text_input("Query", value="cat")
try:
    found = senses(query, space)
except QueryError as exc:
    st.error(str(exc))
    st.stop()
choice = st.radio("Sense", [s.name for s in found],
                  format_func=lambda n: next(f"{s.name} ({s.n_classes} classes): {s.definition}" for s in found if s.name == n))
try:
    classes = hyponym_classes(choice, space)
except QueryError as exc:
    st.warning(str(exc))
    st.stop()
st.dataframe([{"wnid": c.wnid, "class": c.name, "path": " > ".join(c.path)} for c in classes], use_container_width=True)
