"""Import paths from before the layout of issue 10 keep working for one release.

The scenario harness moved out of ``handrail.recorder`` into ``handrail.scenarios``, the
process and display helpers with it. Each old path below re-exports the very objects of
the new one (as temporalio pinned the names when it split ``client.py``); when a release
drops an old path, its row goes.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

# old module -> (new module, names that must be the same objects)
OLD_PATHS = {
    "handrail.recorder.pytest_plugin": (
        "handrail.scenarios.pytest_plugin",
        [
            "DEFAULT_REPEAT",
            "ScenarioFailure",
            "ScenarioFile",
            "ScenarioItem",
            "pytest_addoption",
            "pytest_collect_file",
            "pytest_configure",
            "pytest_terminal_summary",
        ],
    ),
}


@pytest.mark.parametrize("old", sorted(OLD_PATHS))
def test_an_old_path_re_exports_the_new_objects(old: str) -> None:
    new, names = OLD_PATHS[old]
    old_module, new_module = importlib.import_module(old), importlib.import_module(new)
    for name in names:
        assert getattr(old_module, name) is getattr(new_module, name), f"{old}.{name}"
    assert set(names) <= set(getattr(old_module, "__all__", ()))


def test_the_old_plugin_path_still_loads_in_pytest(tmp_path: Path) -> None:
    folder = tmp_path / "scenarios"
    folder.mkdir()
    (folder / "broken.yaml").write_text("app: subscription\nsteps:\n  - fault: explode\n")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "handrail.recorder.pytest_plugin",
            "-p",
            "no:cacheprovider",
            "--scenario-repeat",
            "1",
            "--collect-only",
            "-q",
            str(folder),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "broken.yaml:3: steps[0].fault: unknown fault 'explode'" in done.stdout, done.stdout + done.stderr


def test_the_harness_is_no_longer_in_the_recorder() -> None:
    import handrail.recorder

    for gone in ("_scenario", "_replay", "_record", "_scenario_cli"):
        with pytest.raises(ModuleNotFoundError):
            importlib.import_module(f"handrail.recorder.{gone}")
    assert not {"Scenario", "replay", "load_scenario"} & set(handrail.recorder.__all__)
