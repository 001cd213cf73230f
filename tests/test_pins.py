"""constraints.txt pins every package the suite runs on, at the version installed.

``scripts/bootstrap.sh`` installs with these pins, so CI on a fresh machine runs the very
set this suite passed with. A dependency added to pyproject without a new pin, or an
environment upgraded by hand, fails here with the package named.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import tomllib
from pathlib import Path
from types import ModuleType

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent


def _pin_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("handrail_pin_script", ROOT / "scripts" / "pin.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


pin = _pin_module()


def test_every_installed_package_is_pinned_at_its_version() -> None:
    found = pin.problems(pin.read(), pin.closure())
    assert not found, "run `python3 scripts/pin.py` (or bash scripts/bootstrap.sh):\n" + "\n".join(found)


def test_the_bootstrap_installs_with_the_pins() -> None:
    script = (ROOT / "scripts" / "bootstrap.sh").read_text()
    assert "--constraint constraints.txt" in script
    assert "constraints.txt | sha256sum" in script  # a new pin reinstalls


def test_each_pin_lies_within_pyproject_ranges() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pins = pin.read()
    declared = [Requirement(r) for r in project["dependencies"] + project["optional-dependencies"]["dev"]]
    outside = [
        f"{req.name}=={pins[pin.canonical(req.name)]} is outside {req.specifier}"
        for req in declared
        if not req.specifier.contains(pins[pin.canonical(req.name)], prereleases=True)
    ]
    assert not outside


def test_a_missing_a_stale_and_an_orphan_pin_are_each_named(tmp_path: Path) -> None:
    installed = {"playwright": "1.65.2", "pytest": "9.0.3", "grpcio": "1.85.3"}
    pins = {"playwright": "1.64.1", "grpcio": "1.85.3", "left-pad": "1.0"}
    assert pin.problems(pins, installed) == [
        "left-pad==1.0 is pinned but nothing requires it",
        "playwright 1.65.2 is installed, 1.64.1 is pinned",
        "pytest 9.0.3 is installed but not pinned",
    ]
    assert pin.problems(installed, installed) == []


def test_a_malformed_constraints_line_names_the_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "constraints.txt"
    bad.write_text("# pins\npytest==9.0.3\nplaywright>=1.49\n")
    with pytest.raises(ValueError, match=r"constraints.txt:3: expected name==version"):
        pin.read(bad)
    bad.write_text("Py_Test==9.0.3  # a comment\n\n")
    assert pin.read(bad) == {"py-test": "9.0.3"}


def test_check_mode_agrees_with_the_file() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "pin.py"), "--check"], capture_output=True, text=True, timeout=60
    )
    assert (done.returncode, done.stderr) == (0, "")
