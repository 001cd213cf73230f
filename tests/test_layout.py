"""The layout's rules, computed from the code: layers, no import cycles, module sizes, exports.

- Every package's public names (``vars()`` minus private names and submodules) are its
  ``__all__`` (as httpx's ``test_exported_members.py``), so no list is copied by hand.
- Layers import downwards only: the shared base (``handrail._errors``,
  ``handrail._vocabulary``) < proto < authz < recorder < executor < scenarios < the
  front ends (CLI, demos, console, MCP, adapters).
- No import cycle between modules, counting imports inside functions too: a module that
  imports its neighbour at call time to hide a loop holds a piece of a third module.
- No module over 600 lines outside the generated protobuf code.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import pkgutil
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MAX_LINES = 600

# Layer of a module: the longest matching prefix wins.
LAYERS: dict[str, int] = {
    "handrail": 0,  # the root package: the base error and the vocabulary
    "handrail._errors": 0,
    "handrail._vocabulary": 0,
    "handrail._patterns": 0,
    "handrail._rpc": 0,
    "handrail._dsn": 0,
    "handrail._cpus": 0,
    "handrail._args": 0,
    "handrail._lazy": 0,
    "handrail.proto": 1,
    "handrail.authz": 2,
    "handrail.recorder": 3,
    "handrail.executor": 4,
    "handrail.scenarios": 5,
}
FRONT = 6  # anything else under handrail: CLI, demos, console, MCP, adapters


def _modules() -> dict[str, Path]:
    """Every module of the installed ``handrail`` package, by dotted name.

    The sub-packages live in the repository's top-level folders and are mapped under
    ``handrail.`` by the install, so each is walked from its own ``__path__``.
    """
    found: dict[str, Path] = {}
    roots = ["handrail", *(f"handrail.{p}" for p in ("proto", "authz", "recorder", "executor", "scenarios"))]
    for root in roots:
        package = importlib.import_module(root)
        found[root] = Path(package.__file__ or "")
        for info in pkgutil.walk_packages(package.__path__, root + "."):
            if info.name in found:
                continue
            spec = importlib.util.find_spec(info.name)
            if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
                continue
            found[info.name] = Path(spec.origin)
    return found


MODULES = _modules()


# Kept for one release so that ``-p handrail.recorder.pytest_plugin`` still loads; the one
# import against the layers, and left out of the cycle checks.
DEPRECATED_ALIASES = {"handrail.recorder.pytest_plugin"}


def layer(module: str) -> int:
    if module == "handrail":
        return 0
    best, level = "", FRONT
    for prefix, n in LAYERS.items():
        if prefix != "handrail" and (module == prefix or module.startswith(prefix + ".")) and len(prefix) > len(best):
            best, level = prefix, n
    return level


def _is_package(module: str) -> bool:
    return MODULES[module].name == "__init__.py"


def imports_of(module: str) -> set[str]:
    """The handrail modules ``module`` imports, anywhere in its body."""
    path = MODULES[module]
    tree = ast.parse(path.read_text(), str(path))
    package = module if _is_package(module) else module.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
            out.update(n for n in names if n in MODULES)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not target.startswith("handrail"):
                continue
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                if sub in MODULES:
                    out.add(sub)  # a submodule named in the from-list
                elif target in MODULES:
                    out.add(target)
    out.discard(module)
    return out


GRAPH = {m: imports_of(m) for m in MODULES if m not in DEPRECATED_ALIASES}
for _deps in GRAPH.values():
    _deps -= DEPRECATED_ALIASES


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0

    def visit(v: str) -> None:
        nonlocal counter
        index[v] = low[v] = counter
        counter += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            scc = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                scc.append(w)
                if w == v:
                    break
            if len(scc) > 1:
                found.append(sorted(scc))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycle_between_modules() -> None:
    assert _cycles(GRAPH) == []


def test_no_import_cycle_between_packages() -> None:
    """Between the top-level packages (a sub-package counts as part of its package), and
    the root package's own modules each on its own."""

    def node(module: str) -> str:
        parts = module.split(".")
        if len(parts) >= 2 and f"handrail.{parts[1]}" in LAYERS:
            return ".".join(parts[:2])
        return module if len(parts) <= 2 else ".".join(parts[:2])

    graph: dict[str, set[str]] = {}
    for module, deps in GRAPH.items():
        graph.setdefault(node(module), set()).update(node(d) for d in deps if node(d) != node(module))
    for deps in list(graph.values()):
        for d in deps:
            graph.setdefault(d, set())
    assert _cycles(graph) == []


def test_layers_import_downwards_only() -> None:
    upward = [
        f"{m} (layer {layer(m)}) imports {d} (layer {layer(d)})"
        for m, deps in sorted(GRAPH.items())
        for d in sorted(deps)
        if layer(d) > layer(m)
    ]
    assert upward == []


@pytest.mark.parametrize("library", ["playwright", "pyautogui", "mss", "Xlib"])
def test_each_backend_is_the_only_importer_of_its_libraries(library: str) -> None:
    owner = "handrail.executor.browser" if library == "playwright" else "handrail.executor.desktop"
    importers = []
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom) and not node.level
                else []
            )
            if any(n == library or n.startswith(library + ".") for n in names):
                importers.append(module)
    assert [m for m in importers if not (m == owner or m.startswith(owner + "."))] == []


def _python_files() -> list[Path]:
    skip = {".venv", ".git", "build", ".typecheck", "node_modules"}
    return [p for p in ROOT.rglob("*.py") if not skip.intersection(p.relative_to(ROOT).parts) and "_pb2" not in p.name]


def test_no_module_over_600_lines() -> None:
    long = {str(p.relative_to(ROOT)): n for p in _python_files() if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert long == {}


def _packages() -> list[str]:
    return sorted(m for m in MODULES if _is_package(m))


@pytest.mark.parametrize("name", _packages())
def test_exported_members(name: str) -> None:
    """``__all__`` is exactly the package's public names, computed from ``vars()``."""
    package = importlib.import_module(name)
    public = {
        member
        for member, value in vars(package).items()
        if not member.startswith("_")
        and not isinstance(value, types.ModuleType)
        and member != "annotations"  # from __future__ import annotations
    }
    declared = set(getattr(package, "__all__", ()))
    # A name the package imports on first use (its module ``__getattr__``) is public too:
    # it must resolve.
    lazy = getattr(package, "__getattr__", None)
    public |= {member for member in declared - public if lazy is not None and lazy(member) is not None}
    assert declared - {"__version__"} == public
