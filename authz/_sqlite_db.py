"""One SQLite file: its connections, the store's clock, and the one write transaction.

Every part of :class:`~handrail.authz.SqliteStore` (grants, leases, approvals, principals,
the decision log, the migrations) shares one :class:`SqliteDatabase`: reads go through the
calling thread's own connection, writes through :meth:`SqliteDatabase.atomic`, which holds
the process's one write lock (SQLite has one writer anyway, and waiting on a Python lock
costs microseconds where SQLite's busy handler sleeps milliseconds).
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path


def wall_clock_ms() -> int:
    """The wall clock, in unix milliseconds."""
    return time.time_ns() // 1_000_000


class SqliteDatabase:
    """The connections of one SQLite file (WAL) and its write transaction.

    Args:
        path: the SQLite file (created if missing).
        clock: returns unix milliseconds; the only clock that judges expiry.

    Attributes:
        path: the file.
        writer: the connection state changes are written on (``synchronous=FULL``).
        write_lock: held by :meth:`atomic`; whoever writes outside a transaction (a
            single autocommit insert) holds it too.
    """

    def __init__(self, path: str | Path, clock: Callable[[], int] = wall_clock_ms) -> None:
        self.path = Path(path)
        self.now_ms = clock
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._lock = threading.Lock()  # guards _all and _closed
        self.write_lock = threading.RLock()  # one writer at a time, in this process
        self._closed = False
        self.writer = self.connect("FULL")

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    def connect(self, synchronous: str = "FULL") -> sqlite3.Connection:
        """A new connection, closed with the database (``synchronous`` FULL or NORMAL).

        Raises:
            RuntimeError: the database is closed.
        """
        if self._closed:
            raise RuntimeError("the store is closed")
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=10.0)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(f"PRAGMA synchronous={synchronous}")
        conn.execute("PRAGMA foreign_keys=ON")
        with self._lock:
            self._all.append(conn)
        return conn

    def reader(self) -> sqlite3.Connection:
        """This thread's connection for reads."""
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = self.connect("FULL")
        return conn

    @contextmanager
    def atomic(self, conn: sqlite3.Connection | None = None) -> Iterator[sqlite3.Connection]:
        """A write transaction (``BEGIN IMMEDIATE``) under the write lock, on ``conn``
        (default :attr:`writer`); rolled back when the block raises."""
        with self.write_lock:
            conn = conn or self.writer
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    def close(self) -> None:
        """Close every connection this database opened (from any thread)."""
        with self._lock:
            self._closed = True
            conns, self._all = self._all, []
        for conn in conns:
            conn.close()
