"""The PostgreSQL ledger's one-statement append, against what tries to beat it: a second
writer of the same chain, connections cut between appends, and a reply lost after the
statement committed."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import psycopg_pool
import pytest

from handrail.recorder import Ledger, LedgerError, open_ledger
from handrail.recorder import _postgres as pg_store
from handrail.scenarios._postgres import pg_url, terminate
from tests.recorder.test_ledger_cli import run_cli

pytestmark = pytest.mark.slow

PARAMS = {"action": "click", "ref": "e1"}
CUT = "application_name = 'ledger-under-test'"  # the ledger's sessions


def _seqs(dsn: str, exe: str) -> list[int]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute("SELECT seq FROM ledger_entries WHERE executor_id = %s ORDER BY seq", (exe,)).fetchall()
    return [int(r[0]) for r in rows]


def test_two_writers_of_one_chain_keep_one_chain(pg_dsn: Callable[[], str]) -> None:
    """Two ledgers on one executor id (a copy started on a second host by mistake) append
    from two threads each: every compare-and-set that finds the head moved falls back to
    the locked append, so the chain stays one, gapless and verified."""
    dsn = pg_dsn()
    first, second = open_ledger(dsn, executor_id="exe-1"), open_ledger(dsn, executor_id="exe-1")
    errors: list[BaseException] = []

    def write(ledger: Any, name: str) -> None:
        try:
            for i in range(25):
                ledger.intent("s1", f"{name}-{i}", f"k-{name}-{i}", "agent", 1, PARAMS)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [
        threading.Thread(target=write, args=(led, f"{n}{t}"))
        for n, led in (("a", first), ("b", second))
        for t in range(2)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    assert _seqs(dsn, "exe-1") == list(range(1, 101))
    for ledger in (first, second):
        report = ledger.verify()
        assert report.ok and report.count == 100, report.message
    # each ledger appends onto the other's head when they alternate
    a = first.intent("s1", "x1", "kx1", "agent", 1, PARAMS)
    b = second.intent("s1", "x2", "kx2", "agent", 1, PARAMS)
    c = first.intent("s1", "x3", "kx3", "agent", 1, PARAMS)
    assert (a.seq, b.seq, c.seq) == (101, 102, 103) and c.prev_hash == b.entry_hash
    first.close()
    second.close()


def test_connections_cut_between_appends_lose_no_append(pg_dsn: Callable[[], str]) -> None:
    dsn = pg_dsn()
    named = pg_url(dsn, application_name="ledger-under-test")
    with open_ledger(named, executor_id="exe-1") as ledger, psycopg.connect(dsn, autocommit=True) as admin:
        for i in range(6):
            ledger.intent("s1", f"a{i}", f"k{i}", "agent", 1, PARAMS)
            assert terminate(admin, CUT) >= 1  # the ledger's pooled connection, at least
        assert _seqs(dsn, "exe-1") == [1, 2, 3, 4, 5, 6]
        assert ledger.verify().ok


def cut_after_the_pools_check(monkeypatch: pytest.MonkeyPatch, dsn: str, where: str) -> list[int]:
    """Make psycopg_pool's check, the first time it runs, end the sessions ``where`` picks
    right after it (once a pooled connection is there: one it passed, or the one replacing
    one it threw away): a backend that goes after the check passed its connection, as one
    signalled by ``pg_terminate_backend`` may. The list returned gets how many were ended."""
    real_check = psycopg_pool.ConnectionPool.check
    late: list[int] = []

    def check(pool: psycopg_pool.ConnectionPool[Any]) -> None:
        real_check(pool)
        if late:
            return
        deadline = time.monotonic() + 10
        while pool.get_stats().get("pool_available", 0) < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        with psycopg.connect(dsn, autocommit=True) as admin:
            late.append(terminate(admin, where))

    monkeypatch.setattr(psycopg_pool.ConnectionPool, "check", check)
    return late


def test_a_cut_that_lands_after_the_pools_check_loses_no_append(
    pg_dsn: Callable[[], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``pg_terminate_backend`` only signals: a backend may go after the pool's check passed
    its connection (seen in CI on the test above). Here the cut lands right after the check:
    the connection the retry is given is dead too. Before: one retry, and the append failed."""
    dsn = pg_dsn()
    named = pg_url(dsn, application_name="ledger-under-test")
    with open_ledger(named, executor_id="exe-1") as ledger, psycopg.connect(dsn, autocommit=True) as admin:
        ledger.intent("s1", "a0", "k0", "agent", 1, PARAMS)
        assert terminate(admin, CUT)
        late = cut_after_the_pools_check(monkeypatch, dsn, CUT)
        assert ledger.intent("s1", "a1", "k1", "agent", 1, PARAMS).seq == 2
        assert late and late[0] >= 1  # a pooled connection was cut after the check passed it
        monkeypatch.undo()
        assert _seqs(dsn, "exe-1") == [1, 2] and ledger.verify().ok


