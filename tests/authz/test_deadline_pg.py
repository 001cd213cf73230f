"""A caller's deadline on the PostgreSQL store: a real sidecar over a private PostgreSQL with
a pool of four connections, the database held up by a blocker transaction (a table or row
lock), clients with short deadlines. Whatever the blocker does:

* a call that finds every pooled connection busy is answered UNAVAILABLE before its
  deadline, naming the database (its password hidden), not 5 s later;
* a check whose caller has given up consumes no single-use grant, creates no approval and
  logs no allow, even once the blocker lets go (the agent's retry still gets its one use);
* a lease change waiting on a row lock past the deadline is rolled back, not made later;
* each call cut short is one log line, never a traceback.

Every test here needs the session's PostgreSQL server: all are slow-marked.
"""

from __future__ import annotations

import contextlib
import logging
import re
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from handrail.authz import AuthzUnavailableError, Decision
from handrail.authz._deadline import CallDeadline
from handrail.authz._errors import AuthzError
from handrail.authz._pg_db import PgDatabase, describe
from handrail.scenarios._postgres import pg_url
from tests.authz.deadline_sidecar import (
    DEADLINE_S,
    HOLD_S,
    TARGET,
    DeadlineSidecar,
    cut_short_lines,
    deadline_sidecar,
    single_use,
    timed_check,
)

pytestmark = pytest.mark.slow

SECRET = "pw-not-in-any-message"


def _settle(side: DeadlineSidecar) -> None:
    """Wait until no statement of the sidecar is running or waiting in the database (the
    calls held up have ended one way or the other)."""
    sql = (
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'handrail-authz'"
        " AND state = 'active' AND query NOT ILIKE 'LISTEN%%' AND pid <> pg_backend_pid()"
    )
    with psycopg.connect(side.where, autocommit=True) as conn:
        for _ in range(100):
            row = conn.execute(sql).fetchone()
            if row is not None and row[0] == 0:
                time.sleep(0.2)  # what follows a statement in the handler (no statement)
                return
            time.sleep(0.05)
    raise AssertionError("the sidecar's statements did not end")


@pytest.fixture
def pg_sidecar(pg_dsn: Callable[[], str], tmp_path: Path) -> Iterator[DeadlineSidecar]:
    """The shared sidecar (8 handler threads, hence a pool of 4 connections) over a fresh
    schema; its DSN carries a password (the private server trusts every local user, so it
    is not checked, only carried)."""
    with deadline_sidecar(tmp_path / "data", store=pg_url(pg_dsn(), password=SECRET)) as side:
        yield side


@contextlib.contextmanager
def _held(side: DeadlineSidecar, *statements: str, params: tuple[Any, ...] = ()) -> Iterator[None]:
    """Run ``statements`` in the blocker's transaction, hold it until :data:`HOLD_S` after
    the block began (whatever the block did), then roll it back and let the sidecar settle."""
    conn = psycopg.connect(side.where)  # the test's own, in a transaction
    began = time.monotonic()
    try:
        for sql in statements:
            conn.execute(sql, params if "%s" in sql else ())
        yield
        time.sleep(max(0.0, HOLD_S - (time.monotonic() - began)))
    finally:
        conn.rollback()
        conn.close()
    _settle(side)


def test_an_exhausted_pool_is_unavailable_before_the_deadline_and_no_abandoned_check_consumes_the_grant(
    pg_sidecar: DeadlineSidecar, caplog: pytest.LogCaptureFixture
) -> None:
    """Eight concurrent checks with 1 s deadlines while every grant read waits on a table
    lock: four hold the pool's four connections, four wait for one. The waiting ones hear
    UNAVAILABLE naming the database in time; the held ones' callers give up; when the lock
    goes, none of them consumes the single-use grant or logs an allow."""
    side = pg_sidecar
    grant = single_use(side)
    caplog.set_level(logging.INFO, logger="handrail.authz")
    with _held(side, "LOCK TABLE grants IN ACCESS EXCLUSIVE MODE"), ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda _: timed_check(side, DEADLINE_S), range(8)))
    assert not [a for _, a in answers if isinstance(a, Decision)], answers
    store = side.server.store
    assert store.get_grant(grant.grant_id).used_at_ms == 0
    assert side.allows_of("agent-a") == []
    # every caller heard UNAVAILABLE (its wait for a connection ended in time) or gave up
    assert all(isinstance(a, AuthzUnavailableError) for _, a in answers), answers
    busy = [(took, str(a)) for took, a in answers if "(UNAVAILABLE)" in str(a)]
    assert busy, answers  # at least one of the four that waited (on a loaded host, a late answer is DEADLINE_EXCEEDED)
    where = describe(side.where)
    assert "@127.0.0.1:" in where and SECRET not in where
    for took, message in busy:
        assert took < DEADLINE_S, message  # heard while the caller still listened
        expected = rf"no connection to {re.escape(where)} \(all 4 connections of this replica in use\) within 0\.[89]"
        assert re.search(expected, message), message
        assert SECRET not in message
    lines = cut_short_lines(caplog, "Check")
    assert not [r for r in caplog.records if SECRET in r.getMessage()]
    # one line per call the sidecar served: a wait cut short, or a commit not started
    assert all("in use) within" in line or "deadline passed before" in line for line in lines), lines
    assert len(busy) <= sum("in use) within" in line for line in lines) <= 4, lines
    assert 1 <= sum("deadline passed before the check's commit" in line for line in lines) <= 4, lines
    # the agent's retry gets the grant's one use
    _, retried = timed_check(side, 5.0)
    assert isinstance(retried, Decision) and retried.allow, retried
    assert store.get_grant(grant.grant_id).used_at_ms > 0


