"""The one rule for reading a folder of class folders (``ROOT/<class>/<images>``), symbolic links included.

``crawl import SRC`` and ``classify --images DIR`` both read such a tree without trusting it, and
both ask :class:`TreeScan` what each class folder holds. The rule:

* Only regular files are read; a FIFO, a device or a socket is skipped (``not-regular``).
* An entry is read once, under the class of the class folder that holds it **by its real path**
  (symbolic links resolved). A link into *another* class folder is skipped (``other-class``: its
  images are read there, under their own class); so is a link to a place inside ROOT that is in
  no class folder (a hidden folder, a loose file). Before, ``SRC/n02123045/up -> ..`` stored the
  coffee photos of ``SRC/n07920052`` as tabby, imported a folder skipped with ``--skip`` as
  tabby, and then refused the real coffee folder as a loop (issue 22 item 4).
* A link to ROOT itself or to a folder above it is skipped (``symlink-loop``): following it
  re-enters ROOT (or walks the whole disk).
* A link that leaves ROOT is skipped (``outside-src``) unless ``follow_links`` (crawl's
  ``--follow-links``); what a followed link leads to belongs to the class folder it was found in,
  except what lies in another class folder's real path (the rule above still holds).
* Every folder is entered once (a second way into it, or a loop, is ``symlink-loop``); a link
  loop (``ELOOP``) and a broken link are skipped with their reason.

Who owns a real path: the class folder whose real path is the longest prefix of it (a class folder
that is a link into another class folder's sub-folder owns that sub-folder); between class folders
with the same real path (``SRC/tabby -> n02123045``) the one that is not a link, else the first by
name. Hidden entries (a leading '.') are never read. Nothing here opens a file; callers read the
regular files it lists (size-capped, without following links again).

Callers word the reasons themselves (a :class:`Skip` carries what happened and the paths); the
codes are the manifest's reason codes (``crawl.validate`` re-exports them).
"""
from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path

NOT_REGULAR = "not-regular"  # a FIFO, a device, a socket: reading could block or never end
OUTSIDE_SRC = "outside-src"  # a symbolic link that leaves the root (followed only with follow_links)
SYMLINK_LOOP = "symlink-loop"  # a link loop, a link to the root or above, or a second way into a folder
OTHER_CLASS = "other-class"  # a link into another class folder (read there) or into no class folder
UNREADABLE = "unreadable"  # permission denied, a broken link, an I/O error


@dataclass(frozen=True)
class Skip:
    """Why an entry is not read. ``why``: 'loop' (ELOOP), 'above' (the root or a folder above it),
    'seen' (a folder already entered, as ``other``), 'class' (in class folder ``other``),
    'no-class', 'outside', 'broken', 'special' (``mode`` says what), 'error' or 'folder-error'
    (``error``: the OS's words), 'name' (not UTF-8; ``error`` says so). ``target``: the link's real target where known; ``mode`` its
    file type where known."""

    code: str
    why: str
    target: str = ""
    other: str = ""
    error: str = ""
    mode: int = 0

    def __post_init__(self):
        # A link's target or a folder's name that is not UTF-8 goes into reasons that are journalled,
        # stored and printed: as text (a review, 2026-12-06: a link to 'x\\xff.jpg' stopped an import).
        for name in ("target", "other", "error"):
            value = getattr(self, name)
            if value and printable_name(value) != value:
                object.__setattr__(self, name, printable_name(value))


@dataclass(frozen=True)
class Item:
    """One entry of a class folder: a regular file to read (``path``, its real path; ``size``), or
    ``skip``. ``original``: its path relative to the root, '/'-separated ('<class>/<...>')."""

    original: str
    path: Path | None = None
    size: int = 0
    skip: Skip | None = None


def visible(name: str) -> bool:
    return not name.startswith(".")


