"""Fetching limits against a loopback server: schemes, size, time, redirects, User-Agent."""
import gzip
import time

import pytest

from tests.crawl import fake_engine as T
from crawl.config import USER_AGENT
from crawl.http import FetchLimits, address_problem, check_url, fetch, probe
from crawl.validate import Rejected

# The image servers of these tests are on loopback, which crawls refuse by default (issue 11 item 17).
FAST = FetchLimits(connect_timeout=1.0, read_timeout=0.5, deadline=1.5, max_bytes=200_000, max_redirects=3,
                   allow_private_hosts=True)
STRICT = FetchLimits(connect_timeout=1.0, read_timeout=1.0, deadline=1.5, max_bytes=200_000, max_redirects=3)


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
        engine.add("/drip-headers.jpg", T.jpeg(4), header_drip=0.3)
        for i in range(5):
            engine.add(f"/slow-hop/{i}", status=302, headers={"Location": f"/slow-hop/{i + 1}"}, delay=0.6)
        engine.add("/slow-hop/5", T.jpeg(5), delay=0.6)
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


# --------------------------------------------------------------------------- issue 11 item 5: one deadline
def test_headers_dripped_a_byte_at_a_time_are_cut_at_the_deadline(server):
    """Each byte comes within the read timeout, so only a deadline over the whole request stops it."""
    limits = FetchLimits(connect_timeout=1.0, read_timeout=1.0, deadline=1.5, max_bytes=200_000, allow_private_hosts=True)
    started = time.monotonic()
    assert reason(server, "/drip-headers.jpg", limits) == "timeout: download took longer than 1.5s"
    assert time.monotonic() - started < 2.2


def test_the_deadline_covers_every_redirect(server):
    limits = FetchLimits(connect_timeout=1.0, read_timeout=1.0, deadline=1.5, max_bytes=200_000, max_redirects=8,
                         allow_private_hosts=True)
    started = time.monotonic()
    assert reason(server, "/slow-hop/0", limits) == "timeout: download took longer than 1.5s"
    assert time.monotonic() - started < 2.2


def test_the_deadline_covers_name_resolution(server, monkeypatch):
    T.resolve_names(monkeypatch, {"slow-dns.test": "127.0.0.1"}, delay=5.0)
    port = server.base_url.rsplit(":", 1)[1]
    started = time.monotonic()
    with pytest.raises(Rejected) as info:
        fetch(f"http://slow-dns.test:{port}/ok.jpg", FAST, USER_AGENT)
    assert info.value.reason == "timeout: download took longer than 1.5s"
    assert time.monotonic() - started < 2.2


# --------------------------------------------------------------------------- issue 11 item 17: SSRF
@pytest.mark.parametrize("address, problem", [
    ("127.0.0.1", "loopback"), ("127.9.9.9", "loopback"), ("::1", "loopback"), ("::ffff:127.0.0.1", "loopback"),
    ("10.1.2.3", "private"), ("172.16.0.1", "private"), ("192.168.1.1", "private"), ("fd00::1", "private"),
    ("169.254.169.254", "link-local"), ("fe80::1", "link-local"), ("224.0.0.1", "multicast"), ("ff02::1", "multicast"),
    ("0.0.0.0", "unspecified"), ("100.64.0.1", "non-public"), ("240.0.0.1", "reserved"),
    ("8.8.8.8", None), ("2606:4700:4700::1111", None), ("93.184.215.14", None),
])
def test_non_public_addresses_are_named(address, problem):
    assert address_problem(address) == problem


@pytest.mark.parametrize("url", ["http://127.0.0.1:9/x.jpg", "http://[::1]:9/x.jpg", "http://169.254.169.254/latest/meta-data/",
                                 "http://10.0.0.1/x.jpg", "http://0.0.0.0:9/x.jpg", "https://[fe80::1]/x.jpg"])
def test_address_literals_are_refused_without_connecting(url):
    with pytest.raises(Rejected) as info:  # the loopback guard would fail the test on a connection elsewhere
        fetch(url, STRICT, USER_AGENT)
    assert info.value.code == "private-address" and "--allow-private-hosts" in info.value.detail


