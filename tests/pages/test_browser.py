"""The real server in a real browser: `python -m wildlens app` (what `make run` starts) on a fresh
WILDLENS_HOME (so the embedded sample run is built at first start, offline), loaded in headless
Chromium, first through a deep link."""
import os

import pytest

from tests.pages.browser import CHROMEDRIVER, CHROMIUM, browser, wait_until_rendered

pytestmark = pytest.mark.skipif(
    not (os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)),
    reason="Debian's chromium and chromium-driver are not installed (make browser-deps, as root)",
)


@pytest.mark.long
def test_browser_loads_the_sample_results(server, tmp_path):
    url, home = server
    driver = browser()
    try:
        # A deep link is the new server's first request; that session also builds the sample run
        # (real offline predictions). `streamlit run app.py` showed "Page not found" here once.
        driver.get(f"{url}/results")
        text = wait_until_rendered(driver, timeout=600)
        source = driver.page_source
        shot = tmp_path / "results.png"
        driver.save_screenshot(str(shot))
        driver.get(url)
        runs = wait_until_rendered(driver, timeout=300)
    finally:
        driver.quit()
    assert "Page not found" not in text, text[:2000]
    assert "Runs" in runs and "Make it the current run" in runs, runs[:2000]
    assert "Per model" in text and "Per class" in text and "Download CSV" in text, text[:3000]
    assert "Sample run" in text
    # The bar chart's axis (SVG) names the model that made the stored predictions.
    assert "efficientnet_lite0" in source
    # No error message: the section "Error types" and ETH's title "... Model Errors on ImageNet" are ours.
    assert "Traceback" not in text and "Error" not in text.replace("error_", "").replace("Error types", "").replace(
        "Model Errors on ImageNet", "")
    assert shot.stat().st_size > 20_000  # a rendered page, not a blank one
    assert (home / "runs" / "sample" / "predictions").is_dir()
