"""Headless Chromium for the browser test and for looking at pages during development (Debian's
chromium and chromium-driver, driven by Selenium with explicit paths, so nothing is downloaded):

    .venv/bin/python tests/pages/browser.py http://localhost:8501 runs results --out /tmp/shots
"""
from __future__ import annotations

import argparse
import contextlib
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

CHROMIUM_FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--disable-dev-shm-usage")


CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


def browser(width: int = 1400, height: int = 1000):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--window-size={width},{height}")
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


POLL = 0.2  # seconds between two looks at the page (innerText costs the renderer ~0.02 s)
BUSY_SELECTORS = ('[data-testid="stStatusWidget"]', '[data-testid="stSpinner"]', '[data-stale="true"]')
# What wait_until_rendered looks at, in one script: a title, a running indicator, the Plotly charts and
# those drawn (holding their SVG; a drawn chart has three .main-svg, so counting those said "all drawn"
# with a third of them drawn: code review), and the visible text.
RENDER_STATE = """
const busy = arguments[0].some(sel => document.querySelector(sel) !== null);
return [document.querySelector("h1") !== null, busy,
        document.querySelectorAll('[data-testid="stPlotlyChart"]').length,
        document.querySelectorAll('[data-testid="stPlotlyChart"]:has(.main-svg)').length,
        document.body.innerText];
"""


def wait_until_rendered(driver, timeout: float = 180.0, settle: float = 0.5) -> str:
    """Wait until Streamlit has finished running the script: a title is shown, no running
    indicator, spinner or stale element is present, every Plotly chart has drawn, and the visible
    text has not changed for ``settle`` seconds. Returns the visible text.

    Why 0.5 s: the running indicator covers a script run from the moment a widget asks for one
    (Streamlit's frontend shows it for RUNNING and RERUN_REQUESTED alike), Plotly charts are waited
    for by their drawn SVG, and no page runs a timed fragment, so the settle only catches a delta
    still in flight. It was 4 s, then 1.5 s: about 1.9 s of idle per wait over the ~80 waits of
    the browser tests, which kept the suite over 6 minutes on 2 cores."""
    deadline = time.monotonic() + timeout
    last_text, quiet_since = None, None
    while time.monotonic() < deadline:
        # One round trip a look (it was six WebDriver calls: 0.07 s of chromedriver and renderer a look,
        # 507 findElements of test_day's 859 calls).
        has_title, busy, charts, drawn, text = driver.execute_script(RENDER_STATE, list(BUSY_SELECTORS))
        text = _lines(text)
        ready = has_title and not busy and drawn == charts
        if ready and text == last_text:
            quiet_since = quiet_since or time.monotonic()
            if time.monotonic() - quiet_since >= settle:
                return text
        else:
            quiet_since = None
        last_text = text
        time.sleep(POLL)
    raise TimeoutError(f"{driver.current_url} did not finish rendering in {timeout:.0f} s")


# Two animation frames: the first runs before the next paint, the second after it.
PAINTED = "const done = arguments[arguments.length - 1]; requestAnimationFrame(() => requestAnimationFrame(() => done(true)));"


def wait_painted(driver) -> None:
    """Return once the page has painted what was just changed (a scroll, before a screenshot or a
    click at computed coordinates). Why not a sleep: test_day slept 0.5 s before each of its 13
    screenshots and 1 s before its chart click, ~7 s of a core left idle per run; a scroll by
    scrollIntoView is instant (behavior 'auto'), so the frame after it shows it."""
    driver.execute_async_script(PAINTED)


# --------------------------------------------------------------------------- the real server
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serve(home: Path, cwd: Path, start_timeout: float = 120.0):
    """``python -m wildlens app`` (what ``make run`` starts) on WILDLENS_HOME=home and a free port,
    offline; yields its URL once /_stcore/health answers, and stops it afterwards. Its output goes
    to home/server.log."""
    port = free_port()
    log = open(home / "server.log", "w")
    env = {**os.environ, "WILDLENS_HOME": str(home), "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "wildlens", "app", "--server.port", str(port), "--server.address",
                             "127.0.0.1"], cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + start_timeout
        while time.monotonic() < deadline:
            try:
                if urllib.request.urlopen(f"{url}/_stcore/health", timeout=2).read() == b"ok":
                    break
            except OSError:
                time.sleep(0.5)
        else:
            raise RuntimeError(f"the server did not start: {(home / 'server.log').read_text()[-2000:]}")
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


# --------------------------------------------------------------------------- driving Streamlit widgets
def body_text(driver) -> str:
    """The page's visible text: the body's ``innerText`` (what the layout renders), one line per block.

    Why not ``WebElement.text``: Selenium computes it with a JavaScript atom that walks every element's
    computed style; on the sample's Results or Browse page one call cost the renderer 0.7-0.85 s of CPU
    (20 calls: 13.8 and 17.1 s) against 0.02 s for ``innerText`` (Chromium 2026-12-05), and the waits
    poll the text every 0.4 s: it was most of the browser tests' CPU. ``innerText`` puts blank lines
    between paragraphs and pads some lines: dropped here, so a line reads as the atom's did."""
    return _lines(driver.execute_script("return document.body.innerText"))


