"""Issue 22 item 4, classify's side: ``classify --images DIR`` reads each image once, under the
class folder that holds it by its real path (core.folderscan, the rule crawl import uses too).

Before, ``DIR/n02123045/more -> ../n07920052`` classified the coffee photo as a tabby (true class
n02123045) and then skipped the real n07920052 folder as 'already scanned'.
"""
from pathlib import Path

import torch

from classify.targets import scan_folder

SITE = Path(torch.__file__).resolve().parent.parent
CHELSEA = SITE / "skimage/data/chelsea.png"
COFFEE = SITE / "skimage/data/coffee.png"


def test_links_into_another_class_or_above_dir_are_skipped_with_their_reason(tmp_path):
    root = tmp_path / "photos"
    cats, coffee = root / "n02123045", root / "n07920052"
    cats.mkdir(parents=True)
    coffee.mkdir()
    (cats / "chelsea.png").write_bytes(CHELSEA.read_bytes())
    (coffee / "coffee.png").write_bytes(COFFEE.read_bytes())
    (cats / "more").symlink_to("../n07920052", target_is_directory=True)
    (cats / "cup.png").symlink_to("../n07920052/coffee.png")
    (cats / "up").symlink_to("..", target_is_directory=True)
    (cats / "same.png").symlink_to("chelsea.png")  # inside its own class: read
    scan = scan_folder(root)
    tasks = {t.image: t for t in scan.tasks}
    assert {image for image, t in tasks.items() if t.error is None} == {
        "n02123045/chelsea.png", "n02123045/same.png", "n07920052/coffee.png"}
    assert tasks["n07920052/coffee.png"].true_wnid == "n07920052"
    assert "class folder n07920052" in tasks["n02123045/cup.png"].error  # named like an image: a failed row
    skipped = dict(scan.skipped)
    assert "class folder n07920052" in skipped["n02123045/more"] and "not followed" in skipped["n02123045/more"]
    assert "loop" in skipped["n02123045/up"]
    assert not any(image.startswith("n02123045/more/") or image.startswith("n02123045/up/") for image in tasks)
    assert not any(entry.startswith("n07920052") for entry in skipped), skipped
