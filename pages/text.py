"""Outside text on a page: escaped for Streamlit's Markdown, user-facing errors in one line, counted
nouns, and a progress bar for ``core.progress`` events. No Streamlit state, no run."""
from __future__ import annotations

import re

import streamlit as st


def escape_markdown(text: str) -> str:
    """Show file names, search terms and other outside text literally where Streamlit would read
    Markdown: no links, images, formatting, LaTeX ($), colour or icon directives (:) can be injected.

    Streamlit reads Markdown in st.markdown, caption, error, warning, info, success, toast,
    title/header/subheader, the labels of status, spinner, progress, button, page_link and tabs,
    radio options and image captions: outside text (folder and file names, search terms, URLs,
    engine and exception texts that quote them, run titles, model ids and wnids from stored
    predictions, class names) goes through here before it reaches one of them. Select box and
    multiselect options and table cells are plain text: escaping them would show the backslashes.
    Our own closed vocabularies are safe as they are: run ids (core.runstore's pattern), label
    space and engine names, WordNet synset names (letters, digits, ``. _ - ' /``).

    Bare URLs, ``www.`` hosts and e-mail addresses: the browser's Markdown (GFM autolink literals)
    links them in the text it has read, after the backslash escapes, so escaping cannot stop it
    (issue 22 item 18: a run titled 'see http://x' was a link in the sidebar). An invisible word
    joiner (U+2060) goes into each pattern's start instead (between ':' and '//', 'www' and '.',
    after '@'): the text reads the same and no link forms."""
    text = _AUTOLINK_START.sub(WORD_JOINER, str(text))
    return re.sub(r"([\\`*_{}\[\]()<>#+\-.!|~$:=])", r"\\\1", text)


WORD_JOINER = "\u2060"


# Where GFM's autolink literals start: 'http(s)://' (and any scheme's '://'), 'www.', an '@'.
_AUTOLINK_START = re.compile(r"(?i)(?<=:)(?=//)|(?<=www)(?=\.)|(?<=@)")


def show_error(exc: BaseException, *, note: str = "", icon: str = ":material/error:") -> None:
    """A user-facing error (core.errors.WildLensError) in place: its one line, escaped (file names,
    URLs and search terms inside it are outside text), and an optional note of our own. An error that words
    itself for a page (``page_text``: crawl.export.ExportError says "The folder DIR ...", not "--out DIR ...")
    is shown in those words."""
    from core.errors import first_line, one_line, printable

    page_text = getattr(exc, "page_text", None)
    # Cut and escaped as one_line does: a right-to-left override in a folder name is shown, not obeyed.
    said = printable(first_line(page_text)) if page_text else one_line(exc)
    st.error(escape_markdown(said) + (f" {note}" if note else ""), icon=icon)


def plural(count: int, noun: str, nouns: str | None = None) -> str:
    """'1 class', '2 classes', '0 images': the count and the noun in the right number (``nouns``
    for an irregular plural; otherwise +es after s, x, ch, sh, and +s)."""
    if count == 1:
        return f"{count:,} {noun}"
    if nouns is None:
        nouns = noun + ("es" if noun.endswith(("s", "x", "ch", "sh")) else "s")
    return f"{count:,} {nouns}"


def progress_bar():
    """A progress callback (core.progress) drawing one Streamlit bar per (stage, task)."""
    bars = {}

    def callback(event) -> None:
        key = (event.stage, event.task)
        if key not in bars:
            bars[key] = st.progress(0.0)
        text = f"{event.stage} {event.task}: {event.done}/{event.total or '?'}" + (f" · {event.message}" if event.message else "")
        bars[key].progress(event.fraction, text=escape_markdown(text))

    return callback


def error_type_line(rows: list[dict]) -> tuple[str, str]:
    """A card's error-type caption and its hover text, from its matched mistakes' stored types: one
    type when they agree, else each model's ('error types: lite0: related · lite1: model-failure').
    Why per model: a card showed the first model's type under every model's mistake (a fresh look
    at the sample, 2026-12-06: lite1's 'comic book' was 'model-failure', shown as 'related')."""
    typed = [r for r in rows if r.get("matched") and isinstance(r.get("error_type"), str)]
    if not typed:
        return "", ""
    kinds = list(dict.fromkeys(r["error_type"] for r in typed))
    reasons = [str(r.get("error_reason") or "") for r in typed]
    if len(typed) == 1:
        return f"error type: {kinds[0]}", reasons[0]
    hover = "  \n".join(f"{r['model']}: {reason}" for r, reason in zip(typed, reasons) if reason)
    if len(kinds) == 1:
        return f"error type: {kinds[0]} ({len(typed)} models)", hover
    return "error types: " + " · ".join(f"{r['model']}: {r['error_type']}" for r in typed), hover


def listed(items: list[str], limit: int = 5) -> str:
    """The first few of ``items`` (each cut to 60 characters) and how many more: a link may repeat a
    parameter thousands of times, or hold a value thousands of characters long. Control and format characters
    are written as their escapes (core.errors.printable): a right-to-left override or a newline from a link is
    shown, not obeyed (a hostile check: they reversed or broke the warnings that quote a link)."""
    from core.errors import printable

    items = [printable(item) for item in items[:limit]] + list(items[limit:])
    shown = [item if len(item) <= 60 else item[:59] + "…" for item in items[:limit]]
    return ", ".join(shown) + (f" and {len(items) - limit:,} more" if len(items) > limit else "")
