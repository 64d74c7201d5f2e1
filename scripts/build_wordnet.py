"""Build the vendored WordNet 3.0 corpus in NLTK's format, reproducibly, as Princeton released it.

Why not Debian's ``wordnet-base`` files: Debian compiles the database itself, with ``grind``,
from Princeton's lexicographer files after two patches of its own (``debian/patches``):

* ``20_verb.social_fix.patch`` moves the hypernym of ``inhibit.v.04`` from ``restrain.v.01`` to
  ``suppress`` (verb.cognition), to break the one hypernym cycle of WordNet 3.0
  (restrain.v.01 <-> inhibit.v.04). A pointer moves between synsets, so 9,026 verb synsets
  after ``suppress`` move by 18 bytes (``restrain.v.01`` is 02422681 in Debian, 02422663 in
  Princeton's and NLTK's corpus) and ``restrain.v.01`` loses its hyponym ``inhibit.v.04``;
* ``20_adj.all_fix.patch`` adds a space to the gloss of ``laid.s.01``, so 8,946 adjective
  synsets after it move by one byte.

Noun synsets keep their offsets either way (``index.noun`` is byte-identical), but ``data.noun``
points at verbs and adjectives (derivation, attribute), so 13,200 of its lines differ in those
pointers' targets. Princeton's database is what NLTK's ``wordnet`` corpus holds and what every
published WordNet 3.0 offset means, so this script compiles Princeton's files with neither patch.

Inputs: Debian's *source* package of WordNet 3.0, which carries Princeton's lexicographer files
unpatched (``wordnet_3.0.orig.tar.gz``, pinned below by its sha256, the one Debian's ``.dsc``
lists) and Debian's packaging (``wordnet_3.0-*.debian.tar.xz``: the licence text and the
patches, read to check that no other patch touches the database), plus ``grind``, Princeton's
compiler (Debian's ``wordnet-grind``). ``grind`` is deterministic: with Debian's two patches
applied (``--debian``) this script reproduces Debian's ``wordnet-base`` and
``wordnet-sense-index`` files byte for byte, and without them grind's statistics equal those
of Princeton's own build log (``dict/log.grind.3.0``). ``lexnames``, which the source does not
ship as a file, is regenerated from the ``lexnames(5WN)`` manual page's table.

Output: ``core/data/nltk_data/corpora/wordnet.zip`` (the file ``core/wordnet.py`` reads) laid
out as NLTK's own ``wordnet.zip`` (members ``wordnet/<file>``), so NLTK's unmodified
``WordNetCorpusReader`` reads it, and ``core/data/nltk_data/WORDNET_LICENSE``. Members are
sorted, time-stamped with WordNet 3.0's release date and deflated (plain zip, readable by any
unzip), so two builds from the same inputs are byte-identical.

Usage (as root on Debian/Ubuntu, with ``deb-src`` lines in /etc/apt/sources.list(.d))::

    make wordnet                              # all of the below
    apt-get install -y wordnet-grind
    mkdir -p build/wordnet-src && (cd build/wordnet-src && apt-get source --download-only wordnet)
    python scripts/build_wordnet.py           # writes the zip and prints its sha256
    python scripts/build_wordnet.py --check   # rebuilds in memory, compares with the repo copy
"""
from __future__ import annotations

import argparse
import hashlib
import io
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "core" / "data" / "nltk_data" / "corpora" / "wordnet.zip"
LICENSE_OUT = ROOT / "core" / "data" / "nltk_data" / "WORDNET_LICENSE"
SOURCE_DIR = ROOT / "build" / "wordnet-src"

ORIG_TARBALL = "wordnet_3.0.orig.tar.gz"
# Debian's wordnet_3.0-37.dsc (Checksums-Sha256): Princeton's WordNet-3.0 source without the
# compiled database. A different tarball is refused: the output would not be WordNet 3.0.
ORIG_SHA256 = "73572005ef8eb15be48ea1010d18082b80bfbf8684b78ce64bc3abf11db1f95f"
# Debian's patches that change the database (see the module docstring); never applied to the
# vendored corpus, applied with --debian to reproduce Debian's files.
DEBIAN_DATA_PATCHES = ("20_verb.social_fix.patch", "20_adj.all_fix.patch")

# The files NLTK's WordNetCorpusReader opens (its _FILES), minus lexnames, which we generate:
# grind's output, and what the source's dict/ folder ships as it is.
GRIND_FILES = ("data.adj", "data.adv", "data.noun", "data.verb",
               "index.adj", "index.adv", "index.noun", "index.verb", "index.sense")
DICT_FILES = ("adj.exc", "adv.exc", "noun.exc", "verb.exc", "cntlist.rev")
LEXICOGRAPHER_FILE = re.compile(r"(adj|adv|noun|verb)\.[A-Za-z]+")
# WordNet 3.0's release date; a fixed stamp keeps the zip reproducible.
ZIP_DATE = (2006, 12, 6, 0, 0, 0)
NUM_LEXNAMES = 45

