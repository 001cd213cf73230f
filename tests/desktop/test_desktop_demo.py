"""``handrail demo --desktop``, run as a user would: it passes and shows what it claims."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from handrail.recorder import Ledger


@pytest.mark.slow
@pytest.mark.desktop
def test_desktop_demo_runs_end_to_end(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "handrail", "demo", "--desktop", "--data-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=180,
        stdin=subprocess.DEVNULL,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "[FAIL]" not in out.stdout
    assert "desktop demo passed" in out.stdout
    with Ledger(tmp_path / "ledger.sqlite") as ledger:
        assert ledger.verify().ok
        refusals = [e.body["reason"] for e in ledger.entries(kind="refusal")]
        assert refusals == ["FOCUS_MISMATCH", "HELD_BY_HUMAN"]
        typed = [e for e in ledger.entries(kind="result") if e.body["outcome"] == "DONE"]
        assert typed, "the demo's writes are in the ledger"
