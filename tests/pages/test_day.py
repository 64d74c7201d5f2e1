"""A new user's whole day in a real browser against the real server (issue 12's browser test).

``python -m wildlens app`` (what ``make run`` starts) runs on a copy of the session's sample store
(SERVER_ON_SAMPLE: the first start, which builds the sample run offline, is test_browser.py's; building it
again here was ~20 s of the suite's CPU); headless Chromium then:

1. opens the Runs page; a deep link to the sample's Results; a link naming a run that does not exist;
2. imports a folder of real photographs (the ones installed packages ship, as JPEG views) with an
   ambiguous folder (``missile``, decided in the select box) and an unknown one (``astronaut``,
   skipped), and follows the link to the new run;
3. runs the preselected offline models (EfficientNet-Lite, real weights) on it;
4. clicks a cell of the confusion matrix and sees its images, then opens Explain from a top confusion;
5. reloads Explain and still sees the same run and pair.

A screenshot is saved after each step, into $WILDLENS_SHOTS when set (look at them), else tmp_path.
"""
from __future__ import annotations

import importlib.util
import os
import re
import time
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.pages.browser import (CHROMEDRIVER, CHROMIUM, browser, choose, click_button, click_link, type_into,
                                 wait_for, wait_for_text, wait_painted, wait_until_rendered)

pytestmark = pytest.mark.skipif(
    not (os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)),
    reason="Debian's chromium and chromium-driver are not installed (make browser-deps, as root)",
)

SERVER_ON_SAMPLE = True  # tests/pages/conftest.py `server`: a copy of the built sample store
SLOW = 600  # the first page: the app's imports and the sample's tables on a shared 2-core machine
STEP = 300  # any later step: one page's rerun, an import of 12 images, three models on 12 images

# Folder -> the photograph an installed package ships (the sample run's, plus scikit-image's rocket
# and astronaut). tabby, espresso and palace resolve; missile means missile.n.01 or projectile.n.01;
# astronaut is no ImageNet-1k class.
PHOTOS = {
    "tabby": ("skimage", "data/chelsea.png"),
    "espresso": ("skimage", "data/coffee.png"),
    "missile": ("skimage", "data/rocket.jpg"),
    "palace": ("sklearn", "datasets/images/china.jpg"),
    "astronaut": ("skimage", "data/astronaut.png"),
}
MISSILE = "n03773504"
IMPORTED = ("n02123045", "n07920052", MISSILE, "n03877845")  # tabby, espresso, missile, palace
WNID = re.compile(r"\(?(n\d{8})\)?")


def write_import_folder(root: Path) -> Path:
    """Three JPEG views (whole, mirror, an off-centre crop; far apart in pHash, so none is a
    near-duplicate of another) of each photograph, in one folder per class name."""
    from PIL import ImageOps

    from core.imageio import load_rgb

    for folder, (package, relpath) in PHOTOS.items():
        spec = importlib.util.find_spec(package)
        photo = load_rgb(Path(list(spec.submodule_search_locations)[0]) / relpath)
        w, h = photo.size
        crop = photo.crop((round(w * 0.15), round(h * 0.09), round(w * 0.85), round(h * 0.79)))
        (root / folder).mkdir(parents=True)
        for name, view in (("whole", photo), ("mirror", ImageOps.mirror(photo)), ("crop", crop)):
            view = view.copy()
            view.thumbnail((320, 320))
            view.save(root / folder / f"{folder} {name}.jpg", format="JPEG", quality=90)
    return root


