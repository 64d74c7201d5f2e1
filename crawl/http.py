"""Fetching with limits: http(s) only, public addresses only, one deadline, bounded size and
redirects, an honest User-Agent.

Every request WildLens makes to the web goes through ``fetch``: result pages and images.

- Redirects are followed by hand so that each hop's scheme is checked (a redirect to ``file:``,
  ``ftp:`` or ``data:`` is refused, not followed).
- Bodies are streamed, so a 10 GB "image" costs at most ``max_bytes`` of memory.
- One deadline (``FetchLimits.deadline``) covers the whole request: name resolution, connect,
  response headers, every redirect and the body. Timeouts per socket operation cannot: a
  server that drips its headers one byte every 3 s never lets a 10 s read timeout expire
  (it held a download for 90 s against a 30 s limit). A timer shuts the request's sockets
  down at the deadline, which ends any read in progress at once.
- Server-side request forgery: a URL listed by a search engine could name a machine inside
  the user's network (a router's admin page, a cloud metadata service at 169.254.169.254).
  Each new connection resolves the name itself, refuses loopback, private, link-local,
  multicast and other non-public addresses (``private-address``) and connects to the address
  it checked, so a name cannot resolve to a public address for the check and a private one
  for the connection; redirects open new connections and are checked the same way. Allowed
  with ``allow_private_hosts``; ``trusted_origins`` (the engine's own address, which the user
  chose) are exempt. Behind an HTTP proxy the proxy resolves names: the check is then made
  on this machine's resolution of the name (best effort).
"""
from __future__ import annotations

import ipaddress
import os
import socket
import threading
import time
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

import requests
import urllib3
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import ConnectTimeoutError, NameResolutionError, NewConnectionError
from urllib3.util.connection import create_connection

from .validate import BAD_URL, CONNECTION, HTTP_ERROR, PRIVATE_ADDRESS, REDIRECTS, TIMEOUT, TOO_LARGE, Rejected

ALLOWED_SCHEMES = ("http", "https")
_REDIRECT_CODES = (301, 302, 303, 307, 308)
_CHUNK = 64 * 1024


@dataclass(frozen=True)
class FetchLimits:
    connect_timeout: float = 5.0
    read_timeout: float = 10.0  # between two bytes
    deadline: float = 30.0  # the whole request: name resolution, connect, headers, redirects, body
    max_bytes: int = 20 * 1024 * 1024
    max_redirects: int = 5
    allow_private_hosts: bool = False  # also fetch from loopback, private, link-local, multicast addresses
    trusted_origins: frozenset = frozenset()  # (host, port) pairs exempt from the address check

    def trusts(self, host: str, port: int | None) -> bool:
        return self.allow_private_hosts or (_host_key(host), port) in self.trusted_origins


def origin(url: str) -> tuple[str, int]:
    """(host, port) of an http(s) URL, the port made explicit: what ``trusted_origins`` holds."""
    parts = urlsplit(url)
    return _host_key(parts.hostname or ""), parts.port or (443 if parts.scheme.lower() == "https" else 80)


def _host_key(host: str) -> str:
    return host.strip("[]").rstrip(".").lower()


@dataclass(frozen=True)
class Fetched:
    url: str  # final URL after redirects
    status: int
    content: bytes
    content_type: str


