from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from handrail.recorder import Ledger, PgLedgerStore


@pytest.fixture
def ledger_path(tmp_path: Path) -> Path:
    return tmp_path / "ledger.sqlite"


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.slow)])
def store_kind(request: pytest.FixtureRequest) -> str:
    """Which store a ledger test's ``ledger`` lives in: the tests of the store contract run
    on both (a test that also asks for ``ledger_path`` reads the SQLite file itself)."""
    return str(request.param)


@pytest.fixture
def ledger(tmp_path: Path, store_kind: str, request: pytest.FixtureRequest) -> Iterator[Ledger]:
    if store_kind == "sqlite":
        with Ledger(tmp_path / "ledger.sqlite") as opened:
            yield opened
        return
    dsn: Callable[[], str] = request.getfixturevalue("pg_dsn")
    with Ledger(tmp_path / "ledger-exe-1", store=PgLedgerStore(dsn(), "exe-1")) as opened:
        yield opened
