"""A caller's deadline on the SQLite store: a real sidecar whose file another connection
holds the write lock of (as a backup, a script or a second tool writing to it would), or
whose own writer is held (as a prune batch or a journal flush holds it), and clients with
short deadlines. Whatever the blocker does:

* the waiting call is answered UNAVAILABLE before its deadline, naming the file, not after
  SQLite's 10 s busy timeout (nor never, for the writer);
* once the blocker lets go, nothing was done for the caller that gave up: no single-use
  grant consumed, no lease taken over, no allow logged (with ``--durable-decisions`` too),
  and the agent's retry still gets the grant's one use;
* each call cut short is one log line, never a traceback.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from handrail.authz import AuthzUnavailableError, Decision
from handrail.authz._errors import AuthzError
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

pytestmark = pytest.mark.slow  # each test waits out a blocker of 2.5 s


@pytest.fixture
def sqlite_sidecar(tmp_path: Path) -> Iterator[DeadlineSidecar]:
    with deadline_sidecar(tmp_path / "data") as side:
        yield side


@contextlib.contextmanager
def _file_locked(side: DeadlineSidecar) -> Iterator[None]:
    """Another connection holds the file's write lock (``BEGIN IMMEDIATE``) until
    :data:`HOLD_S` after the block began, then lets go; the sidecar then has time to do
    whatever it still would."""
    conn = sqlite3.connect(side.where, isolation_level=None, timeout=0.1)
    conn.execute("BEGIN IMMEDIATE")
    began = time.monotonic()
    try:
        yield
        time.sleep(max(0.0, HOLD_S - (time.monotonic() - began)))
    finally:
        conn.execute("ROLLBACK")
        conn.close()
    time.sleep(0.5)


@contextlib.contextmanager
def _writer_held(side: DeadlineSidecar) -> Iterator[None]:
    """The sidecar's own writer (the lock a prune batch or a journal flush holds) is held by
    another thread until :data:`HOLD_S` after the block began."""
    taken, done = threading.Event(), threading.Event()

    def hold() -> None:
        with side.server.store.db.write_lock:
            taken.set()
            done.wait(10.0)

    holder = threading.Thread(target=hold)
    holder.start()
    taken.wait(5.0)
    began = time.monotonic()
    try:
        yield
        time.sleep(max(0.0, HOLD_S - (time.monotonic() - began)))
    finally:
        done.set()
        holder.join(5.0)
    time.sleep(0.5)


def _cut_short(caplog: pytest.LogCaptureFixture, method: str) -> str:
    """The one line the sidecar logged about the call of ``method`` cut short."""
    (line,) = cut_short_lines(caplog, method)
    return line


def _unavailable_in_time(took: float, answer: Decision | AuthzError, side: DeadlineSidecar) -> str:
    assert isinstance(answer, AuthzUnavailableError), answer
    message = str(answer)
    assert "(UNAVAILABLE)" in message and took < DEADLINE_S, (took, message)
    return message


def test_a_check_meeting_a_locked_file_is_unavailable_in_time_and_consumes_nothing_later(
    sqlite_sidecar: DeadlineSidecar, caplog: pytest.LogCaptureFixture
) -> None:
    side = sqlite_sidecar
    grant = single_use(side)
    caplog.set_level(logging.INFO, logger="handrail.authz")
    with _file_locked(side):
        took, answer = timed_check(side, DEADLINE_S)
    assert side.server.store.get_grant(grant.grant_id).used_at_ms == 0
    assert side.allows_of("agent-a") == []
    message = _unavailable_in_time(took, answer, side)
    assert f"{side.where} stayed locked by another writer" in message, message
    assert "stayed locked by another writer" in _cut_short(caplog, "Check")
    _, retried = timed_check(side, 5.0)  # the agent's retry gets the grant's one use
    assert isinstance(retried, Decision) and retried.allow, retried
    assert side.server.store.get_grant(grant.grant_id).used_at_ms > 0


def test_a_check_waiting_for_the_sidecars_own_writer_gives_up_in_time(
    sqlite_sidecar: DeadlineSidecar, caplog: pytest.LogCaptureFixture
) -> None:
    side = sqlite_sidecar
    grant = single_use(side)
    caplog.set_level(logging.INFO, logger="handrail.authz")
    with _writer_held(side):
        took, answer = timed_check(side, DEADLINE_S)
    assert side.server.store.get_grant(grant.grant_id).used_at_ms == 0
    assert side.allows_of("agent-a") == []
    message = _unavailable_in_time(took, answer, side)
    assert f"the writer of {side.where} was busy" in message, message
    assert "was busy" in _cut_short(caplog, "Check")


def test_a_takeover_meeting_a_locked_file_is_not_made_later(
    sqlite_sidecar: DeadlineSidecar, caplog: pytest.LogCaptureFixture
) -> None:
    side = sqlite_sidecar
    caplog.set_level(logging.INFO, logger="handrail.authz")
    errors: list[AuthzError] = []
    with _file_locked(side), side.client("op", DEADLINE_S) as op:
        try:
            op.take_over(TARGET)
        except AuthzError as exc:
            errors.append(exc)
    lease = side.server.store.get_lease(TARGET)
    assert (lease.holder, lease.epoch) == ("agent-a", side.epoch)
    assert errors and "(UNAVAILABLE)" in str(errors[0]), errors
    assert "stayed locked" in _cut_short(caplog, "TakeOver")


def test_with_durable_decisions_no_allow_is_logged_for_a_caller_that_gave_up(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """``--durable-decisions`` inserts each decision under the writer: a plain allow waits
    for the file like a state change, and is not logged once its caller has given up."""
    with deadline_sidecar(tmp_path / "data", durable_decisions=True) as side:
        with side.client("op") as op:
            op.grant("agent-a", TARGET, ["submit"], [])
        caplog.set_level(logging.INFO, logger="handrail.authz")
        with _file_locked(side):
            took, answer = timed_check(side, DEADLINE_S)
        assert side.allows_of("agent-a") == []
        _unavailable_in_time(took, answer, side)
        assert "stayed locked" in _cut_short(caplog, "Check")