# --------------------------------------------------------------------------- addresses
def address_problem(address: str) -> str | None:
    """What makes an IP address non-public ('loopback', 'private', 'link-local', 'multicast',
    'unspecified', 'reserved', 'non-public'), or None for a public address. An IPv4 address
    mapped into IPv6 (::ffff:127.0.0.1) is judged as the IPv4 address."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])  # an IPv6 zone ('fe80::1%eth0') is not part of it
    if ip.version == 6 and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    for problem, test in (("loopback", ip.is_loopback), ("link-local", ip.is_link_local), ("multicast", ip.is_multicast),
                          ("unspecified", ip.is_unspecified), ("reserved", ip.is_reserved), ("private", ip.is_private)):
        if test:
            return problem
    return None if ip.is_global else "non-public"


def _literal(host: str) -> str | None:
    try:
        return str(ipaddress.ip_address(_host_key(host).split("%", 1)[0]))
    except ValueError:
        return None


# --------------------------------------------------------------------------- one request
_local = threading.local()


class _Attempt:
    """One ``fetch`` call: its deadline and address policy, which the guarded connections of the
    calling thread read. A timer shuts the sockets it has used down at the deadline."""

    def __init__(self, limits: FetchLimits):
        self.limits = limits
        self.deadline_at = time.monotonic() + limits.deadline
        self.expired = False
        self._sockets: list[socket.socket] = []  # duplicates: they survive TLS wrapping and pool reuse
        self._lock = threading.Lock()
        self._timer = threading.Timer(limits.deadline, self._expire)
        self._timer.daemon = True
        self._timer.start()

    def remaining(self) -> float:
        return self.deadline_at - time.monotonic()

    def over(self) -> bool:
        return self.expired or self.remaining() <= 0

    def late(self) -> Rejected:
        return Rejected(TIMEOUT, f"download took longer than {self.limits.deadline:g}s")

    def watch(self, sock) -> None:
        if sock is None:
            return
        with self._lock:
            if any(s.fileno() >= 0 and _same_socket(s, sock) for s in self._sockets):
                return
            try:  # a plain socket on a duplicate descriptor: SSLSocket.dup() is not implemented
                copy = socket.socket(sock.family, sock.type, sock.proto, fileno=os.dup(sock.fileno()))
            except (OSError, ValueError):
                return
            self._sockets.append(copy)
            if self.expired:
                _shut(copy)

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            for sock in self._sockets:
                _shut(sock)

    def close(self) -> None:
        self._timer.cancel()
        with self._lock:
            for sock in self._sockets:
                sock.close()
            self._sockets.clear()

    def resolve(self, host: str, port: int) -> list[tuple]:
        """getaddrinfo within the deadline (it has no timeout of its own; it can block for tens
        of seconds offline), in a helper thread that is left behind if it hangs."""
        literal = _literal(host)
        if literal is not None:
            family = socket.AF_INET6 if ":" in literal else socket.AF_INET
            return [(family, socket.SOCK_STREAM, 0, "", (literal, port))]
        answer: list = []

        def lookup():
            try:
                answer.append(socket.getaddrinfo(host, port, type=socket.SOCK_STREAM))
            except Exception as exc:  # noqa: BLE001 - handed to the caller's thread
                answer.append(exc)

        worker = threading.Thread(target=lookup, name="wildlens-dns", daemon=True)
        worker.start()
        worker.join(max(0.0, self.remaining()))
        if not answer:
            raise self.late()
        if isinstance(answer[0], BaseException):
            raise answer[0]
        return answer[0]

    def check(self, host: str, port: int, infos: list[tuple]) -> None:
        """Rejected(private-address) unless every address ``host`` resolved to is public (or the
        host is trusted): one private address among public ones is enough to be refused."""
        if self.limits.trusts(host, port):
            return
        for info in infos:
            address = info[4][0]
            problem = address_problem(address)
            if problem:
                said = f"{address} is a" if _literal(host) else f"{_host_key(host)} resolves to {address}, a"
                raise Rejected(PRIVATE_ADDRESS, f"{said} {problem} address (--allow-private-hosts fetches it)")


def _same_socket(a: socket.socket, b) -> bool:
    try:
        return a.getsockname() == b.getsockname() and a.getpeername() == b.getpeername()
    except OSError:
        return False


def _shut(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass  # already closed or never connected


class _GuardedConnection:
    """Mixin for urllib3's connections: resolve, check and connect to the checked address, and
    let the current ``fetch`` watch the socket for its deadline."""

    def _new_conn(self):
        attempt: _Attempt | None = getattr(_local, "attempt", None)
        if attempt is None or self.proxy is not None:  # not inside fetch(), or a connection to a proxy
            sock = super()._new_conn()
            if attempt is not None:
                attempt.watch(sock)
            return sock
        try:
            infos = attempt.resolve(self._dns_host, self.port)
        except socket.gaierror as exc:
            raise NameResolutionError(self.host, self, exc) from exc
        attempt.check(self._dns_host, self.port, infos)
        error: Exception | None = None
        for info in infos:  # connect to what was checked, never to a second resolution of the name
            timeout = min(self.timeout, attempt.remaining()) if isinstance(self.timeout, (int, float)) else attempt.remaining()
            if timeout <= 0:
                raise attempt.late()
            try:
                sock = create_connection(info[4][:2], timeout, source_address=self.source_address,
                                         socket_options=self.socket_options)
            except socket.timeout as exc:
                error = ConnectTimeoutError(self, f"Connection to {self.host} timed out. (connect timeout={self.timeout})")
                error.__cause__ = exc
                continue
            except OSError as exc:
                error = NewConnectionError(self, f"Failed to establish a new connection: {exc}")
                error.__cause__ = exc
                continue
            attempt.watch(sock)
            return sock
        raise error or NewConnectionError(self, "no address to connect to")

    def request(self, *args, **kwargs):
        attempt: _Attempt | None = getattr(_local, "attempt", None)
        if attempt is not None and self.sock is not None and self.proxy is None:
            # A kept-alive connection, opened by an earlier fetch that may have allowed more:
            # judge the address it is connected to, and watch it for this fetch's deadline.
            try:
                peer = self.sock.getpeername()
            except OSError:
                peer = None
            if peer is not None:
                attempt.check(self._dns_host, self.port, [(None, None, None, "", peer)])
            attempt.watch(self.sock)
        elif attempt is not None and self.sock is not None:
            attempt.watch(self.sock)
        return super().request(*args, **kwargs)


class _GuardedHTTPConnection(_GuardedConnection, HTTPConnection):
    pass


class _GuardedHTTPSConnection(_GuardedConnection, HTTPSConnection):
    pass


class _GuardedHTTPPool(HTTPConnectionPool):
    ConnectionCls = _GuardedHTTPConnection


class _GuardedHTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _GuardedHTTPSConnection


_GUARDED_POOLS = {"http": _GuardedHTTPPool, "https": _GuardedHTTPSPool}


class GuardedAdapter(HTTPAdapter):
    """requests' adapter whose connections are guarded (see the module docstring)."""

    def init_poolmanager(self, *args, **kwargs):
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = dict(_GUARDED_POOLS)

    def proxy_manager_for(self, proxy, **proxy_kwargs):
        manager = super().proxy_manager_for(proxy, **proxy_kwargs)
        manager.pool_classes_by_scheme = dict(_GUARDED_POOLS)
        return manager


