"""The library's import graph, read from the code (AST): every import counts, those inside
functions and under ``if TYPE_CHECKING:`` included, since each is a dependency a reader must follow.

- :func:`module_graph`: modules of ``core``, the stages, ``pages``, ``wildlens`` and ``app.py``
  as nodes (dotted names; a package is its ``__init__``), one edge per module imported, with the
  line numbers of the imports. ``from a.b import c`` is an edge to ``a.b.c`` when that is a
  module, else to ``a.b``; importing ``a.b.c`` is an edge to it alone, not to ``a`` and ``a.b``
  (whose ``__init__`` Python runs first: a package's ``__init__`` is checked as its own module).
- :func:`import_cycles`: the cycles, one per strongly connected component, each with the lines
  that close it; ``tests/core/test_architecture.py`` requires none.
- ``python scripts/import_graph.py [--out FILE.svg]`` (``make architecture``) draws the graph:
  one column per layer (a module sits right of everything it imports), one colour per package,
  the README's Architecture picture.
"""
from __future__ import annotations

import argparse
import ast
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("core", "crawl", "classify", "explain", "probe", "pages", "wildlens")


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def library_files(root: Path = ROOT, packages=PACKAGES) -> list[Path]:
    files = [root / "app.py"] if (root / "app.py").exists() else []
    for package in packages:
        if (root / package).is_dir():
            files += sorted((root / package).rglob("*.py"))
    return files


