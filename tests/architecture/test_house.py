"""The layout shows the architecture (docs/explanation/architecture.md): no import circle
between modules or between packages, every package on one floor with its imports running down
the floors, no module over 400 lines, no import of another module's private name. Each
test fails naming what is out of place."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"
MAX_LINES = 400


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(SRC.rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _imports(path: Path, name: str) -> list[tuple[str, list[str]]]:
    """(module, names) of every import that runs (``if TYPE_CHECKING:`` blocks excepted),
    module level and inside functions; relative imports resolved."""
    tree = ast.parse(path.read_text())
    skip = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
            and "TYPE_CHECKING" in ast.unparse(node.test) for b in node.body for n in ast.walk(b)}
    base = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    out = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            out += [(a.name, []) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            if node.level:
                mod = ".".join(base[: len(base) - node.level + 1] + ([mod] if mod else []))
            out.append((mod, [a.name for a in node.names]))
    return out


def _graph() -> dict[str, set[str]]:
    mods = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in mods.items():
        found = set()
        for mod, names in _imports(path, name):
            found.add(mod)
            found.update(f"{mod}.{n}" for n in names)
        # a package's own submodules import their package's names freely (its __init__ runs
        # first); an import of an ancestor package is not an edge of the layering
        graph[name] = {m for m in found if m in mods and m != name
                       and not name.startswith(m + ".")}
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of two or more modules (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    x = stack.pop()
                    on.discard(x)
                    comp.append(x)
                    if x == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def test_no_import_circle() -> None:
    graph = _graph()
    circles = _circles(graph)
    described = ["circle: " + ", ".join(c) + " (" + "; ".join(
        f"{a} -> {b}" for a in c for b in sorted(graph[a]) if b in c) + ")" for c in circles]
    assert not described, "\n".join(described)


def test_circle_detection_finds_a_circle() -> None:
    # the test above cannot pass vacuously
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _circles({"a": {"b"}, "b": set()}) == []


def test_no_module_over_400_lines() -> None:
    long = [f"{p.relative_to(SRC.parent)}: {n} lines" for p in _modules().values()
            if (n := len(p.read_text().splitlines())) > MAX_LINES]
    assert not long, f"modules over {MAX_LINES} lines (split them by idea):\n" + "\n".join(long)


def test_no_private_name_imported_from_another_module() -> None:
    mods = _modules()
    found = []
    for name, path in mods.items():
        for mod, names in _imports(path, name):
            if mod.split(".")[0] != "specsim" or mod == name:
                continue
            found += [f"{path.relative_to(SRC.parent)}: from {mod} import {n}" for n in names
                      if n.startswith("_") and not n.startswith("__")]
            if any(part.startswith("_") and not part.startswith("__")
                   for part in mod.split(".")):
                found.append(f"{path.relative_to(SRC.parent)}: import of private module {mod}")
    assert not found, "private names imported from another module:\n" + "\n".join(found)


# The floors of docs/explanation/architecture.md, top first: a module's floor is that of the
# longest prefix naming it. Every import runs to the same floor or one below. A package sits on
# one floor (its own entry); only its command-line modules sit above it, on the cli floor.
LAYERS = [
    ("cli", ["specsim.cli", "specsim.__main__", "specsim.stage_cli", "specsim.record_cli",
             "specsim.configcheck", "specsim.configdoc", "specsim.acceptance.cli",
             "specsim.runfiles"]),
    ("tiers", ["specsim.pairs"]),
    ("checks", ["specsim.checks"]),
    ("integrity", ["specsim.integrity", "specsim.resume", "specsim.tablediff"]),
    ("analyses", ["specsim.tables", "specsim.figures", "specsim.report", "specsim.declare",
                  "specsim.stage_rules",
                  "specsim.outputs", "specsim.acceptance"]),
    ("collect", ["specsim.collect"]),
    ("config", ["specsim.config"]),
    ("work", ["specsim.work"]),
    ("grid", ["specsim.job", "specsim.grid"]),
    ("measures", ["specsim.measures"]),
    ("families", ["specsim.families", "specsim.traces"]),
    ("schemes", ["specsim.schemes"]),
    ("engine", ["specsim.engine"]),
    ("ground", ["specsim", "specsim.verify", "specsim.exact", "specsim.models", "specsim.io",
                "specsim.sampling", "specsim.stats", "specsim.precision", "specsim.timing",
                "specsim.errors", "specsim.ngram", "specsim.process", "specsim.resources",
                "specsim.configfile", "specsim.realtext_settings", "specsim.stage_settings",
                "specsim.costs",
                "specsim.intensity", "specsim.argtypes", "specsim.trace_limits",
                "specsim.seeds"]),
]
CLI = [name for name, _ in LAYERS].index("cli")  # a package's own command-line modules live here


def _floor(module: str, layers: list[tuple[str, list[str]]] = LAYERS) -> int:
    named = [(len(p), i) for i, (_, prefixes) in enumerate(layers) for p in prefixes
             if module == p or module.startswith(p + ".")]
    return max(named)[1]


def _package(module: str) -> str:
    """The package a module belongs to, one level under ``specsim`` (a top-level module is its
    own package), as ``../shared/tools/import_cycles.py --packages`` folds them."""
    return ".".join(module.split(".")[:2])


def _package_graph(graph: dict[str, set[str]]) -> dict[str, dict[str, list[str]]]:
    """package -> imported package -> the module imports that tie them."""
    out: dict[str, dict[str, list[str]]] = {}
    for a in sorted(graph):
        out.setdefault(_package(a), {})
        for b in sorted(graph[a]):
            if _package(b) != _package(a):
                out[_package(a)].setdefault(_package(b), []).append(f"{a} -> {b}")
    return out


def test_imports_run_down_the_layers() -> None:
    graph = _graph()
    up = [f"{a} ({LAYERS[_floor(a)][0]}) -> {b} ({LAYERS[_floor(b)][0]})"
          for a in sorted(graph) for b in sorted(graph[a]) if _floor(b) < _floor(a)]
    assert not up, "imports that run up a layer:\n" + "\n".join(up)


def test_every_package_is_placed_on_a_floor() -> None:
    # no package lands on the ground floor by default: a new one is placed in LAYERS
    named = {p for _, prefixes in LAYERS for p in prefixes}
    unplaced = sorted({_package(m) for m in _modules()} - named)
    assert not unplaced, "packages no LAYERS entry names (place them on a floor):\n" + \
        "\n".join(unplaced)


def _off_floor(modules: list[str], layers: list[tuple[str, list[str]]] = LAYERS) -> list[str]:
    """Modules whose floor is neither their package's nor the cli floor."""
    return [f"{m} ({layers[_floor(m, layers)][0]}) in {_package(m)} "
            f"({layers[_floor(_package(m), layers)][0]})" for m in sorted(modules)
            if _floor(m, layers) not in (_floor(_package(m), layers), CLI)]


