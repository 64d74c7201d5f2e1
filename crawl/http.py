"""Fetching with limits: http(s) only, bounded size, time and redirects, an honest User-Agent.

Every request WildLens makes to the web goes through ``fetch``: result pages and images.
Redirects are followed by hand so that each hop's scheme is checked (a redirect to ``file:``,
``ftp:`` or ``data:`` is refused, not followed), and bodies are streamed so a 10 GB "image"
costs at most ``max_bytes`` of memory and a drip-feeding server at most ``file_deadline``
seconds.
"""
from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

import requests
import urllib3

from .validate import BAD_URL, CONNECTION, HTTP_ERROR, REDIRECTS, TIMEOUT, TOO_LARGE, Rejected

ALLOWED_SCHEMES = ("http", "https")
_REDIRECT_CODES = (301, 302, 303, 307, 308)
_CHUNK = 64 * 1024


@dataclass(frozen=True)
class FetchLimits:
    connect_timeout: float = 5.0
    read_timeout: float = 10.0
    deadline: float = 30.0  # whole request, redirects included
    max_bytes: int = 20 * 1024 * 1024
    max_redirects: int = 5


@dataclass(frozen=True)
class Fetched:
    url: str  # final URL after redirects
    status: int
    content: bytes
    content_type: str


_local = threading.local()


def thread_session(user_agent: str) -> requests.Session:
    """One requests.Session per thread (a Session is not safe to share across threads) and
    per User-Agent, reused for keep-alive. Redirects are followed by fetch(), not by it."""
    sessions = getattr(_local, "sessions", None)
    if sessions is None:
        sessions = _local.sessions = {}
    session = sessions.get(user_agent)
    if session is None:
        session = sessions[user_agent] = requests.Session()
        session.headers.update({"User-Agent": user_agent, "Accept": "image/*,text/html;q=0.5,*/*;q=0.1"})
    return session


def check_url(url: str) -> str:
    """Return ``url`` if it is an absolute http(s) URL with a host; raise Rejected otherwise."""
    if not isinstance(url, str) or not url.strip():
        raise Rejected(BAD_URL, "empty URL")
    try:
        parts = urlsplit(url.strip())
    except ValueError as exc:
        raise Rejected(BAD_URL, f"unparsable URL ({exc})") from None
    if parts.scheme.lower() not in ALLOWED_SCHEMES:
        raise Rejected(BAD_URL, f"scheme {parts.scheme or 'none'!r} refused: http and https only")
    if not parts.hostname:
        raise Rejected(BAD_URL, "no host in URL")
    return url.strip()


def fetch(url: str, limits: FetchLimits, user_agent: str, *, headers: dict | None = None,
          session: requests.Session | None = None) -> Fetched:
    """GET ``url`` within ``limits``; raise Rejected with a network reason code otherwise.
    Non-200 answers are Rejected(HTTP_ERROR); so are redirects past ``max_redirects``."""
    session = session or thread_session(user_agent)
    started = time.monotonic()
    current = check_url(url)
    for hop in range(limits.max_redirects + 1):
        try:
            response = session.get(current, stream=True, allow_redirects=False, headers=headers,
                                   timeout=(limits.connect_timeout, limits.read_timeout))
        except requests.exceptions.ConnectTimeout:
            raise Rejected(TIMEOUT, f"no connection within {limits.connect_timeout:g}s") from None
        except requests.exceptions.ReadTimeout:
            raise Rejected(TIMEOUT, f"no answer within {limits.read_timeout:g}s") from None
        except requests.exceptions.ConnectionError as exc:
            raise Rejected(CONNECTION, describe_connection_error(exc)) from None
        except requests.exceptions.RequestException as exc:
            raise Rejected(CONNECTION, type(exc).__name__) from None
        with response:
            if response.status_code in _REDIRECT_CODES and response.headers.get("Location"):
                if hop == limits.max_redirects:
                    raise Rejected(REDIRECTS, f"more than {limits.max_redirects} redirects")
                current = check_url(urljoin(current, response.headers["Location"]))
                continue
            if response.status_code != 200:
                raise Rejected(HTTP_ERROR, f"HTTP {response.status_code}")
            content = _read_limited(response, limits, started)
            return Fetched(current, response.status_code, content, response.headers.get("Content-Type", ""))
    raise AssertionError("unreachable")  # the loop returns or raises


