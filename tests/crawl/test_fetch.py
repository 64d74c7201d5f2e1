"""Fetching limits against a loopback server: schemes, size, time, redirects, User-Agent."""
import gzip
import time

import pytest

from tests.crawl import fake_engine as T
from crawl.config import USER_AGENT
from crawl.http import FetchLimits, check_url, fetch, probe
from crawl.validate import Rejected

FAST = FetchLimits(connect_timeout=1.0, read_timeout=0.5, deadline=1.5, max_bytes=200_000, max_redirects=3)


@pytest.fixture(autouse=True)
def _loopback_only(monkeypatch):
    T.loopback_only(monkeypatch)


@pytest.fixture(scope="module")
def server():
    with T.FakeEngine() as engine:
        engine.add("/ok.jpg", T.jpeg(1), headers={"Content-Type": "image/jpeg"})
        engine.add("/missing-type", T.jpeg(2))
        engine.add("/500", b"oops", status=500)
        engine.add("/slow.jpg", T.jpeg(3), delay=3.0)
        engine.add("/drip.jpg", b"x" * 20_000, drip=0.2)
        engine.add("/big.jpg", b"\xff\xd8\xff" + b"0" * 300_000)
        engine.add("/big-unannounced.jpg", b"\xff\xd8\xff" + b"0" * 300_000, content_length=False)
        engine.add("/gzip-bomb", gzip.compress(b"\0" * 5_000_000), headers={"Content-Encoding": "gzip"})
        engine.add("/loop", status=302, headers={"Location": "/loop"})
        engine.add("/to-file", status=302, headers={"Location": "file:///etc/passwd"})
        engine.add("/to-data", status=301, headers={"Location": "data:image/png;base64,AAAA"})
        engine.add("/hop", status=307, headers={"Location": "/ok.jpg"})
        yield engine


def reason(server, path, limits=FAST):
    with pytest.raises(Rejected) as info:
        fetch(server.absolute(path), limits, USER_AGENT)
    return info.value.reason


def test_fetch_ok_and_redirect_followed(server):
    got = fetch(server.absolute("/hop"), FAST, USER_AGENT)
    assert got.content == T.jpeg(1) and got.url.endswith("/ok.jpg") and got.status == 200
    assert USER_AGENT in server.user_agents and USER_AGENT.startswith("WildLens/")


def test_http_errors(server):
    assert reason(server, "/nothing-here") == "http-error: HTTP 404"
    assert reason(server, "/500") == "http-error: HTTP 500"


def test_slow_answer_times_out_quickly(server):
    started = time.monotonic()
    assert reason(server, "/slow.jpg").startswith("timeout:")
    assert time.monotonic() - started < 2.0


def test_drip_feeding_server_is_cut_at_the_deadline(server):
    started = time.monotonic()
    assert reason(server, "/drip.jpg") == "timeout: download took longer than 1.5s"
    assert time.monotonic() - started < 2.5


def test_size_limit_with_and_without_content_length(server):
    assert reason(server, "/big.jpg").startswith("too-large: 300003 bytes announced")
    assert reason(server, "/big-unannounced.jpg") == "too-large: more than 200000 bytes"
    assert reason(server, "/gzip-bomb") == "too-large: more than 200000 bytes"  # counted after decoding


def test_redirect_loop_and_non_http_redirects_are_refused(server):
    assert reason(server, "/loop") == "redirects: more than 3 redirects"
    assert reason(server, "/to-file") == "bad-url: scheme 'file' refused: http and https only"
    assert reason(server, "/to-data") == "bad-url: scheme 'data' refused: http and https only"
    assert server.hits["/loop"] == 4  # the first request + 3 redirects, then stop


@pytest.mark.parametrize("url", ["file:///etc/passwd", "ftp://example.org/x.jpg", "data:image/png;base64,AAAA",
                                 "javascript:alert(1)", "//no-scheme/x.jpg", "http://", ""])
def test_only_http_and_https_urls(url):
    with pytest.raises(Rejected) as info:
        check_url(url)
    assert info.value.code == "bad-url"


def test_connection_refused_is_reported():
    with pytest.raises(Rejected) as info:
        fetch(T.closed_port_url() + "/x.jpg", FAST, USER_AGENT)
    assert info.value.reason == "connection: connection refused"


def test_probe(server):
    assert probe(server.base_url + "/", timeout=2, user_agent=USER_AGENT).ok
    started = time.monotonic()
    result = probe(T.closed_port_url() + "/", timeout=2, user_agent=USER_AGENT)
    assert not result.ok and result.detail == "connection refused" and time.monotonic() - started < 2
    dns = probe("https://www.bing.com/", timeout=2, user_agent=USER_AGENT)  # the guard fails name resolution
    assert not dns.ok and dns.detail == "the name cannot be resolved (DNS)"
