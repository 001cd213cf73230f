"""The layers of the ledger, the scenario harness and the CLI: read from the source.

Layers, bottom up: proto < authz < recorder < executor < scenarios < demos/CLI. Every
import counts, including one inside a function: importing a neighbour "at call time" to
hide a loop is still a loop.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = {
    "handrail": ROOT / "handrail",
    "handrail.proto": ROOT / "proto",
    "handrail.authz": ROOT / "authz",
    "handrail.recorder": ROOT / "recorder",
    "handrail.executor": ROOT / "executor",
    "handrail.scenarios": ROOT / "scenarios",
}
OURS = ("handrail.recorder", "handrail.scenarios", "handrail.demos", "handrail.cli", "handrail._")
# Kept for one release (tests/scenarios/test_old_paths.py); nothing in the recorder imports it.
DEPRECATED_ALIASES = {"handrail.recorder.pytest_plugin"}


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package, folder in FOLDERS.items():
        for path in folder.rglob("*.py"):
            parts = path.relative_to(folder).with_suffix("").parts
            if (
                parts
                and parts[0] in ("handrail", "proto", "authz", "recorder", "executor", "scenarios")
                and package == "handrail"
            ):
                continue  # another package's folder, never below handrail/
            name = ".".join((package, *parts))
            found[name.removesuffix(".__init__")] = path
    return found


MODULES = _modules()


def _imports(name: str, path: Path) -> Iterator[str]:
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".")
                base = base if is_package else base[:-1]
                base = base[: len(base) - node.level + 1]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            targets = [
                f"{module}.{alias.name}" if f"{module}.{alias.name}" in MODULES else module for alias in node.names
            ]
        else:
            continue
        for target in targets:
            while target and target not in MODULES:
                target = target.rpartition(".")[0]
            if target and target != name:
                yield target


GRAPH = {name: set(_imports(name, path)) for name, path in MODULES.items()}


def test_the_recorder_imports_neither_the_executor_nor_the_scenarios() -> None:
    bad = [
        (module, target)
        for module, targets in GRAPH.items()
        if module.startswith("handrail.recorder") and module not in DEPRECATED_ALIASES
        for target in targets
        if target.startswith(("handrail.executor", "handrail.scenarios"))
    ]
    assert not bad


def test_the_scenario_harness_reaches_executor_internals_in_one_place() -> None:
    bad = [
        (module, target)
        for module, targets in GRAPH.items()
        if module.startswith(("handrail.scenarios", "handrail.demos")) and module != "handrail.scenarios._x11"
        for target in targets
        if target.startswith("handrail.executor._")
    ]
    assert not bad


def test_no_import_cycle_through_our_modules() -> None:
    def cycle_from(start: str) -> list[str] | None:
        stack: list[tuple[str, list[str]]] = [(start, [start])]
        seen: set[str] = set()
        while stack:
            node, path = stack.pop()
            for target in GRAPH.get(node, ()):
                if target == start:
                    return [*path, start]
                if target not in seen:
                    seen.add(target)
                    stack.append((target, [*path, target]))
        return None

    cycles = [c for m in GRAPH if m.startswith(OURS) and m not in DEPRECATED_ALIASES if (c := cycle_from(m))]
    assert not cycles, "\n".join(" -> ".join(c) for c in cycles)
