"""Who can reach the dashboard, and the limits that follow (issue 22, item 17).

The dashboard listens on loopback (127.0.0.1) unless its operator chooses otherwise:
``wildlens app --share`` (every interface) or Streamlit's ``--server.address HOST``. Serving
beyond this machine sets ``WILDLENS_SHARE=1`` in the server's environment (pages/launcher.py
does it, and app.py for an address given to ``streamlit run`` directly), and then:

* Import reads only folders under ``WILDLENS_IMPORT_ROOT``, and nothing when it is unset (a
  visitor could otherwise read any folder the server's user can). The root is enforced on
  loopback too when it is set. The library's import entry point checks it (crawl.importer calls
  :func:`check_import_source`), so no page can forget it;
* export writes only into folders under ``WILDLENS_EXPORT_ROOT``, and nowhere when it is unset
  (a visitor could otherwise fill any disk the server's user can write); enforced on loopback too
  when set, by the library's export entry point (crawl.export calls :func:`check_export_destination`);
* the password gate (pages/access.py) asks for ``WILDLENS_PASSWORD`` when it is set;
* the Models page does not join a typed Ray address (only RAY_ADDRESS, set by the operator):
  joining a cluster lets that cluster run code in the dashboard's process.

Uploads of predictions are capped on loopback and beyond alike (generous defaults: 200 MB, 5
million rows, 100 models a file; ``WILDLENS_UPLOAD_MAX_MB``, ``_ROWS``, ``_MODELS``): a file
of 9,600 model ids made 9,600 run folders in 160 s before it was refused by nothing.

Streamlit-free: the stages call it, the launcher prints :func:`exposure_notice`.
"""
from __future__ import annotations

import ipaddress
import math
import os
from dataclasses import dataclass
from pathlib import Path

from .errors import WildLensError
from .userfile import expand_user

LOOPBACK = "127.0.0.1"
SHARE_ENV = "WILDLENS_SHARE"
IMPORT_ROOT_ENV = "WILDLENS_IMPORT_ROOT"
EXPORT_ROOT_ENV = "WILDLENS_EXPORT_ROOT"
PASSWORD_ENV = "WILDLENS_PASSWORD"
UPLOAD_MAX_MB_ENV = "WILDLENS_UPLOAD_MAX_MB"
UPLOAD_MAX_ROWS_ENV = "WILDLENS_UPLOAD_MAX_ROWS"
UPLOAD_MAX_MODELS_ENV = "WILDLENS_UPLOAD_MAX_MODELS"
# Streamlit's own default upload limit is 200 MB; a million predictions are about 60 MB of CSV.
DEFAULT_UPLOAD_MAX_MB = 200.0
DEFAULT_UPLOAD_MAX_ROWS = 5_000_000
DEFAULT_UPLOAD_MAX_MODELS = 100  # the registry knows 37; a run compares a handful


class ServingError(WildLensError, PermissionError):
    """Something the serving mode does not allow (an import outside the root), or a bad setting."""


class UploadTooLarge(WildLensError, ValueError):
    """An uploaded predictions file over a cap; the message names the cap and its variable."""


# --------------------------------------------------------------------------- addresses
def is_loopback(address: str | None) -> bool:
    """True for an address that only this machine reaches (127.0.0.0/8, ::1, 'localhost');
    False for '', '0.0.0.0', '::' (every interface) and any other host."""
    text = (address or "").strip().strip("[]")
    if text.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(text).is_loopback
    except ValueError:
        return False


def sharing() -> bool:
    """Whether this process serves the dashboard beyond loopback (WILDLENS_SHARE=1)."""
    return os.environ.get(SHARE_ENV, "").strip() == "1"


def mark_sharing() -> None:
    os.environ[SHARE_ENV] = "1"


def password_set() -> bool:
    return bool(os.environ.get(PASSWORD_ENV, ""))


# --------------------------------------------------------------------------- the import and export roots
def _root_from(env: str, what: str) -> Path | None:
    """The folder ``env`` names, as a real path, or None when unset; ServingError when it is no folder
    (``what``: what the folder is for, ending the message's advice)."""
    text = os.environ.get(env, "").strip()
    if not text:
        return None
    root = expand_user(text, f"{env}=").resolve()
    if not root.is_dir():
        raise ServingError(f"{env}={text} is not a folder: set it to the folder {what}, and restart WildLens.")
    return root


def import_root() -> Path | None:
    """``WILDLENS_IMPORT_ROOT`` as a real path, or None when unset."""
    return _root_from(IMPORT_ROOT_ENV, "Import may read")


def check_import_allowed() -> Path | None:
    """The import root (None: any folder); refuses every import on a shared dashboard without one."""
    root = import_root()
    if root is None and sharing():
        raise ServingError(f"Import is off on a shared dashboard: set {IMPORT_ROOT_ENV} to the one folder it may "
                           "read, and restart WildLens.")
    return root


def check_import_source(src: Path | str, follow_links: bool = False) -> None:
    """Refuse a source folder outside the import root, judged by its real path ('..' and links
    resolved), and following links out of it while a root is set."""
    root = check_import_allowed()
    if root is None:
        return
    real = Path(os.path.realpath(expand_user(src)))  # (Path.resolve raises on a link that leads back to itself)
    if real != root and root not in real.parents:
        raise ServingError(f"{src} is outside the import folder {root} ({IMPORT_ROOT_ENV}): put the images under it.")
    if follow_links:
        raise ServingError(f"Following links out of the folder is off while {IMPORT_ROOT_ENV} is set: copy the "
                           f"images under {root} instead.")


