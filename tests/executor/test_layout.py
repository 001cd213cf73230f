"""The executor's layout: one concept per module, backends in their own sub-packages.

- no import cycle among the executor's modules (imports inside functions count: a lazy
  import that hides a loop is still a loop);
- no module over 600 lines;
- only ``executor/browser/`` imports playwright, only ``executor/desktop/`` imports
  pyautogui, mss and python-xlib;
- each package's ``__all__`` is exactly its public names (computed from ``vars()``);
- the words of the shared vocabulary are the very same objects here;
- the old flat paths still re-export what moved, for one release.
"""

from __future__ import annotations

import ast
import importlib
import types
from pathlib import Path

import pytest

import handrail
from handrail.executor._errors import REFUSAL_ERRORS, ActionRefusedError

EXECUTOR = Path(__file__).resolve().parents[2] / "executor"
BACKEND_LIBRARIES = {
    "playwright": "browser",
    "Xlib": "desktop",
    "pyautogui": "desktop",
    "pyscreeze": "desktop",
    "mss": "desktop",
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(EXECUTOR).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(["handrail", "executor", *parts])


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(EXECUTOR.rglob("*.py"))}


def _imports(path: Path, known: frozenset[str] = frozenset()) -> list[str]:
    """Every module ``path`` imports, wherever in the file, except under TYPE_CHECKING.

    ``from package import submodule`` counts as an import of the submodule (of ``known``).
    """
    tree = ast.parse(path.read_text(), str(path))
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(n) for n in ast.walk(node))
    found: list[str] = []
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            submodules = [f"{node.module}.{alias.name}" for alias in node.names]
            found += [m for m in submodules if m in known] or [node.module]
        elif (
            isinstance(node, ast.Call)
            and ast.unparse(node.func).endswith("import_module")
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            found.append(str(node.args[0].value))
    return found


def test_no_import_cycle_among_executor_modules() -> None:
    modules = _modules()
    known = frozenset(modules)
    graph = {
        name: sorted({m for m in _imports(path, known) if m in known and m != name}) for name, path in modules.items()
    }
    done: set[str] = set()

    def visit(name: str, stack: list[str]) -> None:
        if name in stack:
            cycle = [*stack[stack.index(name) :], name]
            pytest.fail("import cycle: " + " -> ".join(cycle))
        if name in done:
            return
        for dep in graph[name]:
            visit(dep, [*stack, name])
        done.add(name)

    for name in graph:
        visit(name, [])


def test_no_module_over_600_lines() -> None:
    sizes = {name: len(path.read_text().splitlines()) for name, path in _modules().items()}
    assert {name: n for name, n in sizes.items() if n > 600} == {}


def test_only_each_backend_imports_its_libraries() -> None:
    wrong = []
    for name, path in _modules().items():
        for imported in _imports(path):
            home = BACKEND_LIBRARIES.get(imported.split(".")[0])
            if home is not None and not name.startswith(f"handrail.executor.{home}."):
                wrong.append(f"{name} imports {imported}")
    assert wrong == []


@pytest.mark.parametrize(
    "package",
    ["handrail.executor", "handrail.executor.browser", "handrail.executor.desktop", "handrail.executor.testing"],
)
def test_all_is_exactly_the_public_names(package: str) -> None:
    module = importlib.import_module(package)
    public = {
        name
        for name, value in vars(module).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType) and name != "annotations"
    }
    assert sorted(module.__all__) == sorted(public)
    assert len(set(module.__all__)) == len(module.__all__)


def test_the_vocabulary_is_shared_not_copied() -> None:
    import handrail.executor as executor
    from handrail.executor import _models

    for name in ("ActionKind", "Outcome", "Evidence", "Verdict", "Reason"):
        assert getattr(_models, name) is getattr(handrail, name), name
    for name in ("ActionKind", "Outcome", "Evidence", "Verdict", "Reason"):
        assert getattr(executor, name) is getattr(handrail, name), name


def test_every_refusal_reason_has_its_error() -> None:
    refusals = {r for r in handrail.Reason if r not in (handrail.Reason.ALLOW, handrail.Reason.UNAUTHENTICATED)}
    assert set(REFUSAL_ERRORS) == refusals
    for reason, cls in REFUSAL_ERRORS.items():
        assert issubclass(cls, ActionRefusedError) and cls.reason is reason


# Paths of the flat layout that code outside the executor imported: kept for one release.
MOVED = {
    "handrail.executor._x11": ("handrail.executor.desktop", ["X11", "Keyboard", "Rect", "WindowGoneError"]),
    "handrail.executor._desktop": ("handrail.executor.desktop", ["DesktopSurface", "bind_window", "open_desktop"]),
    "handrail.executor._browser": ("handrail.executor.browser", ["BrowserHost", "CHROMIUM_ARGS", "chromium_path"]),
    "handrail.executor._pagescript": (
        "handrail.executor.browser._pagescript",
        ["ARM_POINTER", "DISARM_POINTER", "PICK_SELECTOR", "READ_CLOCK"],
    ),
}


@pytest.mark.parametrize("old", sorted(MOVED))
def test_old_paths_still_reexport_what_moved(old: str) -> None:
    new, names = MOVED[old]
    old_module, new_module = importlib.import_module(old), importlib.import_module(new)
    for name in names:
        assert getattr(old_module, name) is getattr(new_module, name), name
