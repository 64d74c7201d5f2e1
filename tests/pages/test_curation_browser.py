"""Issue 24 in a real browser against the real server (`python -m wildlens app` on a copy of the
sample store): open an image from a confusion pair on the Confusions page, page through the pair
with the keyboard, tag two images, relabel one, and see Results show the raw and the
curated accuracy side by side and the label mistakes counted. Screenshots of each step go to
$WILDLENS_SHOTS when set, else tmp_path."""
from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tests.pages.browser import (CHROMEDRIVER, CHROMIUM, browser, click_button, type_into, wait_for,
                                 wait_for_text, wait_until_rendered)

pytestmark = pytest.mark.skipif(
    not (os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)),
    reason="Debian's chromium and chromium-driver are not installed (make browser-deps, as root)",
)
SERVER_ON_SAMPLE = True  # tests/pages/conftest.py: the server reads a copy of the built sample store
STEP = 300


@pytest.fixture
def shots(tmp_path) -> Path:
    folder = Path(os.environ.get("WILDLENS_SHOTS") or tmp_path / "shots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _press(driver, key) -> None:
    """A key press on the page itself (no text box focused), as a person paging with the arrows."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    driver.execute_script("document.activeElement && document.activeElement.blur()")
    driver.find_element(By.CSS_SELECTOR, "h1").click()
    ActionChains(driver).send_keys(key).perform()


def _position(text: str) -> tuple[int, int]:
    found = re.search(r"Image (\d+) of (\d+)", text)
    assert found, text[:2000]
    return int(found.group(1)), int(found.group(2))


@pytest.mark.long
def test_curate_a_confusion_pair_and_see_results_change(server, shots):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    url, home = server
    driver = browser(1400, 1100)
    try:
        driver.get(f"{url}/confusions?run=sample")
        wait_for_text(driver, "Misclassified images", timeout=STEP)
        driver.save_screenshot(str(shots / "curation-1-confusions.png"))
        # The first misclassified image's "Open": the Image page on its (model, true, predicted) pair.
        link = wait_for(driver, lambda d: [a for a in d.find_elements(By.CSS_SELECTOR, 'a[href*="image?"]')
                                           if a.text.strip().endswith("Open")], STEP, "an Open link")[0]
        driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", link)
        link.click()
        text = wait_for_text(driver, re.compile(r"Image 1 of \d+"), STEP)
        first, total = _position(text)
        assert total >= 2, text[:2000]
        assert "src=pair" in driver.current_url and "open=" in driver.current_url
        driver.save_screenshot(str(shots / "curation-2-image.png"))

        _press(driver, Keys.ARROW_RIGHT)  # the keyboard pages through the pair
        text = wait_for_text(driver, "Image 2 of", STEP)
        second = driver.current_url
        _press(driver, Keys.ARROW_LEFT)
        wait_for_text(driver, "Image 1 of", STEP)
        assert driver.current_url != second

        # Tag this one not-a-photo (a pill), then relabel the next one a tiger cat.
        pill = wait_for(driver, lambda d: [b for b in d.find_elements(By.CSS_SELECTOR, "button")
                                           if b.text.strip() == "not-a-photo"], STEP, "the not-a-photo pill")[0]
        driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", pill)
        pill.click()
        wait_for_text(driver, "tags: not-a-photo", STEP)
        driver.save_screenshot(str(shots / "curation-3-tagged.png"))
        _press(driver, Keys.ARROW_RIGHT)
        wait_for_text(driver, "Image 2 of", STEP)
        pill = wait_for(driver, lambda d: [b for b in d.find_elements(By.CSS_SELECTOR, "button")
                                           if b.text.strip() == "wrong-class"], STEP, "the wrong-class pill")[0]
        driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", pill)
        pill.click()  # the second image tagged too
        wait_for_text(driver, "tags: wrong-class", STEP)
        type_into(driver, "Search WordNet for the right class", "tiger cat")
        wait_for_text(driver, "tiger_cat.n.02", STEP)
        click_button(driver, re.compile(r"Relabel 1 image as tiger_cat\.n\.02"))
        text = wait_for_text(driver, "Relabelled from", STEP)
        assert "True class: tiger cat" in text, text[:2000]
        driver.save_screenshot(str(shots / "curation-4-relabelled.png"))

        # Results: the raw and the curated accuracy side by side, and a label mistake counted.
        driver.get(f"{url}/results?run=sample")
        text = wait_for_text(driver, "Raw and curated", STEP)
        assert re.search(r"efficientnet_lite0: accuracy [\d.]+% raw → [\d.]+% curated \(1 relabelled\)",
                         text.replace("->", "→")), text[:3000]
        assert re.search(r"efficientnet_lite0: [1-9]\d* of \d+ mistakes (is a|are) label or duplicate problems?", text), \
            text[:4000]
        driver.save_screenshot(str(shots / "curation-5-results.png"))
        driver.get(f"{url}/results?run=sample&view=raw")
        raw = wait_until_rendered(driver, timeout=STEP)
        assert "Raw and curated" in raw and "Traceback" not in raw
    finally:
        driver.quit()
    from core.curation import read_curation
    from core.runstore import RunStore

    state = read_curation(RunStore(home).open_run("sample"))
    assert [e.action for e in state.entries] == ["tag", "tag", "relabel"] and len(state.tags) == 2