README = """WordNet 3.0 database files in NLTK's corpus format, vendored by WildLens.

Built by scripts/build_wordnet.py: Princeton WordNet 3.0's lexicographer files (from Debian's
source package, without Debian's two database patches) compiled with Princeton's grind, as
Princeton built the release. `lexnames` was regenerated from the lexnames(5WN) manual page.
The files are otherwise unmodified. See LICENSE.
"""


class BuildError(Exception):
    """A missing or unexpected input; the message says what to do."""


def lexnames_from_manpage(text: str) -> str:
    """The 45-line ``lexnames`` file, ``NN<TAB>name<TAB>syntactic-category``, from the table in
    the ``lexnames(5WN)`` manual page (troff source)."""
    rows = re.findall(r"^(\d\d)\t(\S+)\s*\t", text, flags=re.MULTILINE)
    category = {"adj": 3, "adv": 4, "noun": 1, "verb": 2}
    # adj.all/adj.pert/adj.ppl are adjectives (3), adv.all is adverb (4), as in Princeton's file.
    lines = [f"{number}\t{name}\t{category[name.split('.')[0]]}\n" for number, name in rows]
    if len(lines) != NUM_LEXNAMES or [int(r[0]) for r in rows] != list(range(NUM_LEXNAMES)):
        raise BuildError(f"lexnames: expected {NUM_LEXNAMES} numbered rows in the manual page, got {len(lines)}")
    return "".join(lines)


def licence_text(copyright_text: str) -> str:
    """WordNet's own licence, cut out of Debian's machine-readable copyright file."""
    block = copyright_text.split("License: WordNet3.0", 1)[1].split("\nFiles:", 1)[0]
    lines = [ln[1:] if ln.startswith(" ") else ln for ln in block.strip("\n").splitlines()]
    return "\n".join("" if ln == "." else ln for ln in lines).strip() + "\n"


def zip_bytes(members: dict[str, bytes]) -> bytes:
    """The corpus zip of ``members`` (name -> bytes), byte-reproducible."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        directory = zipfile.ZipInfo("wordnet/", ZIP_DATE)
        directory.external_attr = (0o40755 << 16) | 0x10
        zf.writestr(directory, b"")
        for name in sorted(members):
            info = zipfile.ZipInfo(f"wordnet/{name}", ZIP_DATE)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o100644 << 16
            info.create_system = 3  # unix, whatever the building OS
            zf.writestr(info, members[name], compresslevel=9)
    return buf.getvalue()


def find_inputs(source_dir: Path) -> tuple[Path, Path]:
    """The orig tarball (checked against ORIG_SHA256) and the newest Debian tarball."""
    orig = source_dir / ORIG_TARBALL
    debian = sorted(source_dir.glob("wordnet_3.0-*.debian.tar.xz"))
    if not orig.is_file() or not debian:
        raise BuildError(f"no WordNet source package in {source_dir}: run "
                         f"'mkdir -p {source_dir} && cd {source_dir} && apt-get source --download-only wordnet' "
                         "(needs deb-src lines in /etc/apt/sources.list.d), or pass --source DIR")
    digest = hashlib.sha256(orig.read_bytes()).hexdigest()
    if digest != ORIG_SHA256:
        raise BuildError(f"{orig} has sha256 {digest}, not WordNet 3.0's {ORIG_SHA256}: fetch Debian's "
                         "wordnet_3.0.orig.tar.gz again")
    return orig, debian[-1]


def _read_debian(debian_tar: Path) -> tuple[str, dict[str, bytes]]:
    """Debian's copyright file and its patches (name -> text); refuses an unknown database patch."""
    with tarfile.open(debian_tar) as tf:
        def member(name: str) -> bytes:
            handle = tf.extractfile(name)
            if handle is None:
                raise BuildError(f"{debian_tar} has no regular file {name}")
            return handle.read()

        copyright_text = member("debian/copyright").decode()
        series = [ln.split()[0] for ln in member("debian/patches/series").decode().splitlines()
                  if ln.strip() and not ln.startswith("#")]
        patches = {name: member(f"debian/patches/{name}") for name in series}
    def changes_data(text: bytes) -> bool:  # a file of dict/ other than its build Makefiles
        return any(not path.endswith((b"Makefile.in", b"Makefile.am"))
                   for path in re.findall(rb"^\+\+\+ [^/\s]+/(dict/\S+)", text, re.M))

    touching = sorted(name for name, text in patches.items() if changes_data(text))
    if touching != sorted(DEBIAN_DATA_PATCHES):
        raise BuildError(f"Debian's patches to the database are {touching}, not the known {sorted(DEBIAN_DATA_PATCHES)}: "
                         "review the new one and update DEBIAN_DATA_PATCHES")
    return copyright_text, patches


