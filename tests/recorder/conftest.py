from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from handrail.recorder import Ledger


@pytest.fixture
def ledger_path(tmp_path: Path) -> Path:
    return tmp_path / "ledger.sqlite"


@pytest.fixture
def ledger(ledger_path: Path) -> Iterator[Ledger]:
    with Ledger(ledger_path) as opened:
        yield opened
