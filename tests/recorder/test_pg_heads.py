"""The PostgreSQL ledger against what an attacker with SQL access tries on its heads, and
against a NUL in an entry: a chain whose head row is deleted is still listed and found
BAD, the head only moves forward, an executor never re-creates a deleted head, and a NUL
a caller wrote never stops recovery or a filter."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest

from handrail._dsn import redact, why_no_connection
from handrail.recorder import LedgerError, LedgerTamperedError, open_ledger
from handrail.recorder._postgres import ledger_executors


def run_cli(argv: list[str]) -> int:
    from tests.recorder.test_ledger_cli import run_cli as run

    return run(argv)


pytestmark = pytest.mark.slow

PARAMS = {"action": "click", "ref": "e1"}


def _two_chains(dsn: str, heads: Path) -> None:
    for exe in ("exe-1", "exe-2"):
        with open_ledger(dsn, executor_id=exe, head_dir=heads) as ledger:
            ledger.append("session_open", session_id="s1", body={"target": f"browser:{exe}"})
            ledger.intent("s1", "a1", "k1", "agent", 1, PARAMS)


def _sql(dsn: str, *statements: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        for statement in statements:
            conn.execute(statement.encode())


@pytest.mark.parametrize(
    "attack",
    [
        "DELETE FROM ledger_heads WHERE executor_id = 'exe-1'",
        "TRUNCATE ledger_heads",
        "UPDATE ledger_heads SET head_seq = 1 WHERE executor_id = 'exe-1'",
        "UPDATE ledger_heads SET head_hash = 'x' WHERE executor_id = 'exe-1'",
        "UPDATE ledger_heads SET executor_id = 'exe-3' WHERE executor_id = 'exe-1'",
    ],
)
def test_the_heads_only_move_forward(pg_dsn: Callable[[], str], tmp_path: Path, attack: str) -> None:
    dsn = pg_dsn()
    _two_chains(dsn, tmp_path)
    with pytest.raises(psycopg.errors.RaiseException, match="ledger heads only move forward"):
        _sql(dsn, attack)
    with open_ledger(dsn, executor_id="exe-1", head_dir=tmp_path) as ledger:  # appends still move it
        assert ledger.intent("s1", "a2", "k2", "agent", 1, PARAMS).seq == 3
        assert ledger.verify().ok


def test_a_deleted_head_row_hides_no_chain(
    pg_dsn: Callable[[], str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The table's owner turns the triggers off and deletes one chain's head row: the chain
    is still listed (its entries name it), ``verify`` finds it BAD and exits 1, and its
    executor refuses to start rather than begin a new chain at genesis over the old one."""
    dsn = pg_dsn()
    _two_chains(dsn, tmp_path)
    _sql(
        dsn,
        "ALTER TABLE ledger_heads DISABLE TRIGGER USER",
        "DELETE FROM ledger_heads WHERE executor_id = 'exe-1'",
        "ALTER TABLE ledger_heads ENABLE TRIGGER USER",
    )
    assert ledger_executors(dsn) == ["exe-1", "exe-2"]
    assert run_cli(["ledger", "verify", "--db", dsn]) == 1
    out = capsys.readouterr().out
    assert "executor exe-2: ok" in out
    bad = next(line for line in out.splitlines() if "exe-1" in line)
    assert "BAD" in bad and "recorded head #0" in bad
    with pytest.raises(LedgerTamperedError, match=r"recorded head of .* is missing while its chain has entries"):
        open_ledger(dsn, executor_id="exe-1", head_dir=tmp_path)
    with psycopg.connect(dsn, autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM ledger_heads WHERE executor_id = 'exe-1'").fetchone() == (0,)


def test_a_head_moved_back_by_the_owner_stops_the_append_in_one_clear_line(
    pg_dsn: Callable[[], str], tmp_path: Path
) -> None:
    dsn = pg_dsn()
    with open_ledger(dsn, executor_id="exe-1", head_dir=tmp_path) as ledger:
        for i in range(3):
            ledger.intent("s1", f"a{i}", f"k{i}", "agent", 1, PARAMS)
        _sql(
            dsn,
            "ALTER TABLE ledger_heads DISABLE TRIGGER USER",
            "UPDATE ledger_heads SET head_seq = 1, head_hash = e.entry_hash FROM ledger_entries AS e"
            " WHERE ledger_heads.executor_id = 'exe-1' AND e.executor_id = 'exe-1' AND e.seq = 1",
            "ALTER TABLE ledger_heads ENABLE TRIGGER USER",
        )
        with pytest.raises(LedgerTamperedError, match=r"\(#1\) is behind its stored entries") as caught:
            ledger.intent("s1", "a3", "k3", "agent", 1, PARAMS)
        assert "\n" not in str(caught.value) and caught.value.seq == 2
    with psycopg.connect(dsn, autocommit=True) as conn:  # nothing written over
        rows = conn.execute("SELECT seq FROM ledger_entries WHERE executor_id = 'exe-1' ORDER BY seq").fetchall()
    assert [r[0] for r in rows] == [1, 2, 3]


def test_a_nul_a_caller_wrote_never_stops_recovery_or_a_filter(pg_dsn: Callable[[], str], tmp_path: Path) -> None:
    """PostgreSQL's jsonb refuses an escaped NUL; the queries that read inside a body see
    U+FFFD there instead, and text that merely looks like the escape is read as written."""
    dsn = pg_dsn()
    with open_ledger(dsn, executor_id="exe-1", head_dir=tmp_path) as ledger:
        ledger.append("session_open", session_id="s1", body={"target": "browser:\\u0000-\x00"})
        ledger.intent("s1", "a1", "k1", "agent", 1, {"action": "type", "text": "a\x00b"})
        ledger.result("s1", "a1", "k1", "agent", 1, "DONE", "OK", "observed", True, message="bad\x00msg")
        ledger.intent("s1", "a2", "k2", "agent", 1, PARAMS)
        ledger.result("s1", "a2", "k2", "agent", 1, "UNKNOWN", "LOST\x00IT", "none", True)
        [unknown] = ledger.unresolved()
        assert (unknown.action_id, unknown.reason) == ("a2", "LOST\ufffdIT")
        assert unknown.target == "browser:\\u0000-\ufffd"  # the text as written; the NUL as U+FFFD
        assert [e.action_id for e in ledger.entries(outcome="DONE")] == ["a1"]
        assert ledger.verify().ok  # the entries themselves are as written
    assert run_cli(["ledger", "tail", "--db", dsn, "--outcome", "UNKNOWN"]) == 0


@pytest.mark.parametrize(
    ("dsn", "secret"),
    [
        ("postgresql://svc:hunter2@[::1/ledger", "hunter2"),  # libpq quotes the whole string
        ("postgresql://svc:hun@ter2@127.0.0.1:1/ledger", "ter2"),  # cut at the first @: a "host"
        ("postgresql://svc:p%ZZword@127.0.0.1:1/ledger", "ZZword"),  # quoted as a bad token
        ("host=127.0.0.1 port=1 password='no way' colour=blue", "no way"),
    ],
)
def test_no_password_in_a_connection_error(dsn: str, secret: str) -> None:
    said = why_no_connection(dsn, 0.3, "the ledger database")
    assert said.startswith("cannot connect to the ledger database")
    assert secret not in said
    if dsn.startswith("postgresql://"):  # a ledger location is a URL (anything else: a file)
        with pytest.raises(LedgerError) as caught:
            open_ledger(dsn, executor_id="exe-1")
        assert secret not in str(caught.value)


def test_redact_leaves_other_text_alone() -> None:
    assert redact('failed for user "svc"', "postgresql://svc:hunter2@db/x") == 'failed for user "svc"'
    assert redact("password=abc and more", "host=db password=abc") == "password=*** and more"
    assert redact("nothing secret", "postgresql://db/x") == "nothing secret"