def _guarded(session: requests.Session) -> requests.Session:
    if not isinstance(session.get_adapter("http://x/"), GuardedAdapter):
        session.mount("http://", GuardedAdapter())
        session.mount("https://", GuardedAdapter())
    return session


def thread_session(user_agent: str) -> requests.Session:
    """One requests.Session per thread (a Session is not safe to share across threads) and
    per User-Agent, reused for keep-alive, with guarded connections. Redirects are followed by
    fetch(), not by it."""
    sessions = getattr(_local, "sessions", None)
    if sessions is None:
        sessions = _local.sessions = {}
    session = sessions.get(user_agent)
    if session is None:
        session = sessions[user_agent] = _guarded(requests.Session())
        session.headers.update({"User-Agent": user_agent, "Accept": "image/*,text/html;q=0.5,*/*;q=0.1"})
    return session


def check_url(url: str) -> str:
    """Return ``url`` if it is an absolute http(s) URL with a host; raise Rejected otherwise."""
    if not isinstance(url, str) or not url.strip():
        raise Rejected(BAD_URL, "empty URL")
    try:
        parts = urlsplit(url.strip())
        parts.port  # noqa: B018 - raises ValueError for a port out of range
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
    session = _guarded(session or thread_session(user_agent))
    attempt = _Attempt(limits)
    outer, _local.attempt = getattr(_local, "attempt", None), attempt
    try:
        return _fetch(url, limits, headers, session, attempt)
    finally:
        _local.attempt = outer
        attempt.close()