def test_private_addresses_are_refused_after_name_resolution(server, monkeypatch):
    T.resolve_names(monkeypatch, {"intranet.test": "127.0.0.1"})
    port = server.base_url.rsplit(":", 1)[1]
    fetch(server.absolute("/ok.jpg"), FAST, USER_AGENT)  # leaves a kept-alive connection that allowed loopback
    hits = server.hits["/ok.jpg"]
    with pytest.raises(Rejected) as info:
        fetch(f"http://intranet.test:{port}/ok.jpg", STRICT, USER_AGENT)
    assert info.value.reason == ("private-address: intranet.test resolves to 127.0.0.1, a loopback address "
                                 "(--allow-private-hosts fetches it)")
    with pytest.raises(Rejected, match="^private-address: 127.0.0.1 is a loopback address"):
        fetch(server.absolute("/ok.jpg"), STRICT, USER_AGENT)
    assert server.hits["/ok.jpg"] == hits  # refused before any request
    got = fetch(f"http://intranet.test:{port}/ok.jpg", FAST, USER_AGENT)  # allowed when asked
    assert got.content == T.jpeg(1)


def test_private_addresses_are_refused_after_every_redirect(server, monkeypatch):
    """The first hop is on a trusted origin (as the engine's own address is); its redirects are not."""
    T.resolve_names(monkeypatch, {"intranet.test": "127.0.0.1"})
    host, port = server.base_url.split("//")[1].split(":")
    trusted = FetchLimits(connect_timeout=1.0, read_timeout=1.0, deadline=1.5, trusted_origins=frozenset({(host, int(port))}))
    assert fetch(server.absolute("/hop"), trusted, USER_AGENT).content == T.jpeg(1)
    with T.FakeEngine() as other:
        other.add("/inner.jpg", T.jpeg(6))
        server.add("/to-other", status=302, headers={"Location": other.absolute("/inner.jpg")})
        server.add("/to-name", status=302, headers={"Location": f"http://intranet.test:{other.base_url.rsplit(':', 1)[1]}/inner.jpg"})
        for path in ("/to-other", "/to-name"):
            with pytest.raises(Rejected) as info:
                fetch(server.absolute(path), trusted, USER_AGENT)
            assert info.value.code == "private-address", path
        assert other.hits["/inner.jpg"] == 0
        allowed = FetchLimits(connect_timeout=1.0, read_timeout=1.0, deadline=1.5, allow_private_hosts=True)
        assert fetch(server.absolute("/to-other"), allowed, USER_AGENT).content == T.jpeg(6)


def test_https_connections_are_guarded_and_kept_alive(tmp_path, monkeypatch):
    """The same guards over TLS: a kept-alive connection is reused (its socket watched again), a
    dripping server is cut at the deadline, loopback is refused unless allowed."""
    certificate = T.self_signed_certificate(tmp_path)
    if certificate is None:
        pytest.skip("no openssl command to make a certificate")
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", certificate.cert)
    with T.FakeEngine(tls=certificate) as server:
        server.add("/ok.jpg", T.jpeg(1))
        server.add("/drip-headers.jpg", T.jpeg(4), header_drip=0.3)
        assert server.base_url.startswith("https://")
        for _ in range(3):
            assert fetch(server.absolute("/ok.jpg"), FAST, USER_AGENT).content == T.jpeg(1)
        started = time.monotonic()
        limits = FetchLimits(connect_timeout=1.0, read_timeout=1.0, deadline=1.5, allow_private_hosts=True)
        assert reason(server, "/drip-headers.jpg", limits) == "timeout: download took longer than 1.5s"
        assert time.monotonic() - started < 2.2
        assert fetch(server.absolute("/ok.jpg"), FAST, USER_AGENT).content == T.jpeg(1)
        assert reason(server, "/ok.jpg", STRICT).startswith("private-address: 127.0.0.1 is a loopback address")