@pytest.fixture
def shots(tmp_path) -> Path:
    folder = Path(os.environ.get("WILDLENS_SHOTS") or tmp_path / "shots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def query_of(link: str) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlsplit(link).query).items()}


def query(driver) -> dict[str, str]:
    return query_of(driver.current_url)


def clean(text: str) -> None:
    assert "Traceback" not in text and "Page not found" not in text, text[-3000:]


# The matrix's plot: where each non-empty cell is (the invisible scatter trace that takes clicks).
CELLS_JS = """
// the matrix: the chart whose scatter carries cell data (the MF bars above it, issue 23, do not)
let gd = null, trace = null, index = -1;
const charts = document.querySelectorAll('[data-testid="stPlotlyChart"]');
for (let i = 0; i < charts.length; i++) {
  const el = charts[i].querySelector('.js-plotly-plot');
  if (!el || !el._fullLayout || !el._fullData) continue;
  trace = el._fullData.find(t => t.type === 'scatter' && t.customdata);
  if (trace) { gd = el; index = i; break; }
}
if (!gd || !trace) return null;
const L = gd._fullLayout, out = [];
for (let k = 0; k < trace.x.length; k++) {
  out.push({row: trace.y[k], col: trace.x[k], hover: String(trace.hovertext[k]),
            px: L.xaxis.l2p(trace.x[k]), py: L.yaxis.l2p(trace.y[k])});
}
return {cells: out, width: L._size.w, height: L._size.h, chart: index};
"""


@pytest.mark.long
def test_a_new_users_day(server, tmp_path, shots):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    url, home = server
    started = time.monotonic()
    driver = browser(height=1200)

    def shot(name: str, at=None) -> None:
        """A screenshot with ``at`` (an element, or visible text) at the top, else the page's title."""
        if isinstance(at, str):
            found = driver.find_elements(By.XPATH, f"//*[contains(text(), {at!r})]")
            at = found[0] if found else None
        driver.execute_script("arguments[0].scrollIntoView({block: 'start'})",
                              at or driver.find_element(By.CSS_SELECTOR, "h1"))
        wait_painted(driver)
        driver.save_screenshot(str(shots / name))

    try:
        # ---------------------------------------------------------------- 1. Runs, a deep link, a bad link
        driver.get(url)  # the server's first request: the app's imports, the sample's tables
        text = wait_for_text(driver, "Start here", SLOW)
        clean(text)
        assert "Runs" in text and "Sample photographs" in text, text[:2000]
        shot("01_runs.png")
        # The Runs page at its name too (a fresh look, 2026-12-06: /runs answered "Page not found").
        driver.get(f"{url}/runs?run=sample")
        text = wait_for_text(driver, "Start here", STEP)
        assert "Page not found" not in text and "Sample photographs" in text, text[:2000]
        # ... and the sidebar marks Runs as the page shown (it marked none there): the one link drawn unlike the others
        links = driver.find_elements(By.CSS_SELECTOR, '[data-testid="stSidebar"] a[data-testid="stPageLink-NavLink"]')
        looks = [link.get_attribute("class") for link in links]
        assert [link.text.split()[-1] for link, look in zip(links, looks) if looks.count(look) == 1] == ["Runs"], looks

        driver.get(f"{url}/results?run=sample")
        text = wait_for_text(driver, "Per model", STEP)
        clean(text)
        assert "Sample run" in text and "Per class" in text, text[:3000]
        assert query(driver).get("run") == "sample"
        shot("02_deeplink_results.png")

        driver.get(f"{url}/results?run=nonexistent")
        text = wait_for_text(driver, "No run nonexistent", STEP)
        clean(text)
        assert "Per model" not in text and "Sample run" not in text, text[:3000]  # no other run's numbers
        assert query(driver).get("run") == "nonexistent"  # the bad link stays visible until answered
        shot("03_unknown_run.png")

        # ---------------------------------------------------------------- 2. import, ambiguous folder decided
        src = write_import_folder(tmp_path / "my photos")
        driver.get(f"{url}/import")
        wait_for_text(driver, "Type the path", STEP)
        type_into(driver, "Folder", str(src))
        text = wait_for_text(driver, "5 class folders", STEP)
        assert "1 ambiguous, 1 unknown" in text and "Decide first" in text, text[-3000:]
        picked = choose(driver, "can mean 2 classes", "missile.n.01")
        assert MISSILE in picked, picked
        text = wait_for_text(driver, re.compile(r"4 folders \(12 files\) go into a new run"), STEP)
        assert "Decide first" not in text, text[-3000:]
        shot("04_import_plan.png", "class folders in")

        click_button(driver, "Import 4 folders into a new run")
        text = wait_for_text(driver, re.compile(r"Run \S+ created: 12 images of 4 classes"), STEP)
        clean(text)
        run_id = re.search(r"Run (\S+) created", text).group(1)
        assert "astronaut" in text and "skipped" in text, text[-3000:]  # the unknown folder, left out as asked
        shot("05_imported.png", "created: 12 images")
        driver.find_element(By.PARTIAL_LINK_TEXT, "Open its images").click()
        wait_for(driver, lambda d: "/images" in d.current_url and query(d).get("run") == run_id, STEP,
                 what="the new run's Images page")
        text = wait_until_rendered(driver, timeout=STEP)
        clean(text)
        assert run_id in text, text[:3000]  # the sidebar names the new run as the current one
        assert "4 classes in this run" in text, text[-3000:]
        shot("05b_images.png")

        # ---------------------------------------------------------------- 3. run the preselected models
        driver.get(f"{url}/models?run={run_id}")
        text = wait_for_text(driver, "models already run: none", STEP)
        assert run_id in text
        click_button(driver, re.compile(r"Run \d+ models?$"))
        text = wait_for_text(driver, "Predictions stored", STEP)
        clean(text)
        assert "Done in" in text and "efficientnet_lite0" in text, text[-3000:]
        shot("06_models_done.png", "usable images")

        # ---------------------------------------------------------------- 4. a matrix cell, then Explain
        driver.get(f"{url}/confusions?run={run_id}")
        wait_for_text(driver, "Confusion matrix", STEP)
        layout = wait_for(driver, lambda d: d.execute_script(CELLS_JS), STEP, what="the matrix's cells")
        cells = layout["cells"]
        # A mistake if the model made one (its images link to Browse), else a diagonal cell.
        cell = next((c for c in cells if c["row"] != c["col"]), cells[0])
        chart = driver.find_elements(By.CSS_SELECTOR, '[data-testid="stPlotlyChart"]')[layout["chart"]]
        driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", chart)
        wait_painted(driver)
        drag = chart.find_element(By.CSS_SELECTOR, ".nsewdrag")
        size = drag.size
        ActionChains(driver).move_to_element_with_offset(
            drag, round(cell["px"] - size["width"] / 2), round(cell["py"] - size["height"] / 2)).pause(0.5).click().perform()
        cell_box = lambda d: d.find_element(
            By.CSS_SELECTOR, '[data-testid="stSelectbox"] input[aria-label="Images of the cell"]').get_attribute("value")
        chosen = wait_for(driver, cell_box, STEP, what="the clicked cell in 'Images of the cell'")
        text = wait_until_rendered(driver, timeout=STEP)
        clean(text)
        true_wnid = WNID.search(cell["hover"].split("→")[0]).group(1)
        assert true_wnid in chosen and re.search(r"· \d+ images?", chosen), (chosen, cell)
        n = int(re.search(r"(\d+) images?", cell["hover"]).group(1))
        assert re.search(rf"→ .*· {n} images?", text), text[-4000:]  # the cell's heading, then its images
        if cell["row"] != cell["col"]:
            assert "in Browse" in text, text[-4000:]
        shot("07_matrix_clicked.png", driver.find_elements(By.CSS_SELECTOR, '[data-testid="stPlotlyChart"]')[layout["chart"]])
        shot("07b_matrix_cell_images.png", [e for e in driver.find_elements(By.CSS_SELECTOR, '[data-testid="stSelectbox"]')
                                            if "Images of the cell" in e.text][0])

        # The top confusions of the clicked cell's true class: one "Explain <class>" per confusion.
        true_name = cell["hover"].split("→")[0].rsplit("(", 1)[0].strip()
        choose(driver, "True class", f"({true_wnid})")
        wait_for(driver, lambda d: d.find_element(By.CSS_SELECTOR, '[data-testid="stSelectbox"] input[aria-label="True class"]')
                 .get_attribute("value").endswith(f"({true_wnid})"), STEP, what="the true class picked")
        wait_until_rendered(driver, timeout=STEP)
        label = click_link(driver, re.compile(r"Explain \S"), STEP)
        pred_name = label.split("Explain", 1)[1].strip()
        wait_for(driver, lambda d: "/explain" in d.current_url, STEP, what="the Explain page")
        text = wait_for_text(driver, "Path length", STEP)
        shot("08_explain.png")  # before the checks: when one fails, the picture shows what the page did
        clean(text)
        params = query(driver)
        assert params.get("run") == run_id, f"Explain opened run {params.get('run')!r}, not {run_id!r}: {driver.current_url}"
        assert params.get("true") == true_wnid, (driver.current_url, true_wnid)
        model, pred_wnid = params.get("model"), params.get("pred")
        assert model and model.startswith("efficientnet_lite") and WNID.fullmatch(pred_wnid or ""), driver.current_url

        def same_pair(text: str) -> None:
            assert run_id in text, text[:3000]  # the sidebar's current run
            assert f"{true_name} ({true_wnid}) → {pred_name} ({pred_wnid})" in text, (true_name, pred_name, text[-4000:])
            assert "Sample run" not in text
            for box, value in (("Model", model), ("True class", f"({true_wnid})"), ("Confused with", f"({pred_wnid})")):
                shown = driver.find_element(By.CSS_SELECTOR, f'[data-testid="stSelectbox"] input[aria-label="{box}"]')
                assert value in shown.get_attribute("value"), (box, shown.get_attribute("value"), value)

        same_pair(text)

        # ---------------------------------------------------------------- 5. a reload keeps run and pair
        explain_url = driver.current_url
        driver.refresh()
        text = wait_for_text(driver, "Path length", STEP)
        shot("09_explain_reload.png")
        clean(text)
        assert query(driver) == query_of(explain_url), (driver.current_url, explain_url)
        same_pair(text)
    finally:
        driver.quit()
    print(f"the day took {time.monotonic() - started:.0f} s; screenshots in {shots}")
