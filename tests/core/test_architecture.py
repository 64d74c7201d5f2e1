"""The import rule, read from the code itself (AST), so a forbidden edge fails here and not in review.

- ``core/`` imports no stage (nor pages, app, wildlens or tests);
- a stage (``crawl/``, ``classify/``, ``explain/``, ``probe/``) imports ``core/`` and itself only;
- ``wildlens/``, ``app.py`` and ``pages/`` may import every stage: they wire stages together (a
  stage's own ``__main__.py`` is a stage module too: ``python -m classify`` chains to
  ``python -m explain metrics`` as a process, not an import);
- Streamlit is imported only by ``app.py`` and ``pages/``;
- no product module imports ``tests`` or names a test double;
- no import cycle between any two modules of the library, imports inside functions and under
  ``TYPE_CHECKING`` included (``scripts/import_graph.py`` reads the graph; a cycle means neither
  side can be understood, tested or replaced alone).
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from scripts.import_graph import import_cycles, module_graph
from tests.conftest import ROOT

STAGES = ("crawl", "classify", "explain", "probe")
LAYER_ABOVE = ("pages", "app", "wildlens")
PRODUCT = ("core", *STAGES, *LAYER_ABOVE)


def imported_modules(path: Path, package: str) -> list[tuple[int, str]]:
    """(line, top-level module) of every import in a file, those inside functions included;
    a relative import resolves to the file's own package."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name.split(".")[0]) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            found.append((node.lineno, package if node.level else (node.module or "").split(".")[0]))
    return found


def owner(path: Path, root: Path) -> str:
    """The top-level package (or 'app') a file belongs to."""
    rel = path.relative_to(root)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def allowed(source: str, path: Path, target: str) -> bool:
    if target == "streamlit":
        return source in ("app", "pages")
    if target == "tests":
        return False
    if target not in PRODUCT or target == source:
        return True
    if source == "core":
        return False
    if source in STAGES:
        return target == "core"
    return True  # pages, app.py, wildlens: the layer above the stages


def violations(root: Path) -> list[str]:
    files = [root / "app.py"] if (root / "app.py").exists() else []
    for package in PRODUCT:
        if (root / package).is_dir():
            files += sorted((root / package).rglob("*.py"))
    out = []
    for path in files:
        source = owner(path, root)
        for line, target in imported_modules(path, source):
            if not allowed(source, path, target):
                out.append(f"{path.relative_to(root)}:{line} imports {target}")
        if source in ("core", *STAGES) and "test double" in path.read_text().lower().replace("-", " "):
            out.append(f"{path.relative_to(root)} mentions test doubles (register them from tests/)")
    return out


def test_the_product_keeps_the_import_rule():
    assert violations(ROOT) == []


def test_every_stage_and_core_is_checked():
    checked = {owner(p, ROOT) for package in PRODUCT if (ROOT / package).is_dir() for p in (ROOT / package).rglob("*.py")}
    assert {"core", "crawl", "classify", "explain", "probe", "pages", "wildlens"} <= checked


@pytest.mark.parametrize("package, file, code, expected", [
    ("classify", "__main__.py", "from explain.artefact import refresh_metrics\n",
     "classify/__main__.py:1 imports explain"),  # an entry point is no exception
    ("core", "runstore.py", "from explain.metrics import x\n", "core/runstore.py:1 imports explain"),
    ("classify", "preprocess.py", "def f():\n    import crawl.validate\n", "classify/preprocess.py:2 imports crawl"),
    ("explain", "metrics.py", "import streamlit as st\n", "explain/metrics.py:1 imports streamlit"),
    ("crawl", "store.py", "from tests.crawl import fake_engine\n", "crawl/store.py:1 imports tests"),
    ("classify", "registry.py", "# a test double for shapes\n", "classify/registry.py mentions test doubles (register them from tests/)"),
])
def test_a_forbidden_edge_is_reported(tmp_path, package, file, code, expected):
    (tmp_path / package).mkdir()
    (tmp_path / package / file).write_text(code)
    assert violations(tmp_path) == [expected]


@pytest.mark.parametrize("package, file, code", [
    ("pages", "common.py", "import streamlit\nfrom classify.models.lookup import get_model\n"),
    ("wildlens", "sample.py", "from crawl.sample_photos import x\nfrom classify.models.registry import y\n"),
    ("explain", "metrics.py", "from core.runstore import Run\nfrom .similarity import x\n"),
])
def test_allowed_edges_pass(tmp_path, package, file, code):
    (tmp_path / package).mkdir()
    (tmp_path / package / file).write_text(code)
    assert violations(tmp_path) == []


# Inside classify/, what each sub-package may import besides core/ and itself (the README's table):
# the text side needs no model code, the models need only the text side, the engine both; the
# top (targets, sinks, features, zeroshot_runs, cli) any.
CLASSIFY_LAYERS = {"classify.zeroshot": (), "classify.models": ("classify.zeroshot",),
                   "classify.engine": ("classify.models", "classify.zeroshot")}


