"""A pytest plugin: every ``scenarios/*.yaml`` file is a test that must pass K times.

Enable it with ``-p handrail.scenarios.pytest_plugin`` (or ``pytest_plugins`` in the root
``conftest.py``) and put the scenarios folder on the test paths. Each scenario file is one
test item; it replays ``--scenario-repeat K`` times (default 3), each run on a fresh stack,
and passes only when every run passed (pass^K). A failure shows each run's divergences
and the steps it played. Desktop scenarios (``app: notes``) start their own Xvfb and
openbox; where those (or Tk) are missing they are skipped with the reason, and they carry
the ``desktop`` mark where the project registers it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ._errors import ScenarioError
from ._loading import load_scenario
from ._replay import replay
from ._scenario import Scenario

__all__ = [
    "DEFAULT_REPEAT",
    "ScenarioFailure",
    "ScenarioFile",
    "ScenarioItem",
    "pytest_addoption",
    "pytest_collect_file",
    "pytest_configure",
    "pytest_terminal_summary",
]

DEFAULT_REPEAT = 3
_SECONDS_PER_RUN = 60
_REPORTS_KEY = pytest.StashKey[list[str]]()


class ScenarioFailure(Exception):
    """A scenario did not pass every run; the message lists the divergences."""


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("handrail scenarios")
    group.addoption(
        "--scenario-repeat",
        type=int,
        default=DEFAULT_REPEAT,
        help=f"runs per scenario file, all of which must pass (pass^K; default {DEFAULT_REPEAT})",
    )
    group.addoption("--scenario-chromium", default=None, help="the Chromium executable for scenario runs")


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_REPORTS_KEY] = []


def pytest_collect_file(parent: pytest.Collector, file_path: Path) -> pytest.Collector | None:
    if file_path.suffix == ".yaml" and file_path.parent.name == "scenarios":
        return ScenarioFile.from_parent(parent, path=file_path)
    return None


class ScenarioFile(pytest.File):
    """One scenario file: one item, or a collection error naming the file and line."""

    def collect(self) -> Iterator[ScenarioItem]:
        try:
            scenario = load_scenario(self.path)
        except ScenarioError as exc:
            raise self.CollectError(str(exc)) from None
        repeat = max(1, int(self.config.getoption("--scenario-repeat")))
        item = ScenarioItem.from_parent(self, name=scenario.name, scenario=scenario, repeat=repeat)
        item.add_marker(pytest.mark.timeout(_SECONDS_PER_RUN * repeat + 30))
        marks = ("slow", "browser", "desktop") if scenario.needs_display() else ("slow", "browser")
        for mark in marks:
            if mark in self.config.getini("markers") or any(
                str(m).startswith(mark + ":") for m in self.config.getini("markers")
            ):
                item.add_marker(getattr(pytest.mark, mark))
        yield item


class ScenarioItem(pytest.Item):
    """Replays one scenario K times; passes on pass^K."""

    def __init__(self, *, scenario: Scenario, repeat: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.scenario = scenario
        self.repeat = repeat
        self.user_properties.append(("repeat", repeat))

    def runtest(self) -> None:
        chromium = self.config.getoption("--scenario-chromium")
        report = replay(self.scenario, repeat=self.repeat, chromium=chromium)
        self.config.stash[_REPORTS_KEY].append(report.summary())
        if report.skipped is not None:
            pytest.skip(report.skipped)
        self.user_properties.append(("pass^k", report.passed))
        if not report.passed:
            raise ScenarioFailure("\n".join([report.summary(), *report.details()]))

    def repr_failure(
        self,
        excinfo: pytest.ExceptionInfo[BaseException],
        style: Any = None,
    ) -> str:
        if isinstance(excinfo.value, ScenarioFailure):
            return f"scenario {self.scenario.name} diverged:\n{excinfo.value}"
        return str(super().repr_failure(excinfo))

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, 0, f"scenario {self.scenario.name} (pass^{self.repeat})"


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    reports = config.stash.get(_REPORTS_KEY, [])
    if reports:
        terminalreporter.section("handrail scenarios (pass^K)")
        for line in reports:
            terminalreporter.write_line(line)
