"""The store's connection pool: the connection put back last is handed out first, and the
common case of taking and giving back a connection is done in a few lines."""

from __future__ import annotations

import time
from collections import deque
from typing import Any

import psycopg
import psycopg_pool
from psycopg import pq


class LastInFirstOut(psycopg_pool.ConnectionPool[psycopg.Connection[Any]]):
    """A pool that hands out the connection put back last (psycopg_pool's own takes the one
    idle longest). Under light or sequential load calls then keep to one connection, whose
    server process is awake and in cache; spread over every idle connection in turn, each
    statement woke another process, and a check's round trip took ~1.5x as long here.
    The pool's shrinking still closes the connection idle longest (its other end)."""

    # psycopg_pool's internals (3.2, 3.3): its idle deque ``_pool`` and ``_nconns_min``. A
    # release that changes them gets its own order back, never an error.

    def _get_ready_connection(self, timeout: float | None) -> psycopg.Connection[Any] | None:
        idle = getattr(self, "_pool", None)
        least = getattr(self, "_nconns_min", None)
        if isinstance(idle, deque) and isinstance(least, int) and idle and (timeout is None or timeout > 0.0):
            conn: psycopg.Connection[Any] = idle.pop()
            self._nconns_min = min(least, len(idle))
            return conn
        return super()._get_ready_connection(timeout)

    # Every statement of a check takes a connection and gives it back: psycopg_pool's
    # getconn and putconn were ~40 Python calls and ~10 us of CPU around each. The common
    # case (the pool open, an idle connection there, nobody waiting; one given back idle,
    # unexpired, with nobody waiting) is done here under the pool's lock in a few lines,
    # as psycopg_pool does it when it has no check or reset function (this pool has
    # neither); anything else takes psycopg_pool's own path. The internals used (3.2,
    # 3.3): the pool's ``_lock``, ``_pool``, ``_nconns_min``, ``_waiting``, ``_closed``,
    # ``_check``, ``_reset``, ``_drained_at``, and a connection's ``_pool``,
    # ``_created_at``, ``_expire_at``; a release without them takes psycopg_pool's path.

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        names = ("_lock", "_pool", "_nconns_min", "_waiting", "_closed", "_check", "_reset", "_drained_at")
        self._lean = all(hasattr(self, name) for name in names) and not self._check and not self._reset

    def getconn(self, timeout: float | None = None) -> psycopg.Connection[Any]:
        if self._lean:
            with self._lock:
                if self._pool and not self._closed and not self._waiting:
                    conn: psycopg.Connection[Any] = self._pool.pop()
                    self._nconns_min = min(self._nconns_min, len(self._pool))
                    conn._pool = self
                    return conn
        return super().getconn(timeout)

    def putconn(self, conn: psycopg.Connection[Any]) -> None:
        if (
            self._lean
            and getattr(conn, "_pool", None) is self
            and conn.pgconn.transaction_status == pq.TransactionStatus.IDLE
            and getattr(conn, "_created_at", 0.0) > self._drained_at
            and getattr(conn, "_expire_at", 0.0) > time.monotonic()
        ):
            with self._lock:
                if not self._closed and not self._waiting:
                    conn._pool = None
                    self._pool.append(conn)
                    return
        super().putconn(conn)