def test_a_check_whose_caller_gave_up_while_its_read_waited_commits_nothing(
    pg_sidecar: DeadlineSidecar, caplog: pytest.LogCaptureFixture
) -> None:
    """The check's snapshot waits on a table lock past its deadline; when the lock goes
    the read completes, and the commit that would consume the grant is not started."""
    side = pg_sidecar
    grant = single_use(side)
    caplog.set_level(logging.INFO, logger="handrail.authz")
    with _held(side, "LOCK TABLE grants IN ACCESS EXCLUSIVE MODE"):
        _took, answer = timed_check(side, 0.5)
    assert isinstance(answer, AuthzUnavailableError) and "DEADLINE_EXCEEDED" in str(answer), answer
    assert side.server.store.get_grant(grant.grant_id).used_at_ms == 0
    assert side.allows_of("agent-a") == []
    (line,) = cut_short_lines(caplog, "Check")
    assert "the caller's deadline passed before the check's commit (not started)" in line, line


def test_a_consumption_waiting_on_a_row_lock_past_the_deadline_is_rolled_back(
    pg_sidecar: DeadlineSidecar, caplog: pytest.LogCaptureFixture
) -> None:
    """Another transaction holds the grant's row: the check reads, decides allow, and its
    consuming UPDATE waits. At the caller's deadline it is cancelled and rolled back: when
    the row is let go, the grant is unused and the log holds no allow."""
    side = pg_sidecar
    grant = single_use(side)
    caplog.set_level(logging.INFO, logger="handrail.authz")
    with _held(side, "SELECT 1 FROM grants WHERE grant_id = %s FOR UPDATE", params=(grant.grant_id,)):
        _, answer = timed_check(side, DEADLINE_S)
    assert isinstance(answer, AuthzUnavailableError) and "DEADLINE_EXCEEDED" in str(answer), answer
    assert side.server.store.get_grant(grant.grant_id).used_at_ms == 0
    assert side.allows_of("agent-a") == []
    (line,) = cut_short_lines(caplog, "Check")
    assert "deadline passed while the check's commit ran: cancelled, nothing of it committed" in line, line
    _, retried = timed_check(side, 5.0)
    assert isinstance(retried, Decision) and retried.allow, retried


def test_an_approval_is_not_created_for_a_caller_that_gave_up(
    pg_sidecar: DeadlineSidecar, caplog: pytest.LogCaptureFixture
) -> None:
    """Inserts into approvals wait on a lock (reads do not): the check that would ask an
    operator for approval is rolled back at its deadline; no approval waits for nobody."""
    side = pg_sidecar
    with side.client("op") as op:
        op.grant("agent-a", TARGET, ["submit"], [], require_approval_verbs=["submit"])
    caplog.set_level(logging.INFO, logger="handrail.authz")
    with _held(side, "LOCK TABLE approvals IN SHARE ROW EXCLUSIVE MODE"):
        _, answer = timed_check(side, DEADLINE_S, fingerprint="f" * 64)
    assert isinstance(answer, AuthzUnavailableError) and "DEADLINE_EXCEEDED" in str(answer), answer
    assert side.server.store.list_approvals() == []
    assert side.server.store.list_decisions(principal="agent-a") == []
    (line,) = cut_short_lines(caplog, "Check")
    assert "while the check's commit ran" in line, line


def _approved(side: DeadlineSidecar, fingerprint: str) -> str:
    """An approval of agent-a's submit (its fingerprint), asked and approved; its id."""
    with side.client("op") as op:
        op.grant("agent-a", TARGET, ["submit"], [], require_approval_verbs=["submit"])
        _, asked = timed_check(side, 5.0, fingerprint=fingerprint)
        assert isinstance(asked, Decision) and asked.reason == "APPROVAL_REQUIRED", asked
        op.approve(asked.approval_id)
    return asked.approval_id