def _lines(text) -> str:
    return "\n".join(line.strip() for line in (text or "").splitlines() if line.strip())



def wait_for(driver, condition, timeout: float = 180.0, what: str = "the condition"):
    """Poll ``condition(driver)`` until it returns something truthy (returned); a stale element
    or a missing one while Streamlit redraws counts as not yet."""
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException

    deadline = time.monotonic() + timeout
    while True:
        try:
            value = condition(driver)
            if value:
                return value
        except (NoSuchElementException, StaleElementReferenceException):
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"{driver.current_url}: {what} not seen in {timeout:.0f} s; the page reads:\n"
                               + body_text(driver)[-3000:])
        time.sleep(POLL)


def wait_for_text(driver, text: str | re.Pattern, timeout: float = 180.0) -> str:
    """Wait until the visible text contains ``text`` (a string or a compiled pattern), then until
    the page has finished rendering; returns the visible text."""
    def seen(d):
        body = body_text(d)
        return text.search(body) if isinstance(text, re.Pattern) else text in body

    wait_for(driver, seen, timeout, what=repr(text))
    return wait_until_rendered(driver, timeout=timeout)


def widget(driver, kind: str, label: str):
    """The Streamlit widget of ``kind`` (its data-testid: stSelectbox, stTextInput, ...) whose label
    contains ``label``."""
    from selenium.webdriver.common.by import By

    found = [w for w in driver.find_elements(By.CSS_SELECTOR, f'[data-testid="{kind}"]')
             if label in w.find_element(By.CSS_SELECTOR, '[data-testid="stWidgetLabel"]').text]
    if not found:
        raise LookupError(f"no {kind} labelled {label!r} on {driver.current_url}")
    return found[0]


def type_into(driver, label: str, text: str) -> None:
    """Type into the text input labelled ``label`` and commit it (Enter), as a person does."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    box = widget(driver, "stTextInput", label).find_element(By.CSS_SELECTOR, "input")
    # Select all and delete, as a person does: WebElement.clear() empties the DOM value, which React
    # puts back, so the text was appended to a prefilled box (an Images page export once went to
    # the default path with the text after it).
    box.send_keys(Keys.CONTROL + "a", Keys.DELETE)
    box.send_keys(text)
    typed = box.get_attribute("value")
    if typed != text:
        raise AssertionError(f"the box {label!r} holds {typed!r} after typing {text!r}")
    box.send_keys(Keys.ENTER)


def choose(driver, label: str, option: str, timeout: float = 60.0) -> str:
    """Pick, in the select box labelled ``label``, the first option whose text contains ``option``:
    a click on the box opens its list box, a click on the option picks it. Returns the option's text."""
    from selenium.webdriver.common.by import By

    box = widget(driver, "stSelectbox", label).find_element(By.CSS_SELECTOR, "input[role=combobox]")
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", box)
    box.click()

    def matching(d):
        return [o for o in d.find_elements(By.CSS_SELECTOR, '[role="listbox"] [role="option"]')
                if option in o.text]

    (first, *_) = wait_for(driver, matching, timeout, what=f"option {option!r} of {label!r}")
    picked = first.text
    first.click()
    return picked


def _click_first(driver, selector: str, text: str | re.Pattern, timeout: float, what: str, enabled: bool) -> str:
    """Click the first shown element of ``selector`` whose visible text contains ``text`` (or matches a
    pattern), enabled too when asked; returns its text."""
    from selenium.webdriver.common.by import By

    def found(d):
        for element in d.find_elements(By.CSS_SELECTOR, selector):
            label = element.text.strip()
            hit = text.search(label) if isinstance(text, re.Pattern) else text in label
            if hit and (element.is_enabled() or not enabled) and element.is_displayed():
                return element
        return None

    element = wait_for(driver, found, timeout, what=f"{what} {text!r}")
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", element)
    label = element.text
    element.click()
    return label


def click_button(driver, text: str | re.Pattern, timeout: float = 60.0):
    """Click the first enabled button whose visible text contains ``text`` (or matches a pattern)."""
    return _click_first(driver, "button", text, timeout, "an enabled button", enabled=True)


def click_link(driver, text: str | re.Pattern, timeout: float = 60.0):
    """Click the first page link (st.page_link) of the page's main area whose text contains ``text`` (or
    matches a pattern); returns its text."""
    return _click_first(driver, '[data-testid="stMain"] a[data-testid="stPageLink-NavLink"]', text, timeout, "a link",
                        enabled=False)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("url")
    parser.add_argument("pages", nargs="*", default=["runs"])
    parser.add_argument("--out", type=Path, default=Path("/tmp/wildlens-shots"))
    parser.add_argument("--height", type=int, default=1000)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    driver = browser(height=args.height)
    try:
        for page in args.pages:
            driver.get(f"{args.url.rstrip('/')}/{page}")
            wait_until_rendered(driver)
            target = args.out / f"{page or 'home'}.png"
            driver.save_screenshot(str(target))
            print(target)
    finally:
        driver.quit()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
