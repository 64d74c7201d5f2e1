# Two commands set up a fresh machine:  make run  |  make test   (see README.md)
# The interpreter the venv is made from (only when .venv is missing; `make PYTHON=...` or PYTHON in
# the environment chooses): Debian's packaged Python 3.11 where it can make a venv, else any
# python3.11 on the PATH that can, else python3 (refused below unless it is 3.11). Why: Debian
# builds its interpreter with profile-guided optimisation and LTO and links it statically;
# pyenv's default build has none of these. On this 2-core machine the page, browse and WordNet
# test modules took 126 against 146 CPU-seconds on it (alternating runs, 2026-12-07), and the
# dashboard's Python is the same code.
DEFAULT_PYTHON = $(shell for p in /usr/bin/python3.11 python3.11; do \
	  $$p -c 'import sys, ensurepip, venv; sys.exit(sys.version_info[:2] != (3, 11))' >/dev/null 2>&1 \
	  && { echo $$p; exit; }; done; echo python3)
PYTHON ?= $(DEFAULT_PYTHON)
# An empty PYTHON in the environment or on the command line means the default, not an empty command.
ifneq ($(origin PYTHON),file)
ifeq ($(strip $(PYTHON)),)
override PYTHON = $(DEFAULT_PYTHON)
endif
endif
# PYTHON as one shell word, whatever it holds (a space, $, a backquote, a quote): single-quoted, each ' written '\''.
QPYTHON = '$(subst ','\'',$(PYTHON))'
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-requirements
PORT   ?= 8501
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: install run test bench architecture browser-deps wordnet ic wordgraph clean-venv

# Create the venv when missing and (re)install when requirements.txt changed.
$(STAMP): requirements.txt
	@test -x $(BIN)/python || { $(QPYTHON) -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' 2>/dev/null \
	  || { echo 'error: '$(QPYTHON)' is not Python 3.11, which requirements.txt pins for: install python3.11 (with its venv module) or run make PYTHON=/path/to/python3.11' >&2; exit 2; }; \
	  $(QPYTHON) -m venv $(VENV); }
	$(BIN)/python -m pip install -q -r requirements.txt
	@touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(BIN)/python -m wildlens app --server.port $(PORT)

# One test worker per core, at most 4 (pytest-xdist). loadgroup, not worksteal: the Ray module
# (xdist_group "ray") stays on one worker, so its Ray instance starts once (on 4 worksteal workers
# its tests summed to 758 s: every worker that stole one started its own); tests marked `long` are
# collected first (tests/conftest.py), and each worker's native thread pools get the cores over the
# workers (tests/conftest.py THREAD_POOLS). The suite is CPU-bound: on this 2-core machine it needs
# ~850-900 CPU-seconds of the whole process tree (cgroup cpuacct; Ray's workers and daemons ~220, the
# browser tests' servers and Chromium ~150), so more workers do not help (2026-12-06, quiet: -n 2
# 490-526 s, -n 3 551 s and 1,050 CPU-seconds; 2026-12-07, a fresh clone on Debian's interpreter with the page tests'
# shared script cache: 403.8 s). A single file or test: .venv/bin/python -m pytest tests/explain (one process).
test: $(STAMP) browser-deps
	$(BIN)/python -m pytest -n auto --maxprocesses 4 --dist loadgroup

bench: $(STAMP)
	@for b in benchmarks/bench_*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

# The README's import-graph picture, drawn from the code (refused while an import cycle exists).
architecture: $(STAMP)
	$(BIN)/python scripts/import_graph.py --out docs/architecture.svg

# The information content table shipped with the package (explain/data), after a change to the
# vendored WordNet or to explain.similarity.SIMILARITY_CODE_VERSION (a test says when).
ic: $(STAMP)
	$(BIN)/python scripts/build_ic.py

# The WordNet noun graph and its meronym links shipped with the package (core/data), which queries and
# error types read without NLTK, after a change to the vendored WordNet or to core.wordgraph.GRAPH_LAYOUT_VERSION
# or core.meronyms.MERONYM_LAYOUT_VERSION (a test says when).
wordgraph: $(STAMP)
	$(BIN)/python scripts/build_wordgraph.py
	$(BIN)/python scripts/build_meronyms.py

# Debian's Chromium and ChromeDriver for the browser test. Installed when missing and we are
# root on a Debian-like system; otherwise the browser test is skipped and says why.
browser-deps:
	@if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  (apt-get update -q && apt-get install -y -q --no-install-recommends chromium chromium-driver) >/dev/null \
	  || echo "warning: could not install chromium; the browser test will be skipped"; \
	else echo "note: chromium/chromedriver missing and not root; the browser test will be skipped"; fi

# Rebuild the vendored WordNet 3.0 corpus as Princeton released it (scripts/build_wordnet.py):
# Princeton's lexicographer files from Debian's source package (needs deb-src lines in
# /etc/apt/sources.list.d), compiled with Debian's wordnet-grind (installed when root).
wordnet:
	@command -v grind >/dev/null || { [ "$$(id -u)" = 0 ] && apt-get install -y -q --no-install-recommends wordnet-grind >/dev/null; } \
	  || { echo "error: grind is missing: apt-get install wordnet-grind" >&2; exit 2; }
	@mkdir -p build/wordnet-src
	@ls build/wordnet-src/wordnet_3.0.orig.tar.gz >/dev/null 2>&1 || (cd build/wordnet-src && apt-get source --download-only -q wordnet) \
	  || { echo "error: could not fetch WordNet's source package: add deb-src lines to /etc/apt/sources.list.d and run apt-get update" >&2; exit 2; }
	$(BIN)/python scripts/build_wordnet.py

clean-venv:
	rm -rf $(VENV)
