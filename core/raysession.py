"""Ray for every stage that runs on it (classify's engine, probe sweeps): installed or not, one session per
process, joined or started safely.

:func:`ray_session` gives a stage Ray ready for work: ``address`` (``--ray-address``), else
``RAY_ADDRESS``, joins a cluster, checked for a connection and Ray's greeting first (``ray.init``
retries a wrong address for minutes); else a local instance is started for this process
(``address='local'``, no dashboard) and kept for its later runs; a Ray initialised by whoever embeds
WildLens (a notebook, a test) is used as it is. Off the main thread Ray is started in a thread of its
own that lives as long as the process (:func:`_init_lasting`). Every failure is one
:class:`RayEngineError` line that says the fix.
"""
from __future__ import annotations

import importlib.util
import math
import os
import queue
import re
import threading
import time
from concurrent.futures import Future
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from core.errors import OptionError, WildLensError
from core.runstore import HOME_ENV, default_root

RAY_REQUIREMENT = "ray[data]==2.60.0"
INSTALL_HINT = f"pip install '{RAY_REQUIREMENT}' (or pip install -e '.[ray]')"
# Joining a cluster (--ray-address, RAY_ADDRESS): connection, protocol check and ray.init together.
# A server that accepted TCP but was not Ray kept ray.init retrying past 300 s.
JOIN_SECONDS = 30.0
RAY_CLIENT_HINT = f"pip install 'ray[client]=={RAY_REQUIREMENT.split('==')[1]}'"
# What a gRPC server (Ray's GCS, the Ray Client server) sends first: its HTTP/2 SETTINGS frame.
_HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"


# A path as a Ray task or actor receives it when it lies in the driver's run store: relative to the
# store (portable_path), so a node that mounts the shared store at another path (its own WILDLENS_HOME)
# reads it (node_path). The classify engine sends images so, explain.ray_metrics prediction parts.
HOME_PREFIX = "wildlens-home:"
# This worker process's own WILDLENS_HOME as it started (its node's, or a job's runtime_env): read
# before node_home sets the driver's in a process whose node has none.
_NODE_HOME = os.environ.get(HOME_ENV) or None
# Set in the workers of a local instance this module started: they run on the driver's machine, so the
# store each run names is the one to read, whatever WILDLENS_HOME the instance started with.
LOCAL_ENV = "WILDLENS_RAY_LOCAL"


class RayEngineError(WildLensError, RuntimeError):
    """Ray cannot run the work here (Ray missing, a cluster that cannot be joined, a node that
    cannot read the images or lacks the weights); the message says what to do."""



# --------------------------------------------------------------------------- Ray itself
def ray_available() -> bool:
    """Whether ``import ray.data`` can work here (the Models page offers the engine then)."""
    return importlib.util.find_spec("ray") is not None


def ray_version() -> str | None:
    if not ray_available():
        return None
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("ray")
    except PackageNotFoundError:
        return None


def _import_ray():
    try:
        import ray
        import ray.data  # noqa: F401  (the engine is Ray Data's map_batches)
    except ImportError:
        raise RayEngineError(f"--engine ray needs Ray Data, which is not installed: {INSTALL_HINT}; or use "
                             "--engine local.") from None
    return ray


def _project_root() -> str:
    return str(Path(__file__).resolve().parent.parent)


_STARTED = {"where": None, "address": None}  # the Ray this module initialised in this process, if any
_SESSION_LOCK = threading.Lock()  # one thread at a time starts, joins or replaces it