def _fetch(url: str, limits: FetchLimits, headers: dict | None, session: requests.Session, attempt: _Attempt) -> Fetched:
    current = check_url(url)
    for hop in range(limits.max_redirects + 1):
        if attempt.over():
            raise attempt.late()
        if _proxied(session, current):  # the proxy connects: judge the name as this machine resolves it
            host, port = origin(current)
            try:
                attempt.check(host, port, attempt.resolve(host, port))
            except socket.gaierror:
                pass  # the proxy may know names this machine does not
        try:
            response = session.get(current, stream=True, allow_redirects=False, headers=headers,
                                   timeout=(limits.connect_timeout, limits.read_timeout))
        except requests.exceptions.RequestException as exc:
            raise _failure(exc, limits, attempt) from None
        with response:
            if response.status_code in _REDIRECT_CODES and response.headers.get("Location"):
                if hop == limits.max_redirects:
                    raise Rejected(REDIRECTS, f"more than {limits.max_redirects} redirects")
                current = check_url(urljoin(current, response.headers["Location"]))
                continue
            if response.status_code != 200:
                raise Rejected(HTTP_ERROR, f"HTTP {response.status_code}")
            content = _read_limited(response, limits, attempt)
            return Fetched(current, response.status_code, content, response.headers.get("Content-Type", ""))
    raise AssertionError("unreachable")  # the loop returns or raises


def _proxied(session: requests.Session, url: str) -> bool:
    if not session.trust_env and not session.proxies:
        return False
    proxies = session.merge_environment_settings(url, {}, False, None, None).get("proxies") or {}
    return bool(requests.utils.select_proxy(url, proxies))


def _failure(exc: requests.exceptions.RequestException, limits: FetchLimits, attempt: _Attempt) -> Rejected:
    """The Rejected for a failed request; past the deadline, whatever broke is the deadline's doing."""
    if attempt.over():
        return attempt.late()
    if isinstance(exc, requests.exceptions.ConnectTimeout):
        return Rejected(TIMEOUT, f"no connection within {limits.connect_timeout:g}s")
    if isinstance(exc, requests.exceptions.ReadTimeout):
        return Rejected(TIMEOUT, f"no answer within {limits.read_timeout:g}s")
    if isinstance(exc, requests.exceptions.ConnectionError):
        return Rejected(CONNECTION, describe_connection_error(exc))
    return Rejected(CONNECTION, type(exc).__name__)


def _read_limited(response: requests.Response, limits: FetchLimits, attempt: _Attempt) -> bytes:
    """The body, or Rejected once it passes ``max_bytes`` or the deadline. Reads with
    ``read1`` (whatever has arrived, at most a chunk), so the size and the deadline are checked
    as bytes come; ``iter_content`` would block until a whole chunk has arrived. A read that
    blocks past the deadline ends when the deadline's timer shuts the socket down: the body
    then looks finished (or broken), so the deadline is checked before the body is believed."""
    declared = response.headers.get("Content-Length")
    if declared and declared.isdigit() and int(declared) > limits.max_bytes:
        raise Rejected(TOO_LARGE, f"{declared} bytes announced > limit {limits.max_bytes}")
    chunks, size = [], 0
    try:
        while True:
            chunk = response.raw.read1(_CHUNK, decode_content=True)  # decoded: the limit applies to real bytes
            if attempt.over():
                raise attempt.late()
            if not chunk:
                break
            size += len(chunk)
            if size > limits.max_bytes:
                raise Rejected(TOO_LARGE, f"more than {limits.max_bytes} bytes")
            chunks.append(chunk)
    except (urllib3.exceptions.ReadTimeoutError, socket.timeout, TimeoutError):
        raise (attempt.late() if attempt.over() else Rejected(TIMEOUT, f"no data within {limits.read_timeout:g}s")) from None
    except (urllib3.exceptions.HTTPError, OSError) as exc:  # ProtocolError, DecodeError, reset
        if attempt.over():
            raise attempt.late() from None
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