def _imports(path: Path, module: str, known: set[str]) -> list[tuple[int, str]]:
    """(line, imported library module) of every import in ``path``."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]

    def resolve(name: str) -> str | None:  # the longest prefix that is a library module
        parts = name.split(".")
        while parts:
            if ".".join(parts) in known:
                return ".".join(parts)
            parts.pop()
        return None

    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, r) for a in node.names if (r := resolve(a.name))]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from the file's package, one level up per extra dot
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            for alias in node.names:  # the name itself when it is a module, else the module it comes from
                if target := resolve(f"{source}.{alias.name}"):
                    found.append((node.lineno, target))
    return found


def module_graph(root: Path = ROOT, packages=PACKAGES) -> nx.DiGraph:
    """Modules as nodes (attribute ``path``), imports as edges (attribute ``lines``)."""
    files = {_module_name(p, root): p for p in library_files(root, packages)}
    graph = nx.DiGraph()
    for module, path in files.items():
        graph.add_node(module, path=path.relative_to(root).as_posix())
    for module, path in files.items():
        for line, target in _imports(path, module, set(files)):
            if target == module:
                continue
            if graph.has_edge(module, target):
                graph.edges[module, target]["lines"].append(line)
            else:
                graph.add_edge(module, target, lines=[line])
    return graph


def import_cycles(graph: nx.DiGraph) -> list[str]:
    """One line per import cycle: 'a.py:3 -> b.py:10 -> a' (each module's import that leads on)."""
    out = []
    for component in sorted(nx.strongly_connected_components(graph), key=min):
        if len(component) < 2:
            continue
        cycle = nx.find_cycle(graph.subgraph(component), source=min(component))
        steps = [f"{graph.nodes[a]['path']}:{graph.edges[a, b]['lines'][0]}" for a, b in cycle]
        out.append(" -> ".join(steps) + f" -> {cycle[0][0]} ({len(component)} modules in the cycle)")
    return out


def group(module: str) -> str:
    """The box a module is drawn in: its package, or its sub-package of ``classify``."""
    parts = module.split(".")
    if parts[0] == "classify" and (len(parts) > 2 or module in CLASSIFY_SUBPACKAGES):
        return ".".join(parts[:2])
    return parts[0] if len(parts) > 1 or parts[0] in PACKAGES else "app"


CLASSIFY_SUBPACKAGES = ("classify.models", "classify.engine", "classify.zeroshot")
COLOURS = {"core": "#4c72b0", "crawl": "#55a868", "classify": "#c44e52", "classify.models": "#dd8452",
           "classify.engine": "#8172b3", "classify.zeroshot": "#937860", "explain": "#da8bc3", "probe": "#8c8c8c",
           "pages": "#ccb974", "wildlens": "#64b5cd", "app": "#000000"}


def package_graph(graph: nx.DiGraph) -> nx.DiGraph:
    """The module graph folded into its boxes (:func:`group`): an edge per pair of boxes with the
    number of imports between them; node attribute ``modules``."""
    folded = nx.DiGraph()
    for module in graph:
        folded.add_node(group(module))
        folded.nodes[group(module)].setdefault("modules", []).append(module)
    for a, b in graph.edges:
        ga, gb = group(a), group(b)
        if ga != gb:
            count = folded.edges[ga, gb]["imports"] + 1 if folded.has_edge(ga, gb) else 1
            folded.add_edge(ga, gb, imports=count)
    return folded


def draw(graph: nx.DiGraph, out: Path) -> None:
    """The packages as boxes listing their modules, in layers from the bottom (``core``, imports
    nothing) up (a box sits above every box it imports), arrows pointing at what is imported."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    # Text as text (searchable, 1/3 the size) and fixed element ids: the same code draws the same bytes.
    plt.rcParams.update({"svg.fonttype": "none", "svg.hashsalt": "wildlens"})
    folded = package_graph(graph)
    # Packages may import each other through different modules (pages.server -> wildlens.sample,
    # wildlens.cli -> pages.launcher: no module cycle); such a group shares a layer.
    condensed = nx.condensation(folded)
    order = list(COLOURS)
    layers = [sorted((g for c in generation for g in condensed.nodes[c]["members"]),
                     key=lambda g: order.index(g) if g in order else 99)
              for generation in reversed(list(nx.topological_generations(condensed)))]
    width = max(len(layer) for layer in layers)
    fig, ax = plt.subplots(figsize=(3.3 * width, 2.6 * len(layers)))
    centre = {}
    for level, layer in enumerate(layers):
        for i, name in enumerate(layer):
            x = (i + 0.5) * width / len(layer)
            centre[name] = (x, level * 2.6)
    for a, b in folded.edges:
        (xa, ya), (xb, yb) = centre[a], centre[b]
        ax.annotate("", xy=(xb, yb + 0.55), xytext=(xa, ya - 0.55),
                    arrowprops=dict(arrowstyle="->", color="#999999", lw=0.8,
                                    shrinkA=2, shrinkB=2, connectionstyle="arc3,rad=0.05"))
    for name, (x, y) in centre.items():
        modules = sorted(folded.nodes[name]["modules"])
        short = [m[len(name) + 1:] if m.startswith(name + ".") else ("app.py" if m == "app" else "__init__") if m == name else m for m in modules]
        lines = [", ".join(short[i:i + 3]) for i in range(0, len(short), 3)]
        ax.text(x, y + 0.25, name + "/" if name != "app" else "app.py", fontsize=10, weight="bold", ha="center",
                va="bottom", color="white",
                bbox=dict(boxstyle="round,pad=0.3", fc=COLOURS.get(name, "#444444"), ec="none"))
        ax.text(x, y + 0.15, "\n".join(lines), fontsize=5.6, ha="center", va="top", color="#222222",
                bbox=dict(boxstyle="round,pad=0.3", fc="#f6f6f6", ec=COLOURS.get(name, "#444444"), lw=0.8))
    # Only the packages, their modules and which package imports which are drawn (no counts), so the
    # picture changes when the layers do, not with every import added inside them.
    ax.set_title("WildLens import graph by package: arrows point at what is imported; each box sits above every box "
                 "it imports; no module imports another that imports it back (scripts/import_graph.py, "
                 "make architecture)", fontsize=9, loc="left")
    ax.set_xlim(-0.2, width + 0.2)
    ax.set_ylim(-1.8, 2.6 * len(layers) - 1.2)
    ax.axis("off")
    fig.savefig(out, format=out.suffix.lstrip(".") or "svg", bbox_inches="tight",
                metadata={"Date": None} if out.suffix == ".svg" else None)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(ROOT / "docs" / "architecture.svg"), help="SVG (or PNG) to write")
    args = parser.parse_args(argv)
    graph = module_graph()
    cycles = import_cycles(graph)
    if cycles:
        print("error: import cycles (break them before drawing the layers):\n  " + "\n  ".join(cycles))
        return 2
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    draw(graph, out)
    print(f"{out}: {graph.number_of_nodes()} modules, {graph.number_of_edges()} imports, "
          f"{1 + max(nx.dag_longest_path_length(graph), 0)} layers")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