@contextmanager
def ray_session(address: str | None = None, join_timeout: float | None = None) -> Iterator[str]:
    """Ray ready for a run; yields where it runs ('local instance' or the address). ``address``
    (else ``RAY_ADDRESS``) joins a cluster, checked for a connection first; else a local instance
    starts, kept for this process's later runs (starting one costs ~4 s here) and stopped with it.
    A Ray initialised by whoever embeds WildLens (a notebook, a test) is used as it is; one this
    module started is replaced when another address is asked for (the dashboard's address box).
    Started off the main thread, Ray is started in a thread that lives on (:func:`_init_lasting`).
    Ray's own progress bars are off (the engine reports through ``core.progress``). Joining a
    cluster has one deadline, ``join_timeout`` seconds (:data:`JOIN_SECONDS` by default;
    ``--ray-join-timeout``) for the connection, the protocol check (:func:`_check_reachable`) and
    ``ray.init`` together, then a one-line :class:`RayEngineError`."""
    ray = _import_ray()
    import logging

    import ray.data

    context = ray.data.DataContext.get_current()
    context.enable_progress_bars = False
    context.print_on_execution_start = False
    # Its per-dataset INFO lines, the bar notice, and its ERROR report of a worker's exception, which
    # the engine turns into the one line of the WildLensError inside (_user_error) or raises whole.
    logging.getLogger("ray.data").setLevel(logging.CRITICAL)
    # Offline by default: Ray uploads usage statistics unless told not to (its processes started here
    # read this); RAY_USAGE_STATS_ENABLED=1 set by the user wins.
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    if join_timeout is not None and not (float(join_timeout) > 0 and math.isfinite(float(join_timeout))):
        raise OptionError(f"--ray-join-timeout {join_timeout:g}: give a number of seconds above 0 (default {JOIN_SECONDS:g}).")
    asked = address or os.environ.get("RAY_ADDRESS") or None
    deadline = time.monotonic() + (JOIN_SECONDS if join_timeout is None else float(join_timeout))
    if asked:
        _check_reachable(asked, deadline,  # before anything else: ray.init would retry for minutes
                         JOIN_SECONDS if join_timeout is None else float(join_timeout))
    with _SESSION_LOCK:
        where = _ready(ray, asked, deadline)
    yield where


def _ready(ray, asked: str | None, deadline: float | None = None) -> str:
    """Under the session lock: Ray initialised for ``asked`` (see :func:`ray_session`); joining a
    cluster ends by ``deadline`` (time.monotonic()), else one line."""
    if ray.is_initialized():
        if _STARTED["where"] is None or asked == _STARTED["address"]:
            # Initialised by whoever embeds us (a test, a notebook), or by us for the same address.
            return _STARTED["where"] or "the Ray instance of this process"
        ray.shutdown()  # ours, for another address: the analyst picked another cluster
        _STARTED.update(where=None, address=None)
    # The workers import WildLens from this checkout's path (a local instance; on a cluster, where each
    # node has the checkout at the same path, or WildLens installed) and keep their caches in this
    # WILDLENS_HOME (on a cluster, a shared folder).
    env = {"PYTHONPATH": os.pathsep.join(p for p in (_project_root(), os.environ.get("PYTHONPATH", "")) if p)}
    # A local instance's workers keep this process's WILDLENS_HOME. A cluster's nodes keep their own
    # where their Ray was started with one (the shared store mounted at another path); the others
    # take the driver's, sent with each run (_node_home).
    if os.environ.get(HOME_ENV) and not asked:
        env[HOME_ENV] = os.environ[HOME_ENV]
    if not asked:  # this machine's workers: each run's driver store wins over the one they started with (node_home)
        env[LOCAL_ENV] = "1"
    try:
        if asked:
            _join_lasting(ray, asked, deadline, log_to_driver=False, logging_level="WARNING",
                          runtime_env={"env_vars": env})
            where = f"the Ray cluster at {asked}"
        else:
            # 'local': a new instance, even where 'ray start' left a cluster on this machine for 'auto' to find
            _init_lasting(ray, address="local", include_dashboard=False, log_to_driver=False, logging_level="WARNING",
                          runtime_env={"env_vars": env})
            where = "a local Ray instance"
    except ConnectionError as exc:
        raise RayEngineError(f"Cannot join the Ray cluster at {asked} ({exc}); check --ray-address / RAY_ADDRESS "
                             "('ray status' on the head node prints it)" + _auth_hint() + ", or drop it for a local "
                             "instance.") from None
    _STARTED.update(where=where, address=asked)
    return where


