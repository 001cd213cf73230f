"""Each pooled session of the PostgreSQL store ends itself when it sits idle inside a
transaction (a replica stopped mid-transaction), so the row locks it holds do not stop
the other replicas for as long as it is stopped; a limit the role already has is kept."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from handrail.authz import StoreUnavailableError
from handrail.authz._pg_db import PgDatabase
from handrail.authz._pg_session import IDLE_IN_TRANSACTION_MS

pytestmark = pytest.mark.slow


def _setting(conn: psycopg.Connection[Any]) -> str:
    row = conn.execute("SELECT setting FROM pg_settings WHERE name = 'idle_in_transaction_session_timeout'").fetchone()
    assert row is not None
    return str(row[0])


def test_a_session_stopped_in_a_transaction_lets_go_of_its_row_locks(pg_dsn: Callable[[], str]) -> None:
    dsn = pg_dsn()
    with psycopg.connect(dsn, autocommit=True) as setup:
        setup.execute("CREATE TABLE held (k INT PRIMARY KEY, v INT NOT NULL)")
        setup.execute("INSERT INTO held VALUES (1, 0)")
    db = PgDatabase(dsn, min_size=1, max_size=1)
    locked = threading.Event()
    outcome: list[BaseException | None] = []

    def stopped_mid_transaction(conn: psycopg.Connection[Any]) -> None:
        with conn.transaction():
            conn.execute("SELECT v FROM held WHERE k = 1 FOR UPDATE")
            locked.set()
            time.sleep(IDLE_IN_TRANSACTION_MS / 1000 + 3)  # silent, as a replica under SIGSTOP
            conn.execute("UPDATE held SET v = v + 100 WHERE k = 1")

    def holder() -> None:
        try:
            db.run(stopped_mid_transaction)
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=holder)
    try:
        assert db.run(_setting) == str(IDLE_IN_TRANSACTION_MS)
        thread.start()
        assert locked.wait(10)
        with psycopg.connect(dsn, autocommit=True) as other:  # another replica, renewing
            other.execute("SET lock_timeout = '30s'")
            t0 = time.monotonic()
            other.execute("UPDATE held SET v = v + 1 WHERE k = 1")
            waited = time.monotonic() - t0
        assert waited < IDLE_IN_TRANSACTION_MS / 1000 + 1.5, f"the lock was held {waited:.1f} s"
        thread.join(30)
        # the stopped one, resumed, finds its session gone: nothing of it committed
        assert isinstance(outcome[0], StoreUnavailableError)
        assert db.run(lambda c: c.execute("SELECT v FROM held WHERE k = 1").fetchone()) == (1,)
    finally:
        if thread.ident is not None:
            thread.join(30)
        db.close()


def test_a_limit_the_role_already_has_is_kept(pg_dsn: Callable[[], str]) -> None:
    dsn = pg_dsn()
    options = conninfo_to_dict(dsn).get("options") or ""
    db = PgDatabase(make_conninfo(dsn, options=f"{options} -c idle_in_transaction_session_timeout=60000".strip()))
    try:
        assert db.run(_setting) == "60000"
    finally:
        db.close()


def test_an_application_name_in_the_dsn_is_kept(pg_dsn: Callable[[], str]) -> None:
    """The store and its Watch listener name their sessions only where the DSN names none
    (the sidecar ran ``SET application_name`` on each session, so a name per replica
    given in its DSN was lost from ``pg_stat_activity``)."""
    from handrail.authz import PgStore

    dsn = pg_dsn()
    sql = "SELECT application_name, count(*) FROM pg_stat_activity WHERE pid <> pg_backend_pid() GROUP BY 1"
    with PgStore(make_conninfo(dsn, application_name="replica-east"), pool_size=2) as named, PgStore(dsn) as plain:
        named.event_hub(), plain.event_hub()  # each starts its listener
        with psycopg.connect(dsn, autocommit=True) as conn:
            sessions = dict(conn.execute(sql).fetchall())
    # the named store: its pool (2) and its listener; the other: its pool and listener
    assert sessions.get("replica-east", 0) >= 3, sessions
    assert sessions.get("handrail-authz", 0) >= 2 and sessions.get("handrail-authz-listener", 0) >= 1, sessions
