"""A loopback imitation of a search engine and test images, for tests and benchmarks.

``FakeEngine`` is an ``http.server`` on 127.0.0.1 (port chosen by the OS) that answers like
Bing's async result endpoint (``/images/async?q=...&first=N&count=M`` -> ``<a class="iusc"
m='{"murl": ...}'>`` elements, the shape icrawler's Bing parser reads) and serves whatever
files, errors, redirects and slow answers a test registers. It never contacts anything.

``loopback_only`` makes any attempt to connect elsewhere fail loudly, so a test cannot touch
the internet by accident.
"""
from __future__ import annotations

import html
import io
import json
import socket
import ssl
import struct
import threading
import time
import zlib
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote_plus, urlsplit

import numpy as np
from PIL import Image


# --------------------------------------------------------------------------- server
@dataclass
class Route:
    body: bytes = b""
    status: int = 200
    headers: dict = field(default_factory=dict)
    delay: float = 0.0  # seconds before the status line (a slow server)
    drip: float = 0.0  # seconds between 1 KiB pieces of the body (a drip-feeding server)
    content_length: bool = True  # False: no Content-Length, the body ends when the connection closes
    header_drip: float = 0.0  # seconds between single bytes of the status line and headers


class FakeEngine:
    """Loopback engine + file server. ``results[query]`` lists result URLs (absolute, or paths
    on this server); ``routes[path]`` says how each path answers; ``hits`` counts requests."""

    def __init__(self, latency: float = 0.0, tls: "Certificate | None" = None):
        self.results: dict[str, list[str]] = {}
        self.routes: dict[str, Route] = {}
        self.hits: Counter = Counter()
        self.latency = latency  # added to every file answer (not result pages), to make threads matter
        self.page_status = 200  # e.g. 429 to imitate a rate-limited engine
        self.page_delay = 0.0  # seconds before a result page is answered
        self.probe_answers: int | None = None  # HEAD requests answered before the engine "goes offline"
        self.in_flight = 0  # GET requests being answered now
        self.most_in_flight = 0  # the most at once (a per-host limit holds when this stays within it)
        self._lock = threading.Lock()
        engine = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Headers and body go out in separate writes; with Nagle's algorithm the body waits
            # for the client's delayed ACK (~40 ms on Linux) on every keep-alive request.
            disable_nagle_algorithm = True

            def log_message(self, *args):  # quiet
                pass

            def handle(self):
                try:
                    super().handle()
                except (ConnectionResetError, BrokenPipeError):
                    pass  # a client that gave up (timeout, size limit): expected

            def do_HEAD(self):
                with engine._lock:
                    engine.hits["HEAD"] += 1
                    refuse = engine.probe_answers is not None and engine.hits["HEAD"] > engine.probe_answers
                if refuse:  # hang up without an answer, as a vanished network would
                    self.close_connection = True
                    return
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_GET(self):
                path = urlsplit(self.path).path
                with engine._lock:
                    engine.hits[path] += 1
                    engine.user_agents.add(self.headers.get("User-Agent", ""))
                    engine.in_flight += 1
                    engine.most_in_flight = max(engine.most_in_flight, engine.in_flight)
                try:
                    if path == "/images/async":
                        return self._results()
                    route = engine.routes.get(path)
                    if route is None:
                        return self._send(Route(b"not found", 404, {"Content-Type": "text/plain"}))
                    if engine.latency:
                        time.sleep(engine.latency)
                    return self._send(route)
                finally:
                    with engine._lock:
                        engine.in_flight -= 1

            def _results(self):
                query = parse_qs(urlsplit(self.path).query)
                q = unquote_plus(query.get("q", [""])[0])
                first = int(query.get("first", ["0"])[0])
                count = int(query.get("count", ["20"])[0])
                if engine.page_status != 200 or engine.page_delay:
                    return self._send(Route(b"<html>blocked</html>", engine.page_status, delay=engine.page_delay))
                items = engine.results.get(q, [])[first:first + count]
                body = "<html><body>" + "".join(
                    f'<div class="imgpt"><a class="iusc" m="{html.escape(json.dumps({"murl": engine.absolute(u), "turl": "x"}), quote=True)}"'
                    f' href="/images/search?view=detail"><img src="t.jpg"></a></div>' for u in items) + "</body></html>"
                self._send(Route(body.encode(), 200, {"Content-Type": "text/html; charset=utf-8"}))

            def _send(self, route: Route):
                try:
                    if route.delay:
                        time.sleep(route.delay)
                    if route.header_drip:
                        return self._drip_headers(route)
                    self.send_response(route.status)
                    for key, value in route.headers.items():
                        self.send_header(key, value)
                    if route.content_length:
                        self.send_header("Content-Length", str(len(route.body)))
                    else:
                        self.send_header("Connection", "close")
                        self.close_connection = True
                    self.end_headers()
                    if route.drip:
                        for start in range(0, len(route.body), 1024):
                            self.wfile.write(route.body[start:start + 1024])
                            self.wfile.flush()
                            time.sleep(route.drip)
                    else:
                        self.wfile.write(route.body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout or a size limit): expected

            def _drip_headers(self, route: Route):
                """Status line and headers one byte at a time, each within any read timeout."""
                self.close_connection = True
                head = [f"HTTP/1.1 {route.status} OK", *(f"{k}: {v}" for k, v in route.headers.items()),
                        f"Content-Length: {len(route.body)}", "Connection: close", "", ""]
                for byte in "\r\n".join(head).encode():
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
                    time.sleep(route.header_drip)
                self.wfile.write(route.body)

        self.user_agents: set[str] = set()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        scheme = "http"
        if tls is not None:  # HTTPS with a self-signed certificate for 127.0.0.1
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(tls.cert, tls.key)
            self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
            scheme = "https"
        self.base_url = f"{scheme}://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def absolute(self, url: str) -> str:
        return url if "://" in url or ":" in url.split("/", 1)[0] else f"{self.base_url}{url}"

    def add(self, path: str, body: bytes = b"", **route) -> str:
        """Serve ``body`` at ``path``; returns the absolute URL."""
        self.routes[path] = Route(body, **route)
        return self.absolute(path)

    def __enter__(self) -> "FakeEngine":
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