class _LastingThread:
    """One daemon thread that runs the calls given to it, for the life of the process. Not a
    ThreadPoolExecutor worker: those are joined when the interpreter exits, before the atexit
    handlers, so Ray's GCS and raylet died with it before Ray's own exit handler could stop them,
    and its dashboard and runtime-env agents (which ignore SIGTERM) stayed behind after every
    stop of the dashboard (tests/classify/engine/test_ray_engine.py: a server stopped with SIGTERM)."""

    def __init__(self):
        self.calls: queue.SimpleQueue = queue.SimpleQueue()
        threading.Thread(target=self._serve, name="wildlens-ray", daemon=True).start()

    def _serve(self) -> None:
        while True:
            fn, done = self.calls.get()
            try:
                done.set_result(fn())
            except BaseException as exc:  # noqa: BLE001  (handed to the caller)
                done.set_exception(exc)

    def call(self, fn, timeout: float | None = None):
        done: Future = Future()
        self.calls.put((fn, done))
        return done.result(timeout=timeout)


_RAY_THREAD: _LastingThread | None = None  # ray.init off the main thread runs here (see _init_lasting)


def _init_lasting(ray, **kwargs) -> None:
    """``ray.init(**kwargs)``, from the main thread as it is, else from one thread that lives as
    long as the process. Ray starts a local instance's GCS and raylet with PR_SET_PDEATHSIG, which
    Linux sends when the *thread* that started them ends: a server that runs each request in a
    new thread (Streamlit's reruns) lost its instance when that request ended, and Ray's core
    worker ended the whole process 60 s later ("Failed to connect to GCS within 60 seconds"; seen
    with the dashboard, found by its browser check)."""
    global _RAY_THREAD
    if threading.current_thread() is threading.main_thread():
        ray.init(**kwargs)
        return
    if _RAY_THREAD is None:
        _RAY_THREAD = _LastingThread()
    _RAY_THREAD.call(lambda: ray.init(**kwargs))


def ray_client_available() -> bool:
    """Whether ray:// (Ray Client) can work here: it needs the ray[client] extra (grpcio)."""
    return importlib.util.find_spec("grpc") is not None


def _check_reachable(address: str, deadline: float | None = None, given: float | None = None) -> None:
    """A cluster address ('HOST:PORT' or 'ray://HOST:PORT') that takes no connection, or takes
    one but does not answer as Ray does, is one line by ``deadline`` (time.monotonic(); default
    :data:`JOIN_SECONDS` from now): ``ray.init`` would retry it for minutes. Ray's GCS and its
    Ray Client server are gRPC servers, which greet a connection with an HTTP/2 SETTINGS frame;
    a silent server or one that answers anything else is refused (with ``RAY_USE_TLS`` set the
    greeting is TLS's, so only the connection is checked). 'auto' and 'local' are Ray's to resolve.
    ``given``: the join timeout the user gave, which the message names (the time left is a little less)."""
    import socket

    if address in ("auto", "local"):
        return
    deadline = time.monotonic() + JOIN_SECONDS if deadline is None else deadline
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        raise RayEngineError(f"--ray-address {address}: write HOST:PORT (the head node's GCS port, 6379 by default), "
                             "ray://HOST:10001 for a Ray client, or auto.")
    seconds = max(0.0, deadline - time.monotonic())
    try:
        sock = socket.create_connection((host.strip("[]"), int(port)), timeout=max(0.1, min(5.0, seconds)))
    except OSError as exc:
        raise RayEngineError(f"Cannot reach the Ray cluster at {address} ({exc.strerror or exc}); start it with 'ray start "
                             "--head' on the head node, check --ray-address / RAY_ADDRESS, or drop it for a local "
                             "instance.") from None
    if address.startswith("ray://") and not ray_client_available():
        sock.close()
        raise RayEngineError(f"--ray-address {address}: a ray:// address joins through Ray Client, which needs the "
                             f"ray[client] extra (grpcio), not installed here: {RAY_CLIENT_HINT}; or run on a node of "
                             "the cluster with --ray-address auto (or the head node's HOST:6379).")
    if os.environ.get("RAY_USE_TLS", "").strip().lower() in ("1", "true", "yes", "on"):
        sock.close()
        return
    fix = ("check --ray-address / RAY_ADDRESS (the head node's GCS port, 6379 by default, or ray://HOST:10001 for Ray "
           "Client; 'ray status' on the head node prints it), raise --ray-join-timeout, or drop it for a local instance.")
    with sock:
        head = b""
        try:
            sock.settimeout(max(0.1, deadline - time.monotonic()))
            sock.sendall(_HTTP2_PREFACE)
            while len(head) < 9:
                sock.settimeout(max(0.1, deadline - time.monotonic()))
                chunk = sock.recv(9 - len(head))
                if not chunk:
                    break
                head += chunk
        except socket.timeout:
            raise RayEngineError(f"--ray-address {address} accepts connections but did not answer as a Ray cluster "
                                 f"within {round(seconds if given is None else given, 1):g} s; {fix}") from None
        except OSError as exc:
            if not head:
                raise RayEngineError(f"--ray-address {address} accepts connections but closed them without answering "
                                     f"as a Ray cluster ({exc.strerror or exc}); {fix}") from None
    if len(head) < 9:
        raise RayEngineError(f"--ray-address {address} accepts connections but closed them without answering as a Ray "
                             f"cluster; {fix}")
    length, kind, stream = int.from_bytes(head[:3], "big"), head[3], int.from_bytes(head[5:9], "big") & 0x7FFFFFFF
    if kind != 0x04 or stream != 0 or length % 6:
        raise RayEngineError(f"--ray-address {address} answers, but not as a Ray cluster (it began {head[:9]!r}, not "
                             f"gRPC's HTTP/2 greeting); {fix}")