def export_root() -> Path | None:
    """``WILDLENS_EXPORT_ROOT`` as a real path, or None when unset."""
    return _root_from(EXPORT_ROOT_ENV, "exports may be written into")


def check_export_destination(out: Path | str) -> Path | None:
    """Refuse an export folder outside the export root (judged by its real path: '..' and links
    resolved), and every export on a shared dashboard without a root. Returns the root (None: any
    folder, the command line's and loopback's default)."""
    root = export_root()
    if root is None:
        if sharing():
            raise ServingError(f"Export is off on a shared dashboard: set {EXPORT_ROOT_ENV} to the one folder exports "
                               "may be written into, and restart WildLens.")
        return None
    real = expand_user(out).resolve()
    if real == root or root not in real.parents:
        raise ServingError(f"{out} is not a folder inside the export folder {root} ({EXPORT_ROOT_ENV}): give a new "
                           "folder under it.")
    return root


# --------------------------------------------------------------------------- upload caps
@dataclass(frozen=True)
class UploadLimits:
    max_bytes: int
    max_rows: int
    max_models: int

    @property
    def max_mb(self) -> float:
        return self.max_bytes / 1e6


def _number(name: str, default: float, kind=int):
    text = os.environ.get(name, "").strip()
    if not text:
        return kind(default)
    try:
        number = float(text)
    except ValueError:
        number = -1.0
    # Finite first: int(inf) raised OverflowError and NaN (which is not <= 0) ValueError, a traceback
    # at each upload and in `wildlens app --share`'s notice. A whole-number cap under 1 is no limit.
    value = int(number) if kind is int and math.isfinite(number) else number
    if not math.isfinite(number) or value <= 0:
        what = "a positive whole number" if kind is int else "a positive number"
        raise ServingError(f"{name}={text!r} is not {what}; set it to a limit such as {default:g}, or "
                           "unset it for the default.")
    return value


def upload_limits() -> UploadLimits:
    """The caps on one uploaded predictions file, from the environment (defaults above)."""
    megabytes = _number(UPLOAD_MAX_MB_ENV, DEFAULT_UPLOAD_MAX_MB, float)
    return UploadLimits(max_bytes=int(megabytes * 1e6), max_rows=_number(UPLOAD_MAX_ROWS_ENV, DEFAULT_UPLOAD_MAX_ROWS),
                        max_models=_number(UPLOAD_MAX_MODELS_ENV, DEFAULT_UPLOAD_MAX_MODELS))


def check_upload_bytes(name: str, size: int) -> None:
    limits = upload_limits()
    if size > limits.max_bytes:
        raise UploadTooLarge(f"{name}: {size / 1e6:,.1f} MB, at most {limits.max_mb:,.1f} MB a file "
                             f"({UPLOAD_MAX_MB_ENV}); split the file or raise the limit. No run was created.")


def check_upload_table(name: str, rows: int, models: int) -> None:
    """Refuse a file with too many rows or model ids, before anything is computed or created."""
    limits = upload_limits()
    if rows > limits.max_rows:
        raise UploadTooLarge(f"{name}: {rows:,} rows, at most {limits.max_rows:,} a file ({UPLOAD_MAX_ROWS_ENV}); "
                             "split the file or raise the limit. No run was created.")
    if models > limits.max_models:
        raise UploadTooLarge(f"{name}: {models:,} models, at most {limits.max_models:,} a file "
                             f"({UPLOAD_MAX_MODELS_ENV}); is the model column right? No run was created.")


# --------------------------------------------------------------------------- what sharing exposes
def exposure_notice(address: str, port: int | str) -> str:
    """What a dashboard served on ``address`` lets anyone who reaches it do (printed at start)."""
    where = "every network interface of this machine" if address in ("", "0.0.0.0", "::") else address
    limits = upload_limits()
    try:
        root = import_root()
    except ServingError as exc:
        root, bad = None, str(exc)
    else:
        bad = ""
    if root is not None:
        imports = f"Import: only folders under {root} ({IMPORT_ROOT_ENV})."
    else:
        imports = bad or f"Import: off (set {IMPORT_ROOT_ENV} to the one folder it may read)."
    gate = ("Password: asked (WILDLENS_PASSWORD is set)." if password_set() else
            "Password: NONE. Set WILDLENS_PASSWORD, or put WildLens behind a proxy with real authentication "
            "(README, Security).")
    return "\n".join([
        f"WildLens is serving beyond this machine: port {port} on {where}.",
        "Anyone who can reach it can see every run and image, rename and delete runs, crawl the web, classify, "
        f"and create runs by uploading predictions (at most {limits.max_mb:,.0f} MB, {limits.max_rows:,} rows, "
        f"{limits.max_models:,} models a file).",
        imports + " " + _exports_line() + " Ray: only RAY_ADDRESS, never an address typed on the Models page.",
        gate,
    ])


def _exports_line() -> str:
    try:
        root = export_root()
    except ServingError as exc:
        return str(exc)
    return (f"Export: only into folders under {root} ({EXPORT_ROOT_ENV})." if root is not None else
            f"Export: off (set {EXPORT_ROOT_ENV} to the one folder it may write into).")