@dataclass(frozen=True)
class Certificate:
    cert: str  # PEM; also the CA bundle a client must trust (REQUESTS_CA_BUNDLE)
    key: str


def self_signed_certificate(folder) -> Certificate | None:
    """A certificate for 127.0.0.1 made with the openssl command, or None without one."""
    import shutil
    import subprocess

    if not shutil.which("openssl"):
        return None
    cert, key = f"{folder}/cert.pem", f"{folder}/key.pem"
    done = subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                           "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", key, "-out", cert],
                          capture_output=True, timeout=60)
    return Certificate(cert, key) if done.returncode == 0 else None


def closed_port_url() -> str:
    """An http URL on loopback where nothing listens: connections are refused at once."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def resolve_names(monkeypatch, names: dict[str, str], delay: float = 0.0) -> None:
    """Make ``socket.getaddrinfo`` answer ``names`` (host -> IP address literal) after ``delay``
    seconds, as a DNS server would; other hosts go to the resolver in place (the loopback guard)."""
    real_getaddrinfo = socket.getaddrinfo

    def getaddrinfo(host, port, *args, **kwargs):
        if host in names:
            time.sleep(delay)
            return real_getaddrinfo(names[host], port, *args, **kwargs)
        return real_getaddrinfo(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


def disk_full_after(monkeypatch, files: int):
    """crawl.store's file writes succeed ``files`` times, then fail as a full disk does (ENOSPC);
    returns the real writer, to put back for the resume."""
    import errno

    import crawl.store

    real, calls = crawl.store.write_bytes_atomic, []

    def full_disk(path, data):
        calls.append(path)
        if len(calls) > files:
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        real(path, data)

    monkeypatch.setattr(crawl.store, "write_bytes_atomic", full_disk)
    return real


def loopback_only(monkeypatch) -> None:
    """Refuse every connection and name lookup that is not loopback (a pytest guard)."""
    real_connect = socket.socket.connect
    real_getaddrinfo = socket.getaddrinfo

    def connect(self, address):
        host = address[0] if isinstance(address, tuple) else address
        if isinstance(host, str) and host not in ("127.0.0.1", "::1", "localhost") and self.family in (socket.AF_INET, socket.AF_INET6):
            raise AssertionError(f"test tried to connect to {address}: tests must stay on loopback")
        return real_connect(self, address)

    def getaddrinfo(host, *args, **kwargs):
        if host not in (None, "127.0.0.1", "::1", "localhost"):
            raise socket.gaierror(socket.EAI_NONAME, f"test guard: no name resolution for {host!r}")
        return real_getaddrinfo(host, *args, **kwargs)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


# --------------------------------------------------------------------------- images
def pattern(seed: int, size=(160, 120)) -> Image.Image:
    """A distinct, smooth RGB picture: random 6x6 colours, upsampled. Smooth so that its
    perceptual hash survives resizing and re-encoding, random so that two seeds differ."""
    rng = np.random.default_rng(seed)
    small = Image.fromarray(rng.integers(0, 256, (6, 6, 3), dtype=np.uint8), "RGB")
    return small.resize(size, Image.BICUBIC)


def encode(img: Image.Image, fmt: str = "JPEG", **params) -> bytes:
    buffer = io.BytesIO()
    img.save(buffer, fmt, **params)
    return buffer.getvalue()


def jpeg(seed: int, size=(160, 120), quality: int = 90) -> bytes:
    return encode(pattern(seed, size), "JPEG", quality=quality)


def png(seed: int, size=(160, 120)) -> bytes:
    return encode(pattern(seed, size), "PNG")


def near_copy(data: bytes, scale: float = 0.75, quality: int = 70) -> bytes:
    """The same picture resized and re-encoded: different bytes, a near duplicate."""
    img = Image.open(io.BytesIO(data)).convert("RGB")
    return encode(img.resize((int(img.width * scale), int(img.height * scale)), Image.BICUBIC), "JPEG", quality=quality)


def cmyk_jpeg(seed: int) -> bytes:
    return encode(pattern(seed).convert("CMYK"), "JPEG", quality=90)


def palette_png_with_transparency(seed: int) -> bytes:
    img = pattern(seed).convert("P", palette=Image.ADAPTIVE, colors=64)
    img.info["transparency"] = 0
    return encode(img, "PNG", transparency=0)


def png_16bit(seed: int) -> bytes:
    grey = np.asarray(pattern(seed).convert("L"), dtype=np.uint16) * 257
    return encode(Image.fromarray(grey.astype(np.uint16)), "PNG")


def animated_gif(seed: int, frames: int = 3) -> bytes:
    images = [pattern(seed + i) for i in range(frames)]
    return encode(images[0], "GIF", save_all=True, append_images=images[1:], duration=100, loop=0)


def exif_rotated_jpeg(seed: int, orientation: int = 6) -> bytes:
    """A JPEG stored sideways whose EXIF says 'rotate 90 degrees when showing'."""
    exif = Image.Exif()
    exif[0x0112] = orientation
    return encode(pattern(seed, (160, 100)), "JPEG", quality=90, exif=exif.tobytes())


def truncated(data: bytes, keep: float = 0.5) -> bytes:
    return data[: int(len(data) * keep)]


def gif_with_cut_second_frame(seed: int) -> bytes:
    """An animated GIF cut short inside its second frame, where Pillow's ``is_animated`` raises
    IndexError (not OSError): what made ``crawl import`` and ``classify --images`` crash (issue 22
    item 7). The cut is found, not guessed, and checked."""
    data = animated_gif(seed, frames=3)
    for cut in range(len(data) // 4, len(data)):
        try:
            with Image.open(io.BytesIO(data[:cut])) as img:
                img.is_animated
        except IndexError:
            return data[:cut]
        except Exception:  # noqa: BLE001 - other cuts fail otherwise: look further
            continue
    raise AssertionError("no cut of the GIF makes Pillow raise IndexError any more")


def jpeg_with_corrupt_exif(seed: int) -> bytes:
    """A JPEG whose EXIF block says 'rotate' and stores ResolutionUnit as a BYTE where a SHORT is
    due: ``ImageOps.exif_transpose`` raises ``struct.error`` re-encoding it."""
    exif = Image.Exif()
    exif[0x0112] = 6  # orientation: rotate, so exif_transpose rewrites the block
    exif[0x0128] = 2  # ResolutionUnit, a SHORT
    raw = bytearray(exif.tobytes())
    at = raw.find(bytes.fromhex("01280003"))  # big-endian entry: tag 0x0128, type 3 (SHORT)
    assert at > 0, raw.hex()
    raw[at + 2:at + 4] = (1).to_bytes(2, "big")  # type 1 (BYTE)
    return encode(pattern(seed, (160, 100)), "JPEG", quality=90, exif=bytes(raw))


def html_page() -> bytes:
    return b"<!DOCTYPE html>\n<html><head><title>Access denied</title></head><body>Please log in</body></html>"


def bomb_png(width: int = 20000, height: int = 20000) -> bytes:
    """A tiny PNG file whose header claims width x height pixels (a decompression bomb)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)  # 8-bit greyscale
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\x00" * 64)) + chunk(b"IEND", b"")