def _auth_hint() -> str:
    """Ray 2.60 turns token authentication on for clusters started where ~/.ray/auth_token exists; a
    driver without RAY_AUTH_MODE=token is then refused with only log lines ('InvalidAuthToken', found by
    the hostile-input campaign): said in the join's one line when that file is here and the mode unset."""
    if os.environ.get("RAY_AUTH_MODE") or not (Path.home() / ".ray" / "auth_token").exists():
        return ""
    return "; if the cluster uses Ray's token authentication (~/.ray/auth_token is here), set RAY_AUTH_MODE=token"


def _join_lasting(ray, address: str, deadline: float | None, **kwargs) -> None:
    """``ray.init(address, **kwargs)`` for a cluster at ``address`` in the lasting thread, waited for until
    ``deadline`` at most; past it, one line. The thread that is still waiting in ray.init is left
    to Ray (a daemon thread) and a fresh one serves later calls, so nothing queues behind it."""
    global _RAY_THREAD
    from concurrent.futures import TimeoutError as FutureTimeout

    if _RAY_THREAD is None:
        _RAY_THREAD = _LastingThread()
    seconds = None if deadline is None else max(0.1, deadline - time.monotonic())
    try:
        _RAY_THREAD.call(lambda: ray.init(address=address, **kwargs), timeout=seconds)
    except FutureTimeout:
        _RAY_THREAD = None
        raise RayEngineError(f"--ray-address {address}: joining the Ray cluster did not finish within the join "
                             "deadline (--ray-join-timeout); check that it is the head node's address and that this "
                             "machine's Ray version is the cluster's" + _auth_hint() + ", or raise "
                             "--ray-join-timeout.") from None


# --------------------------------------------------------------------------- the shared store on nodes
def portable_path(path: str, home: Path | None) -> str:
    """``path`` as the actors receive it: below the driver's store ``home`` (resolved), the part
    below it after :data:`HOME_PREFIX`, which each node reads under its own store (:func:`node_path`);
    any other path as it is (every node must see it there)."""
    if not path or home is None:
        return path
    try:  # normalised first: a path that climbs out of the store ('..') is not in it
        return HOME_PREFIX + Path(os.path.normpath(path)).relative_to(home).as_posix()
    except ValueError:
        return path


