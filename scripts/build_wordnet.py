"""Build the vendored WordNet 3.0 corpus in NLTK's format, reproducibly.

Input: the Princeton WordNet 3.0 database files as Debian's ``wordnet-base`` and
``wordnet-sense-index`` packages install them (``/usr/share/wordnet``), plus the
``lexnames`` table, which Debian does not ship as a file: we regenerate it from the
``lexnames(5WN)`` manual page that ``wordnet-base`` installs.

Output: ``core/data/nltk_data/corpora/wordnet.zip`` laid out as NLTK's own
``wordnet.zip`` (members ``wordnet/<file>``), so NLTK's unmodified
``WordNetCorpusReader`` reads it. Members are sorted, time-stamped with WordNet 3.0's
release date and deflated (plain zip, readable by any unzip), so two builds from the same inputs are byte-identical.

Usage (as root on Debian/Ubuntu)::

    apt-get update && apt-get install -y wordnet-base wordnet-sense-index
    python scripts/build_wordnet.py            # writes the zip and prints its sha256
    python scripts/build_wordnet.py --check    # rebuilds in memory, compares with the repo copy
"""
from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import os
import re
import sys
import zipfile
from pathlib import Path

WORDNET_DIR = Path("/usr/share/wordnet")
LEXNAMES_MAN = Path("/usr/share/man/man5/lexnames.5WN.gz")
COPYRIGHT = Path("/usr/share/doc/wordnet-base/copyright")
OUT = Path(__file__).resolve().parent.parent / "explain" / "data" / "nltk_data" / "corpora" / "wordnet.zip"

# The files NLTK's WordNetCorpusReader opens (its _FILES), minus lexnames, which we generate.
DATABASE_FILES = (
    "adj.exc", "adv.exc", "noun.exc", "verb.exc",
    "cntlist.rev",
    "data.adj", "data.adv", "data.noun", "data.verb",
    "index.adj", "index.adv", "index.noun", "index.verb",
    "index.sense",
)
# WordNet 3.0's release date; a fixed stamp keeps the zip reproducible.
ZIP_DATE = (2006, 12, 6, 0, 0, 0)
NUM_LEXNAMES = 45

README = """WordNet 3.0 database files in NLTK's corpus format, vendored by WildLens.

Built by scripts/build_wordnet.py from Debian's wordnet-base and wordnet-sense-index
packages (Princeton WordNet 3.0). `lexnames` was regenerated from the lexnames(5WN)
manual page. The files are otherwise unmodified. See LICENSE.
"""


def lexnames_from_manpage(man_gz: Path) -> str:
    """The 45-line ``lexnames`` file: ``NN<TAB>name<TAB>syntactic-category``."""
    text = gzip.decompress(man_gz.read_bytes()).decode("latin-1")
    rows = re.findall(r"^(\d\d)\t(\S+)\s*\t", text, flags=re.MULTILINE)
    category = {"adj": 3, "adv": 4, "noun": 1, "verb": 2}
    lines = []
    for number, name in rows:
        # adj.all/adj.pert/adj.ppl are adjectives (3), adv.all is adverb (4), as in Princeton's file.
        lines.append(f"{number}\t{name}\t{category[name.split('.')[0]]}\n")
    if len(lines) != NUM_LEXNAMES or [int(r[0]) for r in rows] != list(range(NUM_LEXNAMES)):
        raise SystemExit(f"lexnames: expected {NUM_LEXNAMES} numbered rows in {man_gz}, got {len(lines)}")
    return "".join(lines)


def licence_text(copyright_file: Path) -> str:
    """WordNet's own licence, cut out of Debian's machine-readable copyright file."""
    text = copyright_file.read_text()
    block = text.split("License: WordNet3.0", 1)[1].split("\nFiles:", 1)[0]
    lines = [ln[1:] if ln.startswith(" ") else ln for ln in block.strip("\n").splitlines()]
    return "\n".join("" if ln == "." else ln for ln in lines).strip() + "\n"


def build_zip_bytes(wordnet_dir: Path = WORDNET_DIR) -> bytes:
    members = {name: (wordnet_dir / name).read_bytes() for name in DATABASE_FILES}
    members["lexnames"] = lexnames_from_manpage(LEXNAMES_MAN).encode()
    members["LICENSE"] = licence_text(COPYRIGHT).encode()
    members["README"] = README.encode()
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare a fresh build with the vendored zip")
    parser.add_argument("--wordnet-dir", type=Path, default=WORDNET_DIR)
    args = parser.parse_args(argv)
    missing = [p for p in [args.wordnet_dir / f for f in DATABASE_FILES] + [LEXNAMES_MAN, COPYRIGHT] if not p.exists()]
    if missing:
        print("missing input files (apt-get install wordnet-base wordnet-sense-index):", *missing, sep="\n  ", file=sys.stderr)
        return 2
    data = build_zip_bytes(args.wordnet_dir)
    digest = hashlib.sha256(data).hexdigest()
    if args.check:
        same = OUT.exists() and OUT.read_bytes() == data
        print(f"{'identical' if same else 'DIFFERENT'}: fresh build sha256 {digest}")
        return 0 if same else 1
    OUT.parent.mkdir(parents=True, exist_ok=True)
    tmp = OUT.with_suffix(".zip.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, OUT)
    (OUT.parent.parent / "WORDNET_LICENSE").write_text(licence_text(COPYRIGHT))
    print(f"wrote {OUT} ({len(data) / 1e6:.2f} MB) sha256 {digest}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