def printable_name(name: str) -> str:
    """A file name as text: bytes that are not UTF-8 (which Python keeps as lone surrogates, and which
    no JSON, Parquet or terminal takes) written as ``\\xff``."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def bad_name_reason(name: str) -> str | None:
    """Why an entry named ``name`` cannot be read under it, or None: a name that is not UTF-8 cannot be
    stored, journalled or printed as it is (a hostile-input campaign, 2026-12-06: one such file stopped a
    whole import and a classify run with a traceback)."""
    if printable_name(name) == name:
        return None
    return "its name is not UTF-8 (the bytes that are not are shown as \\xNN): rename it to read it"


def inside(path: Path, root: Path) -> bool:
    """``path`` is ``root`` or below it (both real paths)."""
    return path == root or root in path.parents


def _strerror(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__


class TreeScan:
    """Reads ``root``'s class folders by the module's rule; one instance enters each folder once."""

    def __init__(self, root: Path | str, follow_links: bool = False):
        self.root = Path(os.path.realpath(root))
        self.follow_links = follow_links
        self.seen: dict[tuple[int, int], str] = {}  # (device, inode) of folders entered -> their name
        self._owners: dict[Path, str] | None = None

    # who owns what -----------------------------------------------------------------
    def class_folders(self) -> list[str]:
        """The visible entries of the root that are folders (links followed), by name."""
        try:
            with os.scandir(self.root) as scan:
                names = sorted(e.name for e in scan if visible(e.name))
        except OSError:
            return []
        return [name for name in names if (self.root / name).is_dir()]

    @property
    def owners(self) -> dict[Path, str]:
        """Real path of each class folder that is read -> its name (see the module docstring)."""
        if self._owners is None:
            best: dict[Path, tuple[bool, str]] = {}
            for name in self.class_folders():
                path = self.root / name
                try:
                    real = Path(os.path.realpath(path, strict=True))
                except (OSError, RuntimeError):
                    continue
                if (not inside(real, self.root) and not self.follow_links) or inside(self.root, real):
                    continue  # skipped as outside-src or symlink-loop: owns nothing
                rank = (path.is_symlink(), name)
                if real not in best or rank < best[real]:
                    best[real] = rank
            self._owners = {real: name for real, (_, name) in best.items()}
        return self._owners

    def owner(self, real: Path) -> str | None:
        """The class folder that holds ``real`` (a real path), or None."""
        owners = self.owners
        for path in (real, *real.parents):
            if path in owners:
                return owners[path]
        return None

    def _owned(self, real: Path, original: str, folder: str, items: list[Item]) -> bool:
        """True if ``real`` belongs to class folder ``folder``; else a Skip is appended."""
        owner = self.owner(real)
        if owner == folder:
            return True
        if owner is not None:
            items.append(Item(original, skip=Skip(OTHER_CLASS, "class", str(real), other=owner)))
            return False
        if inside(real, self.root):
            items.append(Item(original, skip=Skip(OTHER_CLASS, "no-class", str(real))))
            return False
        return True  # outside the root, reached by a followed link: the class it was found in

    # walking --------------------------------------------------------------------------
    def entries(self, folder: str) -> list[Item]:
        """What class folder ``folder`` (a name in the root) holds: its regular files, then its
        sub-folders' (by name, depth first), and every entry not read with its Skip."""
        items: list[Item] = []
        bad = bad_name_reason(folder)
        if bad is not None:  # mapped by hand (--map) or not: its entries' names could not be stored either
            return [Item(printable_name(folder), skip=Skip(UNREADABLE, "name", error=bad))]
        start = self._start(folder, items)
        if start is None:
            return items
        stack = [(start, folder)]
        while stack:
            path, original = stack.pop()
            stack.extend(reversed(self._read_folder(path, original, folder, items)))
        return items

    def _start(self, folder: str, items: list[Item]) -> Path | None:
        path = self.root / folder
        if path.is_symlink():
            target = self._link_target(path, folder, items)
            if target is None:
                return None
        else:
            target = path
        try:
            mode = os.stat(target).st_mode
        except OSError as exc:
            items.append(Item(folder, skip=Skip(UNREADABLE, "error", error=_strerror(exc))))
            return None
        if not stat.S_ISDIR(mode):
            items.append(Item(folder, skip=Skip(NOT_REGULAR, "special", str(target), mode=mode)))
            return None
        if not self._owned(target, folder, folder, items):
            return None
        return target

    def _link_target(self, link: Path, original: str, items: list[Item]) -> Path | None:
        """The real target of a link that may be followed, or None with its Skip appended."""
        try:
            target = Path(os.path.realpath(link, strict=True))
        except RuntimeError:  # some Pythons report a loop this way
            items.append(Item(original, skip=Skip(SYMLINK_LOOP, "loop")))
            return None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                items.append(Item(original, skip=Skip(SYMLINK_LOOP, "loop")))
            else:
                items.append(Item(original, skip=Skip(UNREADABLE, "broken", error=_strerror(exc))))
            return None
        if not inside(target, self.root) and not self.follow_links:
            try:
                mode = os.stat(target).st_mode
            except OSError:
                mode = 0
            items.append(Item(original, skip=Skip(OUTSIDE_SRC, "outside", str(target), mode=mode)))
            return None
        if inside(self.root, target):
            items.append(Item(original, skip=Skip(SYMLINK_LOOP, "above", str(target))))
            return None
        return target

    def _read_folder(self, path: Path, original: str, folder: str, items: list[Item]) -> list[tuple[Path, str]]:
        """Append the folder's files and skipped entries to ``items``; return its sub-folders."""
        try:
            info = os.stat(path)
            key = (info.st_dev, info.st_ino)
            if key in self.seen:
                items.append(Item(original, skip=Skip(SYMLINK_LOOP, "seen", str(path), other=self.seen[key])))
                return []
            self.seen[key] = original
            with os.scandir(path) as scan:
                listing = sorted((e for e in scan if visible(e.name)), key=lambda e: e.name)
        except OSError as exc:
            items.append(Item(original, skip=Skip(UNREADABLE, "folder-error", error=_strerror(exc))))
            return []
        folders = []
        for entry in listing:
            bad = bad_name_reason(entry.name)
            if bad is not None:  # recorded under a printable name; the rest of the folder is read
                items.append(Item(f"{original}/{printable_name(entry.name)}", skip=Skip(UNREADABLE, "name", error=bad)))
                continue
            name = f"{original}/{entry.name}"
            try:
                if entry.is_symlink():
                    target = self._link_target(Path(entry.path), name, items)
                    if target is None:
                        continue
                    info = os.stat(target)
                    if not self._owned(target, name, folder, items):
                        continue
                else:
                    target, info = Path(entry.path), entry.stat(follow_symlinks=False)
                    if stat.S_ISDIR(info.st_mode) and not self._owned(target, name, folder, items):
                        continue
            except OSError as exc:
                items.append(Item(name, skip=Skip(UNREADABLE, "error", error=_strerror(exc))))
                continue
            if stat.S_ISDIR(info.st_mode):
                folders.append((target, name))
            elif stat.S_ISREG(info.st_mode):
                items.append(Item(name, target, info.st_size))
            else:
                items.append(Item(name, skip=Skip(NOT_REGULAR, "special", str(target), mode=info.st_mode)))
        return folders