def test_an_approval_is_not_used_up_for_a_caller_that_gave_up(
    pg_sidecar: DeadlineSidecar, caplog: pytest.LogCaptureFixture
) -> None:
    """The approved action's check waits on the approval's row lock past its deadline: the
    use is rolled back, so the approval is still there for the agent's retry."""
    side = pg_sidecar
    fingerprint = "a" * 64
    approval_id = _approved(side, fingerprint)
    caplog.set_level(logging.INFO, logger="handrail.authz")
    with _held(side, "SELECT 1 FROM approvals WHERE approval_id = %s FOR UPDATE", params=(approval_id,)):
        _, answer = timed_check(side, DEADLINE_S, fingerprint=fingerprint)
    approval = side.server.store.get_approval(approval_id)
    assert (approval.status, approval.used_at_ms) == ("APPROVED", 0), approval
    assert side.allows_of("agent-a") == []
    assert isinstance(answer, AuthzUnavailableError) and "DEADLINE_EXCEEDED" in str(answer), answer
    assert "while the check's commit ran" in cut_short_lines(caplog, "Check")[0]
    _, retried = timed_check(side, 5.0, fingerprint=fingerprint)
    assert isinstance(retried, Decision) and retried.allow, retried


def test_an_approve_waiting_on_the_row_past_the_deadline_is_rolled_back(
    pg_sidecar: DeadlineSidecar, caplog: pytest.LogCaptureFixture
) -> None:
    side = pg_sidecar
    with side.client("op") as op:
        op.grant("agent-a", TARGET, ["submit"], [], require_approval_verbs=["submit"])
    _, asked = timed_check(side, 5.0, fingerprint="b" * 64)
    assert isinstance(asked, Decision) and asked.approval_id, asked
    caplog.set_level(logging.INFO, logger="handrail.authz")
    errors: list[AuthzError] = []
    approval_row = "SELECT 1 FROM approvals WHERE approval_id = %s FOR UPDATE"
    with _held(side, approval_row, params=(asked.approval_id,)), side.client("op", DEADLINE_S) as op:
        try:
            op.approve(asked.approval_id)
        except AuthzError as exc:
            errors.append(exc)
    assert side.server.store.get_approval(asked.approval_id).status == "PENDING"
    assert errors and "DEADLINE_EXCEEDED" in str(errors[0]), errors
    assert f"while deciding approval {asked.approval_id} ran" in cut_short_lines(caplog, "Approve")[0]


def test_a_takeover_waiting_on_the_lease_row_past_the_deadline_is_not_made_later(
    pg_sidecar: DeadlineSidecar, caplog: pytest.LogCaptureFixture
) -> None:
    side = pg_sidecar
    caplog.set_level(logging.INFO, logger="handrail.authz")
    error: list[BaseException] = []
    lease_row = "SELECT 1 FROM leases WHERE target = %s FOR UPDATE"
    with _held(side, lease_row, params=(TARGET,)), side.client("op", DEADLINE_S) as op:
        try:
            op.take_over(TARGET)
        except AuthzError as exc:
            error.append(exc)
    assert error and "DEADLINE_EXCEEDED" in str(error[0]), error
    lease = side.server.store.get_lease(TARGET)
    assert (lease.holder, lease.epoch) == ("agent-a", side.epoch)
    (line,) = cut_short_lines(caplog, "TakeOver")
    assert "while a lease change ran" in line, line


def test_a_state_changes_statement_timeout_ends_at_the_deadline_never_past_the_roles_own(
    pg_dsn: Callable[[], str],
) -> None:
    """docs/deploy.md recommends a ``statement_timeout`` for the sidecar's role: a deadline
    lowers it inside a state change's transaction (and in the one-query form a lease change
    takes), never raises it; without a deadline (or outside the transaction) it is left
    alone."""
    dsn = pg_dsn()
    db = PgDatabase(dsn, min_size=1, max_size=1)

    def bounded(conn: psycopg.Connection[Any]) -> int:
        with conn.transaction():
            PgDatabase.bound(conn)
            return _timeout_ms(conn)

    def bounded_one(conn: psycopg.Connection[Any]) -> int:
        sql = "SELECT setting::bigint FROM pg_settings WHERE name = 'statement_timeout' AND %(x)s = 1"
        row = PgDatabase.bounded_one(conn, sql, {"x": 1})
        assert row is not None
        return int(row[0])

    try:
        assert db.run(bounded) == 0 and db.run(bounded_one) == 0  # no call, no deadline
        with CallDeadline(5.0, "Check"):
            assert 4_000 < db.run(bounded) <= 5_000
            assert 4_000 < db.run(bounded_one) <= 5_000
            assert db.run(_timeout_ms) == 0  # local to the transaction: gone with it
    finally:
        db.close()
    # the role's own, as a session starts with it (ALTER ROLE ... SET, or here the DSN's options)
    options = conninfo_to_dict(dsn).get("options") or ""
    db = PgDatabase(make_conninfo(dsn, options=f"{options} -c statement_timeout=200".strip()), min_size=1, max_size=1)
    try:
        assert db.run(_timeout_ms) == 200
        with CallDeadline(5.0, "Check"):
            assert db.run(bounded) == 200 and db.run(bounded_one) == 200
        with CallDeadline(0.1, "Check"):
            assert 0 < db.run(bounded) <= 100
            assert 0 < db.run(bounded_one) <= 100
        assert db.run(_timeout_ms) == 200
    finally:
        db.close()


def _timeout_ms(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute("SELECT setting FROM pg_settings WHERE name = 'statement_timeout'").fetchone()
    assert row is not None
    return int(row[0])
