"""How a PostgreSQL store waits for a statement's answer (``authz/_pg_wait.py``): polled
for a moment when it is the only statement in flight and polling has been the faster way,
blocked otherwise; the answer is libpq's own either way, errors and lost connections too.

The choice is tested on a scripted connection (its timings are set, not measured); the
answers, errors and a connection cut in the middle of a wait on the session's PostgreSQL.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from psycopg import pq

from handrail.authz import _pg_wait
from handrail.authz._pg_wait import EXPLORE_EVERY, SPIN_ENV, WINDOW, Waiter, spin_us_from_env


@pytest.mark.parametrize(("text", "value"), [("", 250), ("0", 0), (" 40 ", 40), ("10000", 10_000)])
def test_the_budget_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch, text: str, value: int) -> None:
    monkeypatch.setenv(SPIN_ENV, text)
    assert spin_us_from_env() == value


@pytest.mark.parametrize("text", ["-1", "1.5", "10001", "fast", "٣"])
def test_a_bad_budget_is_one_line_naming_the_variable(monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    monkeypatch.setenv(SPIN_ENV, text)
    with pytest.raises(
        ValueError, match=rf"^{SPIN_ENV}=.*: expected a whole number of microseconds within 0\.\.10000$"
    ):
        spin_us_from_env()


def test_a_sidecar_given_a_bad_budget_does_not_start_and_says_why_in_one_line() -> None:
    env = {**os.environ, SPIN_ENV: "soon"}
    argv = [sys.executable, "-m", "handrail", "authz", "serve", "--store", "postgresql://127.0.0.1:9/nowhere"]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert lines == [
        f"handrail-authz: cannot start: {SPIN_ENV}='soon': expected a whole number of microseconds within 0..10000"
    ]


# --- the choice, on a scripted connection ---------------------------------------------------------


class Scripted:
    """A libpq connection whose answer is ready at once; which way it was waited for is
    recorded. ``hold``: the blocking call waits for it to be set (a statement in flight)."""

    def __init__(self) -> None:
        self.ways: list[str] = []
        self.hold: threading.Event | None = None
        self.mine, self.theirs = socket.socketpair()
        self.theirs.send(b"x")  # the socket reads as ready
        self._busy = False
        self._pending: _Result | None = None

    def exec_prepared(self, name: bytes, values: list[bytes]) -> str:
        self.ways.append("blocked")
        if self.hold is not None:
            self.hold.wait(5)
        return "result"

    def send_query_prepared(self, name: bytes, values: list[bytes]) -> None:
        self.ways.append("polled")
        self._busy, self._pending = True, _Result()

    def flush(self) -> int:
        return 0

    @property
    def socket(self) -> int:
        return self.mine.fileno()

    def consume_input(self) -> None:
        self._busy = False

    def is_busy(self) -> bool:
        return self._busy

    def get_result(self) -> _Result | None:
        result, self._pending = self._pending, None
        return result

    def close(self) -> None:
        self.mine.close()
        self.theirs.close()


class _Result:
    status = pq.ExecStatus.TUPLES_OK


def measured(waiter: Waiter, blocked: float, polled: float) -> Waiter:
    """``waiter`` after a window of round trips each way, as it learns them."""
    for _ in range(WINDOW):
        waiter._learn(0, blocked)
        waiter._learn(1, polled)
    return waiter


@pytest.fixture
def scripted() -> Iterator[Callable[[], Scripted]]:
    made: list[Scripted] = []

    def make() -> Scripted:
        made.append(Scripted())
        return made[-1]

    yield make
    for one in made:
        one.close()


def test_a_lone_statement_is_waited_for_the_chosen_way_and_the_other_way_now_and_then(
    scripted: Callable[[], Scripted],
) -> None:
    conn, waiter = scripted(), Waiter(250)
    for chosen, other in ((False, "polled"), (True, "blocked")):
        conn.ways.clear()
        for _ in range(EXPLORE_EVERY * 4):
            waiter.poll = chosen  # (the scripted answers take no time: keep the choice)
            waiter.exec_prepared(conn, b"s", [])
        assert conn.ways.count(other) == 4  # only to keep its measure fresh


@pytest.mark.parametrize(
    ("blocked", "polled", "poll"),
    [
        (30e-6, 280e-6, False),  # the backend shares this core: polling holds the core it needs
        (120e-6, 60e-6, True),  # the backend is on another core: polling saves the wake-up
        (500e-6, 470e-6, False),  # a database across a network: a tenth or nothing
    ],
)
def test_the_way_is_chosen_by_the_medians_of_each_window(blocked: float, polled: float, poll: bool) -> None:
    assert measured(Waiter(250), blocked, polled).poll is poll


def test_a_stall_now_and_then_does_not_move_the_choice() -> None:
    waiter = measured(Waiter(250), 120e-6, 60e-6)
    for _ in range(WINDOW // 2):
        waiter._learn(1, 50e-3)  # fewer than half the window: 50 ms stalls
    assert waiter.poll
    for _ in range(4):  # (the choice is looked at again every fourth poll)
        waiter._learn(1, 50e-3)
    assert not waiter.poll  # most of the window stalled: polling is no longer the faster


def test_a_new_waiter_measures_both_ways_first(scripted: Callable[[], Scripted]) -> None:
    conn, waiter = scripted(), Waiter(250)
    waiter.exec_prepared(conn, b"s", [])
    waiter.exec_prepared(conn, b"s", [])
    assert conn.ways == ["blocked", "polled"] and all(waiter.took) and waiter.polled == 1


def test_a_statement_sent_while_another_is_in_flight_blocks_and_is_not_measured(
    scripted: Callable[[], Scripted],
) -> None:
    first, second, waiter = scripted(), scripted(), Waiter(250)
    first.hold = threading.Event()
    worker = threading.Thread(target=waiter.exec_prepared, args=(first, b"s", []))
    worker.start()  # a new waiter blocks first: held in flight
    try:
        deadline = time.monotonic() + 5
        while _pg_wait._in_flight[0] == 0 and time.monotonic() < deadline:
            time.sleep(0.001)
        waiter.poll = True  # a lone one would be polled for now, but the replica is busy
        assert waiter.exec_prepared(second, b"s", []) == "result"
        assert second.ways == ["blocked"] and not any(waiter.took)
    finally:
        first.hold.set()
        worker.join(5)
    assert _pg_wait._in_flight[0] == 0 and len(waiter.took[0]) == 1  # the first, measured once done


def test_a_budget_of_zero_always_blocks(scripted: Callable[[], Scripted]) -> None:
    conn, waiter = scripted(), Waiter(0)
    for _ in range(EXPLORE_EVERY * 2):
        waiter.poll = True
        waiter.exec_prepared(conn, b"s", [])
    assert set(conn.ways) == {"blocked"}


# --- answers from the session's PostgreSQL ------------------------------------------------------


@pytest.fixture
def conn(pg_dsn: Callable[[], str]) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(pg_dsn(), autocommit=True) as c:
        yield c


@pytest.mark.slow
@pytest.mark.parametrize("way", [0, 1])
def test_either_way_the_answer_is_libpqs_own(conn: psycopg.Connection[Any], way: int) -> None:
    pgconn, waiter = conn.pgconn, measured(Waiter(5000), 1.0, 1e-6) if way else measured(Waiter(5000), 1e-6, 1.0)
    pgconn.prepare(b"rows", b"SELECT g, $1::text FROM generate_series(1, 3) AS g")
    pgconn.prepare(b"bad", b"SELECT 1 / $1::int")
    for _ in range(3):  # (the third is the first exploration's neighbour: either way counts)
        rows = waiter.exec_prepared(pgconn, b"rows", [b"'); DROP TABLE x; --"])
        assert rows.status == pq.ExecStatus.TUPLES_OK and rows.ntuples == 3
        assert rows.get_value(2, 1) == b"'); DROP TABLE x; --"
        failed = waiter.exec_prepared(pgconn, b"bad", [b"0"])
        assert failed.status == pq.ExecStatus.FATAL_ERROR
        assert b"division by zero" in (failed.error_message or b"")
    assert waiter.polled - WINDOW == (6 if way else 0)


@pytest.mark.slow
def test_a_connection_cut_while_its_answer_is_polled_for_raises_as_libpq_does(
    conn: psycopg.Connection[Any], pg_dsn: Callable[[], str]
) -> None:
    pgconn, waiter = conn.pgconn, measured(Waiter(10_000), 1.0, 1e-6)  # poll
    pgconn.prepare(b"slow", b"SELECT pg_sleep($1::float8)")
    pid = pgconn.backend_pid
    killer = threading.Timer(0.2, lambda: _terminate(pg_dsn(), pid))
    killer.start()
    try:
        with pytest.raises(psycopg.OperationalError):
            result = waiter.exec_prepared(pgconn, b"slow", [b"5"])
            if result.status != pq.ExecStatus.TUPLES_OK:  # libpq may hand the cut back as a result
                raise psycopg.OperationalError(result.error_message.decode())
    finally:
        killer.join()
    assert _pg_wait._in_flight[0] == 0


def _terminate(dsn: str, pid: int) -> None:
    with psycopg.connect(dsn, autocommit=True) as other:
        other.execute("SELECT pg_terminate_backend(%s)", (pid,))
