"""The layout of handrail.authz: the module map in its docstring is the import order, there
are no cycles, nothing from a higher layer is imported, and no module is over 600 lines."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import handrail.authz

PACKAGE = Path(handrail.authz.__file__).parent
HIGHER = ("handrail.executor", "handrail.recorder", "handrail.scenarios", "handrail.cli", "handrail._demo")
MAX_LINES = 600


def _modules() -> dict[str, Path]:
    return {p.stem: p for p in sorted(PACKAGE.glob("*.py"))}


def _imports(path: Path) -> set[str]:
    """Every module ``path`` imports, at the top or inside a function."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
    return found


def _siblings(path: Path) -> set[str]:
    modules = _modules()
    return {
        name.split(".")[2] for name in _imports(path) if name.count(".") >= 2 and name.startswith("handrail.authz.")
    } & (modules.keys() - {"__init__"})


def _documented_order() -> list[str]:
    doc = handrail.authz.__doc__ or ""
    names = re.findall(r"\b(_[a-z_]+)\b", doc.split("::", 1)[1])
    return [n for n in dict.fromkeys(names) if n in _modules()]


def test_every_module_is_on_the_map() -> None:
    assert set(_documented_order()) == set(_modules()) - {"__init__"}


def test_each_module_imports_only_modules_above_it_on_the_map() -> None:
    order = {name: i for i, name in enumerate(_documented_order())}
    for name, path in _modules().items():
        if name == "__init__":
            continue
        below = sorted(dep for dep in _siblings(path) if order[dep] >= order[name])
        assert not below, f"{name} imports {below}, which the map in handrail.authz's docstring puts below it"
