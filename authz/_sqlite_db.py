"""One SQLite file: its connections, the store's clock, and the one write transaction.

Every part of :class:`~handrail.authz.SqliteStore` (grants, leases, approvals, principals,
the decision log, the migrations) shares one :class:`SqliteDatabase`: reads go through the
calling thread's own connection, writes through :meth:`SqliteDatabase.atomic`, which holds
the process's one write lock (SQLite has one writer anyway, and waiting on a Python lock
costs microseconds where SQLite's busy handler sleeps milliseconds).

Under a caller's deadline (:mod:`._deadline`) a write waits for that lock, and for the
file's own (another process writing, as a backup or a command may), only until a margin
before it (:class:`StoreBusyError`, UNAVAILABLE, naming the file), and is not started once
it has passed (:class:`DeadlineExceededError`): a grant is not consumed, a lease not
changed, a decision not logged, for a caller that has given up. In a call without a
deadline, a file still locked after SQLite's 10 s is :class:`StoreBusyError` too, never an
internal error (outside a call, the command line, it stays SQLite's own error).
"""

from __future__ import annotations

import math
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from handrail.authz import _deadline as deadline
from handrail.authz._errors import StoreBusyError

#: How long SQLite waits for another connection's write lock (without a nearer deadline).
BUSY_S = 10.0


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
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=BUSY_S)
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
    def atomic(self, conn: sqlite3.Connection | None = None, what: str = "a write") -> Iterator[sqlite3.Connection]:
        """A write transaction (``BEGIN IMMEDIATE``) under the write lock, on ``conn``
        (default :attr:`writer`); rolled back when the block raises. Once it has committed,
        the call's deadline no longer applies (see :mod:`._deadline`).

        Raises:
            StoreBusyError, DeadlineExceededError: as :meth:`writing`.
        """
        conn = conn or self.writer
        with self.writing(conn, what):
            conn.execute("BEGIN IMMEDIATE")
            try:
                deadline.start(what)
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
        deadline.changed()

    @contextmanager
    def writing(self, conn: sqlite3.Connection, what: str) -> Iterator[sqlite3.Connection]:
        """Hold the write lock to write ``what`` on ``conn`` (a transaction, or one insert
        outside any). Under a caller's deadline the wait for the lock, and SQLite's for the
        file's (its busy timeout, put back after), end a margin before it.

        Raises:
            StoreBusyError: the lock, or the file's, stayed taken (the message names the file).
            DeadlineExceededError: the deadline passed before ``what`` could start.
        """
        wait, bounded = deadline.wait_s(math.inf, what)
        if not self.write_lock.acquire(timeout=wait if bounded else -1):
            raise StoreBusyError(f"the writer of {self.path} was busy for {wait:.3g} s{_WHY}")
        try:
            deadline.start(what)
            wait, bounded = deadline.wait_s(BUSY_S, what)
            if bounded:
                conn.execute(f"PRAGMA busy_timeout = {max(1, int(wait * 1000))}")
            try:
                yield conn
            except sqlite3.OperationalError as exc:
                busy = (getattr(exc, "sqlite_errorcode", 0) or 0) & 0xFF in _BUSY_CODES
                if not busy or not deadline.in_call():  # the command line words its own
                    raise
                why = _WHY if bounded else ""
                raise StoreBusyError(f"{self.path} stayed locked by another writer for {wait:.3g} s{why}") from None
            finally:
                if bounded:
                    conn.execute(f"PRAGMA busy_timeout = {int(BUSY_S * 1000)}")
        finally:
            self.write_lock.release()

    def close(self) -> None:
        """Close every connection this database opened (from any thread)."""
        with self._lock:
            self._closed = True
            conns, self._all = self._all, []
        for conn in conns:
            conn.close()


_BUSY_CODES = (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
_BUSY_CODES = (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
_WHY = " (what the caller's deadline left, less a margin for the answer)"
