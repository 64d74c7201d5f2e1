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
    URLs and search terms inside it are outside text), and an optional note of our own."""
    from core.errors import one_line

    st.error(escape_markdown(one_line(exc)) + (f" {note}" if note else ""), icon=icon)


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