def _extract(orig: Path, into: Path) -> Path:
    """Extract the source's ``dict/`` folder and manual pages; returns the WordNet-3.0 folder."""
    with tarfile.open(orig) as tf:
        wanted = [m for m in tf.getmembers()
                  if m.isfile() and re.fullmatch(r"WordNet-3\.0/(dict/[^/]+|dict/dbfiles/[^/]+|doc/man/lexnames\.5)", m.name)
                  and m.name.rsplit("/", 1)[1] not in (".", "..")]  # [^/]+ matches '..': a file named dict/.. crashed
        # A file named as a folder another wanted member is in (dict/dbfiles beside dict/dbfiles/noun.x) crashed too.
        folders = {name.rsplit("/", 1)[0] for name in (m.name for m in wanted)}
        wanted = [m for m in wanted if m.name not in folders]
        for member in wanted:  # regular files under fixed names (the pattern above): written as plain files
            target = into / member.name
            target.parent.mkdir(parents=True, exist_ok=True)
            with tf.extractfile(member) as source, open(target, "wb") as sink:
                shutil.copyfileobj(source, sink)  # a piece at a time (data.noun is 15 MB)
    top = into / "WordNet-3.0"
    for path in top.rglob("*"):  # Princeton's files are read-only; grind writes beside them
        path.chmod(0o755 if path.is_dir() else 0o644)
    return top


def grind_program(grind: str | None = None) -> str:
    found = shutil.which(grind or "grind")
    if not found:
        raise BuildError("grind (Princeton's WordNet compiler) is missing: apt-get install wordnet-grind, or pass --grind PATH")
    return found


def build_members(source_dir: Path = SOURCE_DIR, grind: str | None = None, debian: bool = False) -> dict[str, bytes]:
    """Every member of the corpus zip (name -> bytes). ``debian`` applies Debian's database
    patches first (the result equals Debian's wordnet-base files; a check, never vendored)."""
    orig, debian_tar = find_inputs(source_dir)
    program = grind_program(grind)
    copyright_text, patches = _read_debian(debian_tar)
    with tempfile.TemporaryDirectory(prefix="wordnet-build-") as tmp:
        top = _extract(orig, Path(tmp))
        if debian:
            for name in DEBIAN_DATA_PATCHES:
                subprocess.run(["patch", "-s", "-p1", "-d", str(top)], input=patches[name], check=True)
        dbfiles = top / "dict" / "dbfiles"
        lexicographer = sorted(p.name for p in dbfiles.iterdir() if LEXICOGRAPHER_FILE.fullmatch(p.name))
        # What Debian's dict/dbfiles/Makefile runs (-i sense index, -n derivations, -o order by cntlist).
        done = subprocess.run([program, "-i", "-n", "-o", "cntlist", *lexicographer], cwd=dbfiles,
                              env={**os.environ, "LC_ALL": "C"}, capture_output=True, text=True, errors="replace")
        log = done.stdout + done.stderr
        if done.returncode != 0 or "Done dumping sense index" not in log:
            raise BuildError(f"grind failed (exit {done.returncode}): {log.strip().splitlines()[-1:]}")
        members = {name: (dbfiles / name).read_bytes() for name in GRIND_FILES}
        members.update({name: (top / "dict" / name).read_bytes() for name in DICT_FILES})
        members["lexnames"] = lexnames_from_manpage((top / "doc" / "man" / "lexnames.5").read_text("latin-1")).encode()
    members["LICENSE"] = licence_text(copyright_text).encode()
    members["README"] = README.encode()
    return members


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare a fresh build with the vendored zip")
    parser.add_argument("--source", type=Path, default=SOURCE_DIR,
                        help=f"folder with Debian's WordNet source package (default {SOURCE_DIR.relative_to(ROOT)})")
    parser.add_argument("--grind", help="the grind program (default: grind on PATH)")
    args = parser.parse_args(argv)
    try:
        members = build_members(args.source, args.grind)
    except BuildError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    data = zip_bytes(members)
    digest = hashlib.sha256(data).hexdigest()
    if args.check:
        same = OUT.exists() and OUT.read_bytes() == data
        print(f"{'identical' if same else 'DIFFERENT'}: fresh build sha256 {digest} ({OUT.relative_to(ROOT)})")
        return 0 if same else 1
    OUT.parent.mkdir(parents=True, exist_ok=True)
    tmp = OUT.with_suffix(".zip.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, OUT)
    LICENSE_OUT.write_bytes(members["LICENSE"])
    print(f"wrote {OUT.relative_to(ROOT)} ({len(data) / 1e6:.2f} MB) sha256 {digest}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
