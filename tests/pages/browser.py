"""Headless Chromium for the browser test and for looking at pages during development (Debian's
chromium and chromium-driver, driven by Selenium with explicit paths, so nothing is downloaded):

    .venv/bin/python tests/pages/browser.py http://localhost:8501 runs results --out /tmp/shots
"""
from __future__ import annotations

import argparse
import time
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


BUSY_SELECTORS = ('[data-testid="stStatusWidget"]', '[data-testid="stSpinner"]', '[data-stale="true"]')


def wait_until_rendered(driver, timeout: float = 180.0, settle: float = 4.0) -> str:
    """Wait until Streamlit has finished running the script: a title is shown, no running
    indicator, spinner or stale element is present, every Plotly chart has drawn, and the visible
    text has not changed for ``settle`` seconds. Returns the visible text."""
    from selenium.webdriver.common.by import By

    deadline = time.monotonic() + timeout
    last_text, quiet_since = None, None
    while time.monotonic() < deadline:
        busy = any(driver.find_elements(By.CSS_SELECTOR, sel) for sel in BUSY_SELECTORS)
        charts = driver.find_elements(By.CSS_SELECTOR, '[data-testid="stPlotlyChart"]')
        drawn = driver.find_elements(By.CSS_SELECTOR, '[data-testid="stPlotlyChart"] .main-svg')
        text = driver.find_element(By.TAG_NAME, "body").text
        ready = driver.find_elements(By.CSS_SELECTOR, "h1") and not busy and len(drawn) >= len(charts)
        if ready and text == last_text:
            quiet_since = quiet_since or time.monotonic()
            if time.monotonic() - quiet_since >= settle:
                return text
        else:
            quiet_since = None
        last_text = text
        time.sleep(0.4)
    raise TimeoutError(f"{driver.current_url} did not finish rendering in {timeout:.0f} s")


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
