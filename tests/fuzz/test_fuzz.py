"""A bounded fuzz round against real processes (``bench/fuzz.py`` runs the full one).

Requests generated from the descriptors of every RPC of both services, under every
identity, with hostile values: no server crashes, nothing answers INTERNAL or UNKNOWN,
no OK that the role table or the grants forbid, and the ledger verifies afterwards.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from fuzz import run  # noqa: E402


@pytest.mark.slow
@pytest.mark.browser
@pytest.mark.timeout(180)
def test_a_bounded_fuzz_round_finds_nothing(tmp_path: Path) -> None:
    figures = run(400, tmp_path / "data", quiet=True)
    assert figures["crashes"] == 0
    assert figures["internal_or_unknown"] == 0, figures["codes"]
    assert figures["wrong_allows"] == 0
    assert figures["ledger_verify_ok"] is True
    assert figures["rpcs_covered"] >= 25  # most RPCs of both services were reached
