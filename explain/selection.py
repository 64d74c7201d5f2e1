"""A selection of images, as it travels in a URL: what the Image page pages through (issue 24
item 1), opened from any grid. One selection is one of :data:`SOURCES`:

- ``browse``: the Browse page's filters (models, true and predicted class, outcome, relations,
  confidence, error types, tags) and its order;
- ``pair``: one model's images of a true class predicted as another (a confusion pair, a cell of
  the confusion matrix; true == pred: the class's correct images);
- ``compare``: one group of the two-model comparison (both wrong, only A wrong, ...);
- ``issues``: the images the label-issue probe flagged on one model's features, most suspect first;
- ``list``: images named one by one (an embedding-map selection).

:func:`resolve` turns a selection into its ordered images with the library's own filters
(:mod:`explain.browse`), so the Image page's next and previous follow the grid's order exactly.
The URL form uses the Browse page's parameter names (``model``, ``true``, ``pred``, ``outcome``,
``relation``, ``conf_min``, ``conf_max``) plus ``src``, ``etype``, ``tag``, ``margin_max``, ``sort``, ``cmp_a``,
``cmp_b``, ``cmp_group`` and ``img``; a value at its default is left out.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable

import pandas as pd

from .browse import (GROUPS, OUTCOMES, SORTS, BrowseError, compare_models, filter_annotated, filter_images,
                     selection_images)
from .error_types import ERROR_TYPES
from .vocabulary import RELATIONS

SOURCES = ("browse", "pair", "compare", "issues", "list")
SOURCE_LABELS = {"browse": "Browse's filters", "pair": "a confusion pair", "compare": "a two-model comparison",
                 "issues": "label issues", "list": "images picked"}
MAX_LISTED = 500  # images a 'list' selection names in a URL (an embedding-map lasso picks that many at most)


@dataclass(frozen=True)
class Selection:
    source: str = "browse"
    models: tuple[str, ...] = ()
    true: str = ""
    pred: str = ""
    outcome: str = "all"
    relations: tuple[str, ...] = ()
    conf_min: float | None = None
    conf_max: float | None = None
    error_types: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    margin_max: float | None = None
    sort: str = "class"
    compare: tuple[str, str, str] = ("", "", "both_wrong")
    images: tuple[str, ...] = field(default=())

    def params(self) -> dict[str, list[str]]:
        """The selection as URL parameters (each a list of values; defaults left out)."""
        out: dict[str, list[str]] = {"src": [self.source]}
        if self.source == "list":
            out["img"] = list(self.images)
            return out
        if self.source == "compare":
            out.update(cmp_a=[self.compare[0]], cmp_b=[self.compare[1]], cmp_group=[self.compare[2]])
            if self.true:
                out["true"] = [self.true]
            return out
        if self.models:
            out["model"] = list(self.models)
        for key, value in (("true", self.true), ("pred", self.pred)):
            if value:
                out[key] = [value]
        if self.source == "browse":
            if self.outcome != "all":
                out["outcome"] = [self.outcome]
            if self.relations:
                out["relation"] = list(self.relations)
            if self.conf_min is not None:
                out["conf_min"] = [f"{self.conf_min:g}"]
            if self.conf_max is not None:
                out["conf_max"] = [f"{self.conf_max:g}"]
            if self.error_types:
                out["etype"] = list(self.error_types)
            if self.tags:
                out["tag"] = list(self.tags)
            if self.margin_max is not None:
                out["margin_max"] = [f"{self.margin_max:g}"]
            if self.sort != "class":
                out["sort"] = [self.sort]
        return out

    @classmethod
    def from_params(cls, get_all: Callable[[str], list[str]]) -> tuple["Selection", list[str]]:
        """(the selection, notes on values it could not take) from a URL's parameters (``get_all``:
        key -> its values, as ``st.query_params.get_all``). Bad values are dropped and named, never
        an error: a link may hold anything."""
        notes: list[str] = []

        def one(key: str) -> str:
            values = get_all(key)
            return values[0] if values else ""

        source = one("src") or "browse"
        if source not in SOURCES:
            notes.append(f"src={source[:30]} (one of {', '.join(SOURCES)})")
            source = "browse"
        if source == "list":
            images = tuple(dict.fromkeys(v for v in get_all("img") if v))[:MAX_LISTED]
            return cls(source="list", images=images), notes
        if source == "compare":
            group = one("cmp_group") or "both_wrong"
            if group not in GROUPS:
                notes.append(f"cmp_group={group[:30]} (one of {', '.join(GROUPS)})")
                group = "both_wrong"
            return cls(source="compare", true=one("true"), compare=(one("cmp_a"), one("cmp_b"), group)), notes
        outcome = one("outcome") or "all"
        if outcome not in OUTCOMES:
            notes.append(f"outcome={outcome[:30]} (one of {', '.join(OUTCOMES)})")
            outcome = "all"
        relations = tuple(r for r in get_all("relation") if r in RELATIONS)
        odd = [r for r in get_all("relation") if r and r not in RELATIONS]
        if odd:
            notes.append(f"relation={odd[0][:30]} (one of {', '.join(RELATIONS)})")
        bounds = []
        for key in ("conf_min", "conf_max", "margin_max"):
            text = one(key)
            value = None
            if text:
                try:
                    value = float(text)
                except ValueError:
                    value = None
                # Out of [0, 1] refused as Browse refuses it, not clipped (a hostile check: conf_min=41, meant as
                # 41 %, became 1 and the page said only that no image was left).
                if value is None or not 0.0 <= value <= 1.0:
                    notes.append(f"{key}={text[:30]} (a fraction from 0 to 1, e.g. 0.41 for 41%)")
                    value = None
            bounds.append(value)
        # Error types are a closed vocabulary, named as Browse names them (a hostile check: etype=nonsense gave only
        # "No image in this selection").
        error_types = tuple(dict.fromkeys(e for e in get_all("etype") if e in ERROR_TYPES))
        odd = [e for e in get_all("etype") if e and e not in ERROR_TYPES]
        if odd:
            notes.append(f"etype={odd[0][:30]} (one of {', '.join(ERROR_TYPES)})")
        sort = one("sort") or "class"
        if sort not in SORTS:
            notes.append(f"sort={sort[:30]} (one of {', '.join(SORTS)})")
            sort = "class"
        return cls(source=source, models=tuple(dict.fromkeys(m for m in get_all("model") if m)), true=one("true"),
                   pred=one("pred"), outcome=outcome, relations=relations, conf_min=bounds[0], conf_max=bounds[1],
                   error_types=error_types,
                   tags=tuple(dict.fromkeys(t for t in get_all("tag") if t)), margin_max=bounds[2], sort=sort), notes

    def with_images(self, images) -> "Selection":
        return replace(self, source="list", images=tuple(images)[:MAX_LISTED])


def resolve(selection: Selection, table: pd.DataFrame, label_issues: pd.DataFrame | None = None) -> pd.DataFrame:
    """The selection's images in order (``image``, ``true_wnid``), from ``table``: an annotated
    image table of the view (:func:`explain.browse.annotate`). ``label_issues``: the probe's
    table (core.explained.LABEL_ISSUES_SCHEMA), for an ``issues`` selection."""
    s = selection
    if s.source == "list":
        first = table.drop_duplicates("image").set_index("image")["true_wnid"]
        images = [i for i in s.images if i in first.index]
        return pd.DataFrame({"image": pd.array(images, dtype="string"),
                             "true_wnid": pd.array([first[i] for i in images], dtype="string")})
    if s.source == "compare":
        a, b, group = s.compare
        if not a or not b or a == b:
            raise BrowseError("A comparison needs two different models (cmp_a, cmp_b).")
        rows = compare_models(filter_images(table, true=s.true or None), a, b).group(group)
        return rows[["image", "true_wnid"]].reset_index(drop=True)
    if s.source == "issues":
        if label_issues is None or label_issues.empty:
            return pd.DataFrame({"image": pd.Series(dtype="string"), "true_wnid": pd.Series(dtype="string")})
        flagged = label_issues[label_issues["is_issue"].fillna(False).astype(bool)]
        if s.models:
            flagged = flagged[flagged["model"].isin(s.models)]
        flagged = flagged.sort_values(["label_quality", "image"], kind="stable")
        known = set(table["image"].dropna())
        flagged = flagged[flagged["image"].isin(known)].drop_duplicates("image")
        return flagged[["image", "true_wnid"]].astype("string").reset_index(drop=True)
    models = list(s.models) or None
    rows = filter_images(table, models=models, true=s.true or None, pred=s.pred or None,
                         outcome=s.outcome if s.source == "browse" else "all",
                         relations=list(s.relations) or None, conf_min=s.conf_min, conf_max=s.conf_max)
    if s.source == "browse":
        rows = filter_annotated(rows, error_types=list(s.error_types) or None, tags=list(s.tags) or None,
                                margin_max=s.margin_max)
    return selection_images(rows, s.sort if s.source == "browse" else "class")


def describe(selection: Selection, name: Callable[[str], str]) -> str:
    """A few plain words on what the selection is ('efficientnet_lite0: tabby → tiger cat'),
    ``name``: wnid -> class name. Outside text: escape it where Markdown is read."""
    s = selection
    if s.source == "list":
        return f"{len(s.images):,} image{'' if len(s.images) == 1 else 's'} picked"
    if s.source == "compare":
        # 'only A wrong', not 'only a wrong' (a UI review): A and B are the two models named before it.
        group = s.compare[2].replace("_a_", "_A_").replace("_b_", "_B_").replace("_", " ")
        return f"{s.compare[0]} vs {s.compare[1]}: {group}"
    if s.source == "issues":
        return "label issues" + (f" on {', '.join(s.models)}" if s.models else "")
    who = ", ".join(s.models) if s.models else "every model"
    if s.source == "pair":
        return f"{who}: {name(s.true) if s.true else 'any class'} → {name(s.pred) if s.pred else 'any prediction'}"
    parts = [who]
    if s.true:
        parts.append(f"true {name(s.true)}")
    if s.pred:
        parts.append(f"predicted {name(s.pred)}")
    if s.outcome != "all":
        parts.append({"mistake": "mistakes", "correct": "correct"}[s.outcome])
    if s.relations:
        parts.append(", ".join(s.relations))
    if s.error_types:
        parts.append("error type " + ", ".join(s.error_types))
    if s.tags:
        parts.append("tagged " + ", ".join(s.tags))
    return " · ".join(parts)