def test_each_package_sits_on_one_floor() -> None:
    off = _off_floor(list(_modules()))
    assert not off, ("modules off their package's floor (move them to a package of that floor):"
                     "\n" + "\n".join(off))


def test_no_package_circle() -> None:
    packages = _package_graph(_graph())
    circles = _circles({a: set(targets) for a, targets in packages.items()})
    described = ["package circle: " + ", ".join(c) + " (" + "; ".join(
        f"{a} -> {b}: {', '.join(packages[a][b][:3])}" for a in c for b in sorted(packages[a])
        if b in c) + ")" for c in circles]
    assert not described, "\n".join(described)


def test_package_imports_run_down_the_layers() -> None:
    up = [f"{a} ({LAYERS[_floor(a)][0]}) -> {b} ({LAYERS[_floor(b)][0]}): {ties[0]}"
          for a, targets in _package_graph(_graph()).items() for b, ties in targets.items()
          if _floor(b) < _floor(a)]
    assert not up, "packages importing a package on a higher floor:\n" + "\n".join(up)


def test_package_checks_can_fail() -> None:
    # a circle between two packages made of imports that are no circle between modules, an
    # upward package import, and a module off its package's floor are all seen
    graph = {"specsim.tables.a": {"specsim.schemes.b"}, "specsim.schemes.b": set(),
             "specsim.schemes.c": {"specsim.tables.d"}, "specsim.tables.d": set()}
    assert _circles(graph) == []
    packages = _package_graph(graph)
    assert _circles({a: set(t) for a, t in packages.items()}) == [
        ["specsim.schemes", "specsim.tables"]]
    assert [(a, b) for a, t in packages.items() for b in t if _floor(b) < _floor(a)] == [
        ("specsim.schemes", "specsim.tables")]
    tiers_with_ground = [(n, [*p, "specsim.pairs.realtext.settings"] if n == "ground" else p)
                         for n, p in LAYERS]
    assert _off_floor(["specsim.pairs.realtext.settings", "specsim.pairs.realtext.cli",
                       "specsim.pairs.realtext.pairs"], tiers_with_ground) == [
        "specsim.pairs.realtext.settings (ground) in specsim.pairs (tiers)"]