def sub_package_violations(graph) -> list[str]:
    out = []
    for a, b, data in graph.edges(data=True):
        source = next((p for p in CLASSIFY_LAYERS if a == p or a.startswith(p + ".")), None)
        if source is None or not b.startswith("classify") or b == source or b.startswith(source + "."):
            continue
        if not any(b == ok or b.startswith(ok + ".") for ok in CLASSIFY_LAYERS[source]):
            out.append(f"{graph.nodes[a]['path']}:{data['lines'][0]} imports {b}")
    return sorted(out)


def test_classify_sub_packages_keep_their_layers():
    assert sub_package_violations(module_graph(ROOT)) == []


@pytest.mark.parametrize("file, code, expected", [
    ("classify/zeroshot/prompts.py", "def f():\n    from classify.models.registry import ModelEntry\n",
     "classify/zeroshot/prompts.py:2 imports classify.models.registry"),
    ("classify/models/zoo.py", "from classify.engine.device import x\n", "classify/models/zoo.py:1 imports classify.engine.device"),
    ("classify/engine/pipeline.py", "import classify.targets\n", "classify/engine/pipeline.py:1 imports classify.targets"),
])
def test_a_sub_package_importing_above_its_layer_is_reported(tmp_path, file, code, expected):
    files = {"classify/__init__.py": "", "classify/targets.py": "", "classify/zeroshot/__init__.py": "",
             "classify/models/__init__.py": "", "classify/models/registry.py": "", "classify/engine/__init__.py": "",
             "classify/engine/device.py": "", file: code}
    assert sub_package_violations(_package(tmp_path, files)) == [expected]


def test_no_two_modules_import_each_other():
    assert import_cycles(module_graph(ROOT)) == []


def test_every_module_of_the_library_is_in_the_graph():
    graph = module_graph(ROOT)
    assert {"app", "core.tables", "classify.models.registry", "classify.engine.dispatch", "classify.zeroshot.classifier",
            "classify.targets", "pages.run_state", "wildlens.cli"} <= set(graph)
    assert graph.has_edge("classify.engine.dispatch", "classify.engine.ray_engine")  # a plain import
    assert graph.has_edge("classify.models.lookup", "classify.models.zoo")  # an import inside a function


def _package(root, files: dict[str, str]):
    for name, code in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(code)
    return module_graph(root)


@pytest.mark.parametrize("files, expected", [
    # two modules, one import hidden in a function
    ({"classify/__init__.py": "", "classify/a.py": "from classify.b import f\n",
      "classify/b.py": "def f():\n    from classify import a\n"},
     ["classify/a.py:1 -> classify/b.py:2 -> classify.a (2 modules in the cycle)"]),
    # relative imports, three modules, one only for type checking
    ({"core/__init__.py": "", "core/x.py": "from .y import Y\n", "core/y.py": "from . import z\nY = 1\n",
      "core/z.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .x import X\n"},
     ["core/x.py:1 -> core/y.py:1 -> core/z.py:3 -> core.x (3 modules in the cycle)"]),
    # across packages: a stage importing the layer above, which imports it back
    ({"pages/__init__.py": "", "pages/common.py": "import probe.linear\n", "probe/__init__.py": "",
      "probe/linear.py": "def g():\n    import pages.common\n"},
     ["pages/common.py:1 -> probe/linear.py:2 -> pages.common (2 modules in the cycle)"]),
])
def test_a_planted_cycle_is_reported_with_the_lines_that_close_it(tmp_path, files, expected):
    assert import_cycles(_package(tmp_path, files)) == expected


def test_a_package_and_its_modules_are_no_cycle(tmp_path):
    """``classify/models/__init__.py`` imports its catalogue, whose modules import
    ``classify.models.registry``: Python runs the package's ``__init__`` first, but an import of
    ``a.b.c`` depends on ``a.b.c`` only (each ``__init__`` is a module of its own)."""
    graph = _package(tmp_path, {"classify/__init__.py": "", "classify/models/__init__.py": "from classify.models import c\n",
                                "classify/models/c.py": "from classify.models.r import E\n",
                                "classify/models/r.py": "E = 1\n"})
    assert import_cycles(graph) == []
    assert set(graph.edges) == {("classify.models", "classify.models.c"), ("classify.models.c", "classify.models.r")}


def test_the_readmes_picture_is_drawn_from_the_code_as_it_is(tmp_path):
    """docs/architecture.svg is what scripts/import_graph.py draws now (same bytes: text as text,
    fixed ids, no date); a module added, moved or newly imported without `make architecture` fails."""
    from scripts.import_graph import draw

    fresh = tmp_path / "architecture.svg"
    draw(module_graph(ROOT), fresh)
    assert fresh.read_bytes() == (ROOT / "docs" / "architecture.svg").read_bytes(), \
        "docs/architecture.svg is out of date: run `make architecture` and commit it"
    assert "classify.engine/" in fresh.read_text() and "dispatch" in fresh.read_text()