def node_home(driver_home: str | None) -> Path | None:
    """On a node: the run store this worker reads store-relative images from and keeps its caches
    in: the node's own WILDLENS_HOME where its Ray was started with one (the shared store mounted at
    another path there), else the driver's (``driver_home``)."""
    home = driver_home if os.environ.get(LOCAL_ENV) == "1" else (_NODE_HOME or driver_home)
    if home:
        os.environ[HOME_ENV] = home
    return Path(home) if home else None


def node_path(path: str, home: Path | None) -> str:
    """:func:`portable_path`'s inverse on a node whose store is ``home``. A store-relative path that
    is absolute or climbs out of the store ('..') is refused: the node reads inside its store only."""
    if path.startswith(HOME_PREFIX):
        relative = path[len(HOME_PREFIX):]
        parts = Path(relative).parts
        if not relative or Path(relative).is_absolute() or ".." in parts:
            raise RayEngineError(f"{path!r} is not a path inside the run store; the driver sends only paths below "
                                 "its WILDLENS_HOME (a mismatched WildLens version on this node?).")
        return str((home or default_root()) / relative)
    return path


# --------------------------------------------------------------------------- command lines
def add_engine_arguments(parser, work: str) -> None:
    """``--engine local|ray`` and ``--ray-address`` for a stage's command line; ``work`` says what
    runs on Ray (e.g. "each (model, N, seed) fit a Ray task")."""
    parser.add_argument("--engine", choices=("local", "ray"), default="local",
                        help=f"where the work runs: 'local' (this process, default) or 'ray' ({work}, on a local Ray "
                             "instance or the cluster at --ray-address / RAY_ADDRESS; the same tables)")
    parser.add_argument("--ray-address", metavar="HOST:PORT",
                        help="the Ray cluster to join with --engine ray (default: RAY_ADDRESS, else a local instance)")
    parser.add_argument("--ray-join-timeout", type=float, metavar="SECONDS", default=None,
                        help=f"with --ray-address: seconds to join the cluster, then one line (default {JOIN_SECONDS:g})")


def check_engine_arguments(args) -> None:
    """--ray-address or --ray-join-timeout without --engine ray, or an empty --ray-address, is a
    one-line usage error (each would be ignored)."""
    address = getattr(args, "ray_address", None)
    if address is not None and not address.strip():
        raise OptionError("--ray-address is empty: give HOST:PORT (the head node's, 6379 by default), or drop it for "
                          "RAY_ADDRESS or a local instance.")
    for flag, value in (("--ray-address", address), ("--ray-join-timeout", getattr(args, "ray_join_timeout", None))):
        if value is not None and getattr(args, "engine", "local") != "ray":
            raise OptionError(f"{flag} is for --engine ray; add --engine ray or drop it.")


# --------------------------------------------------------------------------- errors from workers
def exception_chain(exc: BaseException):
    """``exc`` and every exception behind it, each once: Ray's ``cause``, ``__cause__`` and ``__context__``."""
    seen, stack = set(), [exc]
    while stack:
        current = stack.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        stack += [getattr(current, "cause", None), current.__cause__, current.__context__]


def user_error(exc: BaseException) -> WildLensError | None:
    """The WildLensError inside what Ray raised, if any. Ray keeps a worker's exception as an
    object only sometimes (a task's); Ray Data hands the driver a ``UserCodeException`` whose text
    holds the original's traceback, so a WildLensError is found by its class name in that text and
    raised again with its one line."""
    for current in exception_chain(exc):
        if isinstance(current, WildLensError) and not type(current).__module__.startswith("ray."):
            return current
    classes = {cls.__name__: cls for cls in _subclasses(WildLensError)}
    found = None
    for match in re.finditer(r"(?m)^(?:\x1b\[[0-9;]*m)?(?:[\w.]+\.)?(\w+): (.+)$", str(exc)):
        if match.group(1) in classes:
            found = match
    if found is None:
        return None
    cls, message = classes[found.group(1)], found.group(2).strip()
    try:
        return cls(message)
    except Exception:  # noqa: BLE001  (a class with another signature: the words still reach the user)
        return RayEngineError(message)


def _subclasses(cls: type) -> list[type]:
    out = []
    for sub in cls.__subclasses__():
        out += [sub, *_subclasses(sub)]
    return out
