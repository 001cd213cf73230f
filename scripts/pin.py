"""Write ``constraints.txt``: the exact version of every package ``handrail[dev]`` installs.

``scripts/bootstrap.sh`` installs with these constraints, so a fresh machine (CI's among
them) gets the very set the suite last passed with, not whatever the package index holds
that day: a new release of pytest, pydantic or Playwright (whose aria snapshot the executor
parses) reaches CI only once it is pinned here. Run it after a change to pyproject's
dependencies, or to take newer releases (``pip install -U ...`` first), then run the suite::

    python3 scripts/pin.py            # rewrite constraints.txt from what is installed
    python3 scripts/pin.py --check    # exit 1 when constraints.txt is not what it would write

The set is the installed closure of ``handrail[dev]``: its requirements and theirs, with
extras and environment markers evaluated here (Linux, this Python).
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import re
import sys
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent
CONSTRAINTS = ROOT / "constraints.txt"
HEADER = """\
# The exact versions scripts/bootstrap.sh installs (pip's --constraint): the installed
# closure of handrail[dev] the test suite last passed with. Written by scripts/pin.py;
# rewrite it with `python3 scripts/pin.py` after changing pyproject's dependencies.
"""


def canonical(name: str) -> str:
    """A distribution name as pip compares them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def closure(root: str = "handrail", extras: tuple[str, ...] = ("dev",)) -> dict[str, str]:
    """{canonical name: installed version} of everything ``root[extras]`` requires, itself left out.

    Raises:
        md.PackageNotFoundError: a requirement is not installed (run scripts/bootstrap.sh).
    """
    wanted: dict[str, set[str]] = {}
    todo: list[tuple[str, frozenset[str]]] = [(root, frozenset(extras))]
    while todo:
        name, with_extras = todo.pop()
        key = canonical(name)
        known = wanted.get(key)
        if known is not None and with_extras <= known:
            continue
        wanted.setdefault(key, set()).update(with_extras)
        for line in md.distribution(name).requires or []:
            req = Requirement(line)
            environments = [{"extra": e} for e in sorted(with_extras)] or [{"extra": ""}]
            if req.marker is None or any(req.marker.evaluate(env) for env in environments):
                todo.append((req.name, frozenset(req.extras)))
    wanted.pop(canonical(root))
    return {key: md.version(key) for key in sorted(wanted)}


def render(pins: dict[str, str]) -> str:
    return HEADER + "".join(f"{name}=={version}\n" for name, version in pins.items())


def read(path: Path = CONSTRAINTS) -> dict[str, str]:
    """The pins of a constraints file: {canonical name: version}.

    Raises:
        ValueError: a line that is neither a comment nor ``name==version`` (its number named).
    """
    pins: dict[str, str] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        name, sep, version = text.partition("==")
        if not sep or not name.strip() or not version.strip():
            raise ValueError(f"{path}:{number}: expected name==version, got {line!r}")
        pins[canonical(name.strip())] = version.strip()
    return pins


def problems(pins: dict[str, str], installed: dict[str, str]) -> list[str]:
    """How ``pins`` (a constraints file's) disagree with ``installed`` (:func:`closure`):
    one line per package, empty when they agree."""
    out = []
    for name in sorted(installed.keys() | pins.keys()):
        have, pinned = installed.get(name), pins.get(name)
        if pinned is None:
            out.append(f"{name} {have} is installed but not pinned")
        elif have is None:
            out.append(f"{name}=={pinned} is pinned but nothing requires it")
        elif have != pinned:
            out.append(f"{name} {have} is installed, {pinned} is pinned")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only compare; exit 1 when they differ")
    args = parser.parse_args()
    try:
        installed = closure()
    except md.PackageNotFoundError as exc:
        print(f"pin: {exc.args[0]} is not installed: run bash scripts/bootstrap.sh first", file=sys.stderr)
        return 1
    if args.check:
        try:
            found = problems(read(), installed)
        except (OSError, ValueError) as exc:
            print(f"pin: {exc}", file=sys.stderr)
            return 1
        for line in found:
            print(f"pin: {line}", file=sys.stderr)
        return 1 if found else 0
    CONSTRAINTS.write_text(render(installed), encoding="utf-8")
    print(f"pin: wrote {len(installed)} pins to {CONSTRAINTS.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
