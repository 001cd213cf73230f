"""Replaying scenarios: each run on a fresh stack, every divergence named by its step.

A run starts the scenario's fixture app, the authz sidecar and the executor as real
processes with a fresh data dir (so that ledger checks are exact), makes the principals
and grants, opens the sessions, plays the steps and then checks the fixture's real state
and the ledger. :func:`replay` runs a scenario K times and reports pass^K: it passes only
when every run passed.

Example::

    from handrail.scenarios import load_scenario, replay

    report = replay(load_scenario("scenarios/subscription-cancel-renewal.yaml"), repeat=3)
    print(report.summary())
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import grpc

from handrail.authz import AuthzError

from ._desktop import display_unavailable
from ._errors import Divergence
from ._run import Run, rpc_text
from ._scenario import Scenario

__all__ = ["RunResult", "ScenarioReport", "replay", "run_once"]


@dataclass
class RunResult:
    """One run of a scenario.

    Attributes:
        ok: every step and check behaved as stated.
        divergences: what did not, one sentence each.
        log: one line per step played.
        seconds: wall time of the run, stack start and stop included.
    """

    ok: bool
    divergences: list[str] = field(default_factory=list)
    log: list[str] = field(default_factory=list)
    seconds: float = 0.0


@dataclass
class ScenarioReport:
    """K runs of one scenario; ``passed`` is pass^K."""

    scenario: Scenario
    runs: list[RunResult] = field(default_factory=list)
    skipped: str | None = None
    source: str = ""

    @property
    def passed(self) -> bool:
        return self.skipped is None and all(r.ok for r in self.runs)

    def summary(self) -> str:
        """One line: ``name: pass^3 (3/3 runs, 4.1 s/run)`` or ``FAIL`` or ``SKIPPED``."""
        name = self.scenario.name
        if self.skipped is not None:
            return f"{name}: SKIPPED — {self.skipped}"
        k = len(self.runs)
        good = sum(r.ok for r in self.runs)
        per = sum(r.seconds for r in self.runs) / k if k else 0.0
        verdict = f"pass^{k}" if good == k else f"FAIL pass^{k}"
        return f"{name}: {verdict} ({good}/{k} runs passed, {per:.1f} s/run)"

    def details(self) -> list[str]:
        """The divergences of each failed run, indented, for printing under the summary."""
        lines = []
        for i, run in enumerate(self.runs, 1):
            if run.ok:
                continue
            lines.append(f"  run {i}:")
            lines.extend(f"    {d}" for d in run.divergences)
            if run.log:
                lines.append("    steps played:")
                lines.extend(f"      {entry}" for entry in run.log)
        return lines


def replay(
    scenario: Scenario,
    *,
    repeat: int = 1,
    chromium: str | None = None,
    keep_dir: Path | None = None,
    on_run: Callable[[int, RunResult], None] | None = None,
) -> ScenarioReport:
    """Run ``scenario`` ``repeat`` times, each on a fresh stack.

    Args:
        scenario: the scenario.
        repeat: K of pass^K.
        chromium: the Chromium executable (default: the executor's default).
        keep_dir: keep each run's data under this dir (``run-1`` ...) instead of a temp dir.
        on_run: called after each run with its number (from 1) and result.

    Returns:
        The report; ``report.skipped`` says why a scenario that cannot run here (a desktop
        scenario without Xvfb, openbox or Tk) was skipped.
    """
    report = ScenarioReport(scenario)
    skip = scenario.skip_reason(display=display_unavailable() if scenario.needs_display() else None)
    if skip is not None:
        report.skipped = skip
        return report
    for i in range(1, repeat + 1):
        if keep_dir is not None:
            data_dir = keep_dir / f"run-{i}"
            shutil.rmtree(data_dir, ignore_errors=True)
            result = run_once(scenario, data_dir, chromium=chromium)
        else:
            with tempfile.TemporaryDirectory(prefix=f"handrail-replay-{scenario.name}-") as tmp:
                result = run_once(scenario, Path(tmp), chromium=chromium)
        report.runs.append(result)
        if on_run is not None:
            on_run(i, result)
    return report


def run_once(scenario: Scenario, data_dir: Path, *, chromium: str | None = None) -> RunResult:
    """Play ``scenario`` once with its data in ``data_dir`` (made if missing)."""
    started = time.monotonic()
    run = Run(scenario, data_dir, chromium)
    result = RunResult(ok=False, log=run.log)
    try:
        with run.stack():
            run.play()
            run.stop_servers()  # the ledger is read with every writer gone
            run.final_checks()
    except Divergence as exc:
        result.divergences.append(str(exc))
        result.log.extend(run.server_trouble())
    except (RuntimeError, OSError, grpc.RpcError, AuthzError) as exc:
        text = rpc_text(exc).strip().splitlines() or [""]
        if len(text) > 6:  # a server's whole output: its first and last lines tell
            text = [*text[:1], "  ...", *text[-4:]]
        result.divergences.append(f"the run broke: {type(exc).__name__}: " + "\n".join(text))
    result.divergences.extend(run.failed_checks)
    result.ok = not result.divergences
    result.seconds = time.monotonic() - started
    return result
