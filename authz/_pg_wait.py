"""Waiting for the answer to a check's statement: poll a moment before sleeping.

A check on a remembered snapshot is one statement, and on an idle replica the thread that
sent it has nothing else to do until the answer comes. Blocked in ``poll``, it lets its
core go idle, and the answer then has to wake that core as well as the thread: on the
two-core reference machine (a virtual machine whose idle cores halt) an insert to a
backend on the other core took 118 us at p50 that way and 66 us when the caller kept
polling its socket instead.

So a statement that is the only one this process has in flight may be waited for by
polling its socket, without blocking and with the interpreter's lock released at each
poll, for up to :data:`DEFAULT_SPIN_US` (``HANDRAIL_AUTHZ_PG_SPIN_US``; 0 turns it off),
and only then in a blocking ``select``. When other statements are in flight the replica
is busy, its core does not idle, and a poll would only take the CPU from the threads that
have work: those wait as before.

Polling is not always the faster: with the database's backend on the same core (a small
host that keeps both on one CPU) the poller holds the core the answer needs, and the same
insert took 49 us polled against 26 us blocked. So the waiter measures both: it keeps the
last round trips of lone statements each way, polls only while their median has been at
least a tenth faster than blocking's (a database across a network answers after the
budget, and polling would only spend a core), and every :data:`EXPLORE_EVERY`-th lone
statement waits the other way, so that a change of placement is noticed.
"""

from __future__ import annotations

import os
import select
import statistics
import threading
import time
from collections import deque
from typing import Any

import psycopg
from psycopg import pq

#: How long a lone statement's answer is polled for before the thread sleeps, in us.
DEFAULT_SPIN_US = 250

#: The environment variable that sets it (0: never poll).
SPIN_ENV = "HANDRAIL_AUTHZ_PG_SPIN_US"

#: One lone statement in this many is waited for the way that has been slower.
EXPLORE_EVERY = 16

#: How many round trips of each way the choice looks at.
WINDOW = 15

#: Polling is the way only while it takes at most this share of blocking's time.
GAIN = 0.9

_MAX_SPIN_US = 10_000

# The statements in flight in this process, through every pool (a store has two).
_lock = threading.Lock()
_in_flight = [0]


def spin_us_from_env() -> int:
    """The polling budget ``HANDRAIL_AUTHZ_PG_SPIN_US`` sets (:data:`DEFAULT_SPIN_US` unset).

    Raises:
        ValueError: one line naming the variable, for a value that is not a whole number
            of microseconds within 0..10000.
    """
    text = os.environ.get(SPIN_ENV, "").strip()
    if not text:
        return DEFAULT_SPIN_US
    if not (text.isascii() and text.isdigit()) or int(text) > _MAX_SPIN_US:
        raise ValueError(f"{SPIN_ENV}={text!r}: expected a whole number of microseconds within 0..{_MAX_SPIN_US}")
    return int(text)


class Waiter:
    """Runs prepared statements on libpq connections, polling for a lone one's answer
    when that has been the faster way (see the module).

    Args:
        spin_us: the polling budget per statement (0: always block, as libpq's own
            ``PQexecPrepared`` does).

    Attributes:
        took: the last :data:`WINDOW` round trips of lone statements, in seconds, blocked
            and polled.
        poll: whether lone statements are polled for (but every
            :data:`EXPLORE_EVERY`-th).
        polled: how many lone statements were polled for.
    """

    def __init__(self, spin_us: int = DEFAULT_SPIN_US) -> None:
        self.spin_s = spin_us / 1e6
        self.took: tuple[deque[float], deque[float]] = (deque(maxlen=WINDOW), deque(maxlen=WINDOW))
        self.poll = False
        self.polled = 0
        self._lone = 0

    def exec_prepared(self, pgconn: Any, name: bytes, values: list[bytes]) -> pq.abc.PGresult:
        """What ``pgconn.exec_prepared(name, values)`` returns (the first failed result, or
        the last), the answer waited for as the module says. A lost connection raises
        :class:`psycopg.OperationalError`, as libpq's own call reports it."""
        if not self.spin_s:
            return pgconn.exec_prepared(name, values)  # type: ignore[no-any-return]
        with _lock:
            _in_flight[0] += 1
            alone = _in_flight[0] == 1
            if alone:
                self._lone += 1
            poll = alone and self.poll != (self._lone % EXPLORE_EVERY == 0)
        took = -1.0
        try:
            t0 = time.perf_counter()
            result: pq.abc.PGresult = self._polled(pgconn, name, values) if poll else pgconn.exec_prepared(name, values)
            took = time.perf_counter() - t0
            return result
        finally:
            with _lock:
                _in_flight[0] -= 1
                if alone and took >= 0:  # (one sent while others were in flight tells nothing)
                    self._learn(int(poll), took)

    def _polled(self, pgconn: Any, name: bytes, values: list[bytes]) -> pq.abc.PGresult:
        """``pgconn.exec_prepared(name, values)``, its answer polled for first."""
        pgconn.send_query_prepared(name, values)
        fd = pgconn.socket
        while pgconn.flush():  # (a blocking connection has sent it all already)
            select.select([], [fd], [])
        ready = _poll(fd, self.spin_s)
        while True:
            if not ready:
                select.select([fd], [], [])
            pgconn.consume_input()
            if not pgconn.is_busy():
                return _result(pgconn)
            ready = False

    def _learn(self, way: int, took: float) -> None:
        """Keep one lone statement's round trip, and choose the way again: a way not
        measured yet is tried next; then polling while the median of its window is at most
        :data:`GAIN` of blocking's (medians: a stall now and then moves neither)."""
        self.polled += way
        self.took[way].append(took)
        blocked, polled = self.took
        if not blocked or not polled:
            self.poll = bool(blocked)
        elif way != self.poll or self.polled % 4 == 0:  # (sorting costs: not every time)
            self.poll = statistics.median(polled) < GAIN * statistics.median(blocked)


def _poll(fd: int, spin_s: float) -> bool:
    """Whether ``fd`` became readable within ``spin_s``, polled without blocking (each
    ``select`` releases the interpreter's lock, so other threads run meanwhile)."""
    until = time.perf_counter() + spin_s
    while not select.select([fd], [], [], 0)[0]:
        if time.perf_counter() >= until:
            return False
    return True


def _result(pgconn: Any) -> pq.abc.PGresult:
    """The results of the statement just answered: the first that failed, else the last."""
    chosen = None
    while (result := pgconn.get_result()) is not None:
        if chosen is None or chosen.status not in _FAILED:
            chosen = result
    if chosen is None:
        raise psycopg.OperationalError("the connection was lost")
    return chosen  # type: ignore[no-any-return]


_FAILED = frozenset((pq.ExecStatus.FATAL_ERROR, pq.ExecStatus.BAD_RESPONSE, pq.ExecStatus.NONFATAL_ERROR))
