"""A URL fetched again on resume (crawl.validate.retried_on_resume; crawl.store.Collector replaces its row in
place): what a reviewer and a hostile-input campaign tried against it. A store failure of the new file gives the
old verdict back in its place (it used to drop the row, shifting every later one), threads keep one row per
(class, URL), a kill with a cross-class copy of the new file, a hand edit of the old row's reason between the
kill and the resume, and reason texts whose digits are not ASCII."""
import threading

import pandas as pd

import pytest

from tests.crawl import fake_engine as T
from tests.crawl.test_engine import check_consistent
from crawl import store as S
from crawl.config import ValidationConfig
from crawl.store import CollectError, Collector, FolderDestination
from crawl.validate import Rejected, retried_on_resume, validate_image

TABBY, TIGER_CAT = "n02123045", "n02123159"
URL = "http://img.test/a.jpg"


def _seed(tmp_path, urls, reason=("timeout", "no answer in 2 s"), wnid=TABBY):
    dest = FolderDestination(tmp_path)
    c = Collector(dest, ValidationConfig(), save_every=1000)
    for url in urls:
        c.record(wnid, {"source": "bing", "url": url}, rejection=Rejected(*reason))
    c.save()
    return dest


def test_store_failure_of_a_replaced_row_keeps_the_old_verdict(tmp_path, monkeypatch):
    """A retried URL whose new file cannot be stored (disk full): save() drops row i from the
    manifest, so the URL's earlier verdict vanishes and every later row moves up one position;
    the kill path (_replay_journal) keeps the old verdict instead."""
    urls = [f"http://img.test/{i}.jpg" for i in range(3)]
    dest = _seed(tmp_path, urls)
    c = Collector(dest, ValidationConfig(), save_every=1000, writers=1)

    def full(path, data):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(S, "write_bytes_atomic", full)
    data = T.jpeg(4100)
    c.record(TABBY, {"source": "bing", "url": urls[0]}, facts=validate_image(data), data=data)
    with pytest.raises(CollectError):
        c.save()
    after = dest.read_manifest()
    assert after["url"].tolist() == urls, "the old (timeout) row of urls[0] is kept, in place"