def test_a_reply_lost_after_the_append_committed_is_not_written_again(
    pg_dsn: Callable[[], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The statement commits, then the connection drops before its answer arrives: the
    retry finds the recorded head already at the new one and counts the append done, once."""
    dsn = pg_dsn()
    with open_ledger(dsn, executor_id="exe-1") as ledger:
        ledger.intent("s1", "a0", "k0", "agent", 1, PARAMS)  # the store has seen the head now
        real = psycopg.Connection.execute
        lost: list[str] = []

        def execute(self: psycopg.Connection[Any], query: Any, *args: Any, **kwargs: Any) -> Any:
            cursor = real(self, query, *args, **kwargs)
            if query is pg_store._APPEND_ONTO and not lost:
                lost.append("once")
                self.close()  # the answer never reaches the ledger
                raise psycopg.OperationalError("server closed the connection unexpectedly")
            return cursor

        monkeypatch.setattr(psycopg.Connection, "execute", execute)
        entry = ledger.intent("s1", "a1", "k1", "agent", 1, PARAMS)
        monkeypatch.undo()
        assert lost == ["once"]
        assert entry.seq == 2 and _seqs(dsn, "exe-1") == [1, 2]
        assert ledger.verify().ok
        assert ledger.intent("s1", "a2", "k2", "agent", 1, PARAMS).seq == 3


@pytest.mark.parametrize(
    ("dsn", "says"),
    [
        (
            "postgresql://127.0.0.1:1/nothing?sslmode=sometimes",
            'not a usable connection string: connection is bad: invalid sslmode value: "sometimes"',  # at once
        ),
        (
            "postgresql://127.0.0.1:1/nothing?colour=blue",
            'not a usable connection string: invalid URI query parameter: "colour"',
        ),
    ],
    ids=["bad-sslmode", "bad-parameter"],
)
def test_a_ledger_database_it_cannot_reach_is_named_with_libpqs_reason(dsn: str, says: str) -> None:
    """The executor opens its PostgreSQL ledger at start: an operator's mistake in the URL
    is one line with libpq's reason, not only that no connection came in time."""
    with pytest.raises(LedgerError) as err:
        pg_store.PgLedgerStore(dsn, "exe-1")
    assert str(err.value).startswith("cannot connect to the ledger database postgresql://")
    assert says in str(err.value) and "\n" not in str(err.value)


def test_an_executor_id_that_is_not_a_file_name_never_becomes_a_path(
    pg_dsn: Callable[[], str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An executor's head file is ``ledger-<id>.head`` in its data dir. It may not append
    under an id that is not a file name. Reading, the ids come from the database, which any
    executor with its credentials writes: one like ``x/../../planted`` is verified without
    a head file, never read from where it points (here a planted file the verify would
    otherwise call the chain's damaged head file)."""
    dsn = pg_dsn()
    evil = "x/../../planted"
    with pytest.raises(LedgerError, match=r"must be 1\.\.200 letters, digits"):
        open_ledger(dsn, executor_id=evil, head_dir=tmp_path / "data")
    hostile = Ledger(None, store=pg_store.PgLedgerStore(dsn, evil))  # its own code, the same database
    hostile.intent("s1", "a1", "k1", "agent", 1, PARAMS)
    hostile.close()
    data = tmp_path / "data"
    (data / "ledger-x").mkdir(parents=True)
    (tmp_path / "planted.head").write_text("not a head file")
    assert (data / f"ledger-{evil}.head").resolve() == (tmp_path / "planted.head").resolve()
    assert run_cli(["ledger", "verify", "--db", dsn, "--data-dir", str(data)]) == 0
    assert f"executor {evil}: ok: 1 entries, chain verified; head file: none" in capsys.readouterr().out