def _read_limited(response: requests.Response, limits: FetchLimits, started: float) -> bytes:
    """The body, or Rejected once it passes ``max_bytes`` or the deadline. Reads with
    ``read1`` (whatever has arrived, at most a chunk) so the deadline is checked at least once
    per ``read_timeout`` even when a server drips a byte at a time; ``iter_content`` would
    block until a whole chunk has arrived."""
    declared = response.headers.get("Content-Length")
    if declared and declared.isdigit() and int(declared) > limits.max_bytes:
        raise Rejected(TOO_LARGE, f"{declared} bytes announced > limit {limits.max_bytes}")
    chunks, size = [], 0
    try:
        while True:
            chunk = response.raw.read1(_CHUNK, decode_content=True)  # decoded: the limit applies to real bytes
            if not chunk:
                break
            size += len(chunk)
            if size > limits.max_bytes:
                raise Rejected(TOO_LARGE, f"more than {limits.max_bytes} bytes")
            if time.monotonic() - started > limits.deadline:
                raise Rejected(TIMEOUT, f"download took longer than {limits.deadline:g}s")
            chunks.append(chunk)
    except (urllib3.exceptions.ReadTimeoutError, socket.timeout, TimeoutError):
        raise Rejected(TIMEOUT, f"no data within {limits.read_timeout:g}s") from None
    except (urllib3.exceptions.HTTPError, OSError) as exc:  # ProtocolError, DecodeError, reset
        raise Rejected(CONNECTION, f"connection broken while reading ({type(exc).__name__})") from None
    return b"".join(chunks)


def describe_connection_error(exc: BaseException) -> str:
    """A short human reason for a requests/urllib3 connection failure."""
    text = str(exc)
    chain, seen = [], exc
    while seen is not None and len(chain) < 8:
        chain.append(seen)
        seen = seen.__cause__ or seen.__context__ or (seen.args[0] if seen.args and isinstance(seen.args[0], BaseException) else None)
    if any(isinstance(e, socket.gaierror) for e in chain) or "NameResolution" in text or "Name or service not known" in text \
            or "Temporary failure in name resolution" in text or "nodename nor servname" in text:
        return "the name cannot be resolved (DNS)"
    if any(isinstance(e, ConnectionRefusedError) for e in chain) or "Connection refused" in text:
        return "connection refused"
    if "Network is unreachable" in text or "No route to host" in text:
        return "network is unreachable"
    if "timed out" in text.lower():
        return "connection timed out"
    if "SSL" in text or "certificate" in text.lower():
        return "TLS/certificate error"
    return "connection failed"


# --------------------------------------------------------------------------- reachability
@dataclass(frozen=True)
class Reachability:
    ok: bool
    host: str
    detail: str  # 'HTTP 200 in 0.12s' or why not
    seconds: float


def probe(url: str, *, timeout: float = 5.0, user_agent: str) -> Reachability:
    """Can ``url``'s server be reached at all? One HEAD request, answered with any HTTP
    status, means yes. Runs in a helper thread with a hard deadline because name resolution
    (getaddrinfo) has no timeout of its own and can block for tens of seconds offline."""
    host = urlsplit(url).hostname or url
    result: list[Reachability] = []
    started = time.monotonic()

    def attempt():
        try:
            session = requests.Session()
            session.headers["User-Agent"] = user_agent
            response = session.head(check_url(url), allow_redirects=False, timeout=(timeout, timeout))
            response.close()
            result.append(Reachability(True, host, f"HTTP {response.status_code}", time.monotonic() - started))
        except Rejected as exc:
            result.append(Reachability(False, host, exc.reason, time.monotonic() - started))
        except requests.exceptions.Timeout:
            result.append(Reachability(False, host, f"no answer within {timeout:g}s", time.monotonic() - started))
        except requests.exceptions.RequestException as exc:
            result.append(Reachability(False, host, describe_connection_error(exc), time.monotonic() - started))

    worker = threading.Thread(target=attempt, name="wildlens-probe", daemon=True)
    worker.start()
    worker.join(timeout)
    if result:
        return result[0]
    return Reachability(False, host, f"no answer within {timeout:g}s (name resolution or connection hangs)",
                        time.monotonic() - started)