def test_concurrent_retries_keep_one_row_per_url(tmp_path):
    urls = [f"http://img.test/{i}.jpg" for i in range(40)]
    dest = _seed(tmp_path, urls)
    c = Collector(dest, ValidationConfig(), save_every=7, writers=2)
    blobs = {u: T.jpeg(5000 + i) for i, u in enumerate(urls)}

    def worker(w):
        for u in urls:
            claim = c.claim_url(w, u)
            if claim == "seen":
                continue
            if isinstance(claim, dict) and c.reuse(w, claim, {"source": "bing", "url": u}) is not None:
                continue
            facts = validate_image(blobs[u])
            c.record(w, {"source": "bing", "url": u}, facts=facts, data=blobs[u])
    threads = [threading.Thread(target=worker, args=(w,)) for w in (TABBY, TABBY, TIGER_CAT, TIGER_CAT)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    c.save()
    m = dest.read_manifest()
    assert not m.duplicated(["wnid", "url"]).any()
    assert (m[m.wnid == TABBY].status != "rejected").all()
    on_disk = {p.relative_to(tmp_path).as_posix() for p in tmp_path.glob("n*/*")}
    assert on_disk == set(m.loc[m.status == "accepted", "file"])


def test_kill_with_cross_class_reuse_of_a_replacement_whose_file_never_arrived(tmp_path, monkeypatch):
    dest = FolderDestination(tmp_path)
    c = Collector(dest, ValidationConfig(), save_every=1000)
    for w in (TABBY, TIGER_CAT):
        c.record(w, {"source": "bing", "url": URL}, rejection=Rejected("http-error", "HTTP 503"))
    c.save()
    r = Collector(dest, ValidationConfig(), save_every=1000)
    data = T.jpeg(6100)
    assert r.claim_url(TABBY, URL) == "new"
    r.record(TABBY, {"source": "bing", "url": URL}, facts=validate_image(data), data=data)
    other = r.claim_url(TIGER_CAT, URL)
    assert isinstance(other, dict)
    assert r.reuse(TIGER_CAT, other, {"source": "bing", "url": URL}).status == "duplicate"
    (tmp_path / r.rows[0]["file"]).unlink()  # killed before the file arrived
    again = Collector(dest, ValidationConfig())
    m = dest.read_manifest()
    assert m["reason"].tolist() == ["http-error: HTTP 503"] * 2 and m["other_wnids"].isna().all()
    assert again.will_retry(TABBY, URL) and again.will_retry(TIGER_CAT, URL)


def test_exclusion_made_after_a_failed_store_of_a_replaced_row_is_kept(tmp_path, monkeypatch):
    dest = FolderDestination(tmp_path)
    c = Collector(dest, ValidationConfig(), save_every=1000)
    c.record(TABBY, {"source": "bing", "url": URL}, rejection=Rejected("timeout", "no answer in 2 s"))
    good = T.jpeg(7100)
    c.record(TABBY, {"source": "bing", "url": "http://img.test/good.jpg"}, facts=validate_image(good), data=good)
    c.save()
    r = Collector(dest, ValidationConfig(), save_every=1000, writers=1)
    monkeypatch.setattr(S, "write_bytes_atomic", lambda path, data: (_ for _ in ()).throw(OSError(28, "No space left")))
    data = T.jpeg(7200)
    r.record(TABBY, {"source": "bing", "url": URL}, facts=validate_image(data), data=data)
    with pytest.raises(CollectError):
        r.save()                      # (it dropped row 0: the earlier-run row 'good' moved to position 0)
    m = dest.read_manifest()          # the analyst excludes 'good' (as Run.set_excluded does: by file)
    m.loc[m["url"] == "http://img.test/good.jpg", "excluded"] = True
    dest.write_manifest(m)
    with pytest.raises(CollectError):
        r.save()                      # crawl_run's finally: close(); save()
    m = dest.read_manifest()
    assert m.loc[m["url"] == "http://img.test/good.jpg", "excluded"].tolist() == [True], "the exclusion is kept"


def test_a_hand_edit_of_the_old_reason_between_kill_and_resume_keeps_the_new_rows(tmp_path):
    """Replaced rows journalled, the process killed, then row 0's reason edited by hand to a final one:
    the replay still takes both new verdicts (a rejected row has no file to orphan), so no stored file
    is left without its row."""
    dest = _seed(tmp_path, ["http://img.test/a.jpg", "http://img.test/b.jpg"], reason=("http-error", "HTTP 503"))
    resumed = Collector(dest, ValidationConfig(), save_every=1000)
    for i, url in enumerate(["http://img.test/a.jpg", "http://img.test/b.jpg"]):
        data = T.jpeg(7300 + i)
        resumed.record(TABBY, {"source": "bing", "url": url}, facts=validate_image(data), data=data)
    manifest = pd.read_csv(tmp_path / "manifest.csv", dtype=str, keep_default_na=False)
    manifest.loc[0, "reason"] = "http-error: HTTP 404"
    manifest.to_csv(tmp_path / "manifest.csv", index=False)
    Collector(dest, ValidationConfig())
    assert check_consistent(tmp_path)["status"].tolist() == ["accepted", "accepted"]


@pytest.mark.parametrize("reason, retried", [
    ("http-error: HTTP 503", True), ("http-error: HTTP 429 Too Many Requests", True), ("http-error: HTTP 404", False),
    ("http-error: HTTP \u00b2", False), ("http-error: HTTP \uff15\uff10\uff13", False), ("http-error: HTTP", False),
    ("http-error: HTTP 5000000000000000000", False), ("connection: connection refused", True), ("timeout: x", True),
    ("=cmd|' /C calc'!A0", False), (None, False), ("", False)])
def test_only_ascii_statuses_that_may_pass_are_retried(reason, retried):
    """A hand-edited manifest reason never crashes the Collector (HTTP followed by a superscript two made
    int() raise in every later crawl and import)."""
    assert retried_on_resume(reason) is retried


def test_a_manifest_with_a_superscript_status_still_opens(tmp_path):
    dest = _seed(tmp_path, [URL], reason=("http-error", "HTTP \u00b2"))
    assert not Collector(dest, ValidationConfig()).will_retry(TABBY, URL)
