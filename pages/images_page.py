"""Images: the run's images per class with their provenance; exclude bad ones (kept, not deleted)."""
import pandas as pd
import streamlit as st

from core.labels import get_label_space
from pages.common import download_csv, manifest, require_run

PER_PAGE = 30
COLUMNS = 6

st.title("Images")
run = require_run()
info = run.info
df = manifest(run)
if df.empty:
    st.info("This run has no images yet. Collect some on the Query page.")
    st.stop()

space = get_label_space(info.label_space)
wnids = list(dict.fromkeys(list(info.wnids) + df["wnid"].dropna().tolist()))
counts = df.groupby("wnid")["status"].value_counts().unstack(fill_value=0)


def class_label(wnid: str) -> str:
    c = counts.loc[wnid] if wnid in counts.index else {}
    name = space.display_name(wnid) if wnid in space else wnid
    return f"{name} ({wnid}) · {int(c.get('accepted', 0))} accepted"


wnid = st.selectbox("Class", wnids, format_func=class_label)
download_csv(df, f"{run.run_id}_manifest.csv", key="dl-manifest", label="Download the whole manifest (CSV)")
rows = df[df["wnid"] == wnid]
accepted = rows[rows["status"] == "accepted"].reset_index(drop=True)

tab_grid, tab_other = st.tabs([f"Accepted ({len(accepted)})", f"Rejected and duplicates ({len(rows) - len(accepted)})"])
with tab_grid:
    if accepted.empty:
        st.info("No accepted image for this class.")
    else:
        pages = max(1, -(-len(accepted) // PER_PAGE))
        page = st.number_input("Page", 1, pages, 1) if pages > 1 else 1
        shown = accepted.iloc[(page - 1) * PER_PAGE: page * PER_PAGE]
        for start in range(0, len(shown), COLUMNS):
            cols = st.columns(COLUMNS)
            for col, (_, row) in zip(cols, shown.iloc[start:start + COLUMNS].iterrows()):
                # Captions are built from hashes and numbers only, never from web text.
                caption = f"{row['sha256'][:10]} · {row['width']}×{row['height']}" + (" · excluded" if row["excluded"] else "")
                col.image(str(run.image_path(row["file"])), caption=caption, width="stretch")

        st.markdown("**Provenance** — tick *excluded* to keep an image out of the next inference run. "
                    "The file and its row stay; untick to bring it back.")
        columns = ["file", "excluded", "excluded_reason", "source", "search_term", "url", "rank", "original_name",
                   "sha256", "width", "height", "format", "mode", "bytes", "fetched_at", "other_wnids"]
        edited = st.data_editor(
            accepted[columns], hide_index=True, width="stretch", key=f"editor-{wnid}",
            disabled=[c for c in columns if c not in ("excluded", "excluded_reason")],
            column_config={"excluded": st.column_config.CheckboxColumn("excluded"),
                           "url": st.column_config.TextColumn("url")},
        )
        changed = edited[(edited["excluded"].astype(bool) != accepted["excluded"].astype(bool))
                         | (edited["excluded_reason"].fillna("") != accepted["excluded_reason"].fillna(""))]
        if not changed.empty and st.button(f"Save {len(changed)} change(s)", type="primary"):
            for _, row in changed.iterrows():
                run.set_excluded([row["file"]], bool(row["excluded"]), str(row["excluded_reason"] or "excluded by analyst"))
            st.success("Saved. Predictions already stored are kept; excluded images are left out of metrics.")
            st.rerun()
with tab_other:
    other = rows[rows["status"] != "accepted"]
    if other.empty:
        st.caption("Nothing was rejected for this class.")
    else:
        st.dataframe(other[["status", "reason", "duplicate_of", "other_wnids", "url", "search_term", "rank",
                            "original_name", "bytes", "fetched_at"]], hide_index=True, width="stretch")
        reasons = other.assign(reason=other["reason"].fillna("")).groupby(["status", "reason"]).size()
        st.dataframe(pd.DataFrame({"count": reasons}).reset_index(), hide_index=True)
