"""Offline means offline in the browser too: loading any page of the real server makes no request
to a host other than the server's (issue 12 item 9). Streamlit fetches a ":material/...:" favicon
from fonts.gstatic.com, emoji page icons from a CDN, a theme font given as a URL from wherever it
points; none of these may come back. Chromium's performance log lists every request a page makes
(Network.requestWillBeSent), data: URLs (the inline SVG favicon) included, which have no host."""
import json
from urllib.parse import urlparse

import pytest

from tests.pages.browser import CHROMEDRIVER, CHROMIUM, CHROMIUM_FLAGS, wait_until_rendered
from tests.pages.test_browser import pytestmark  # noqa: F401  (skipped alike; the server fixture is tests/pages/conftest.py's)

SERVER_ON_SAMPLE = True  # the server fixture reads a copy of the sample store: this module is about requests, not the first start
PAGES = ("runs", "query", "import", "images", "models", "results", "confusions", "browse", "explain")


def logging_browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument("--window-size=1400,1000")
    options.set_capability("goog:loggingPrefs", {"performance": "ALL"})
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


def requested_urls(driver) -> list[str]:
    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls


@pytest.mark.long
def test_no_page_asks_an_outside_host_for_anything(server):
    url, _ = server
    own = urlparse(url).hostname
    driver = logging_browser()
    outside, seen = {}, 0
    try:
        for page in PAGES:
            driver.get(f"{url}/{page}")
            wait_until_rendered(driver, timeout=600)
            for request in requested_urls(driver):
                seen += 1
                host = urlparse(request).hostname
                if host is not None and host not in (own, "localhost", "127.0.0.1"):
                    outside.setdefault(request, []).append(page)
    finally:
        driver.quit()
    assert seen > 0, "the performance log recorded no request at all: the check would prove nothing"
    assert not outside, "requests to outside hosts: " + "; ".join(f"{u} ({', '.join(p)})" for u, p in outside.items())


def test_the_favicon_is_inline():
    """The cause fixed at its source: app.py's page icon is an inline SVG, not a Material icon or an
    emoji (both are fetched from the web by Streamlit's frontend)."""
    from tests.conftest import ROOT

    source = (ROOT / "app.py").read_text()
    call = source[source.index("st.set_page_config("):]
    call = call[:call.index("\ninit_state()")]
    assert "page_icon=" in call and "<svg" in call and ":material/" not in call


def test_the_config_ships_and_names_no_outside_font():
    import tomllib

    from tests.conftest import ROOT

    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    theme = config.get("theme", {})
    for key in ("font", "headingFont", "codeFont", "fontFaces"):
        assert "http" not in json.dumps(theme.get(key, "")), key
    assert theme.get("primaryColor", "").lower() not in ("", "#ff4b4b"), "chips are Streamlit's red"
    assert config.get("browser", {}).get("gatherUsageStats") is False
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert ".streamlit/config.toml" in pyproject["tool"]["setuptools"]["data-files"]["share/wildlens/.streamlit"]


if __name__ == "__main__":  # pragma: no cover
    pytest.main([__file__, "-q"])
