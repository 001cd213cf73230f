"""``handrail demo`` is the main job: run it as a user would and check what it claims."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from handrail.recorder import Ledger, RefusalBody, ResultBody


@pytest.mark.slow
@pytest.mark.browser
def test_demo_runs_end_to_end(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "handrail", "demo", "--data-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=180,
        stdin=subprocess.DEVNULL,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    text = out.stdout
    for line in (
        "REFUSED OUT_OF_SCOPE",
        "REFUSED POLICY_FORBID",
        "REFUSED STALE_REF",
        "REFUSED HELD_BY_HUMAN",
        "demo passed",
    ):
        assert line in text, line
    assert "[FAIL]" not in text
    # What the demo printed is what its ledger holds.
    with Ledger(tmp_path / "ledger.sqlite") as ledger:
        assert ledger.verify().ok
        results = [e.body_as(ResultBody) for e in ledger.entries(kind="result")]
        assert [r.outcome for r in results] == ["DONE", "DONE"]
        refusals = [e.body_as(RefusalBody).reason for e in ledger.entries(kind="refusal")]
        assert refusals == ["OUT_OF_SCOPE", "POLICY_FORBID", "STALE_REF", "HELD_BY_HUMAN"]
