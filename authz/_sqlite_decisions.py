"""The decision log over SQLite: every check's decision, journaled, then moved into SQLite.

:class:`DecisionLog` owns the ``decision_log`` table and the ids of the decisions in it.
A decision that changes no state is logged by :meth:`DecisionLog.record`: with the journal
on, its fields (``marshal``, framed) are copied into a memory-mapped journal file
(:mod:`._journal`: in the page cache when the call returns, so it survives ``kill -9``
exactly as a WAL commit with ``synchronous=NORMAL`` does) and :meth:`DecisionLog.flush`
later writes their JSON and moves them into SQLite in one transaction and deletes full
journals; a restart replays any journal a crash left (inserts are idempotent by sequence
number). Without the journal, each decision
is inserted directly (``synchronous=FULL`` with ``durable``). A decision that rests on a
state change is inserted in that change's transaction instead (:meth:`DecisionLog.insert`).

:class:`Checkpointer` is the background thread that keeps flushes, the next journal file
and WAL checkpoints off the request path.
"""

from __future__ import annotations

import contextlib
import json
import logging
import marshal
import random
import sqlite3
import threading
import time
from typing import Any

from handrail.authz import _deadline as deadline
from handrail.authz._core import check_text
from handrail.authz._errors import InvalidArgumentError, NotFoundError
from handrail.authz._journal import (
    JOURNAL_BYTES,
    DecisionJournal,
    frame,
    journal_format,
    journal_paths,
    read_frames,
    read_lines,
)
from handrail.authz._models import DecisionRecord, Spent
from handrail.authz._sqlite_db import SqliteDatabase
from handrail.authz._sqlite_schema import (
    DECISION_COLS,
    INSERT_DECISION,
    INSERT_DECISION_ONCE,
    SEQ_DIGITS,
    as_row,
    decision_fields,
    decision_record,
    decision_row,
    fields_row,
    plain,
    seq_of,
)

logger = logging.getLogger("handrail.authz")

#: Bytes of a spare journal whose pages are mapped ahead, off the request path: all of
#: them (one ``madvise``, about half a millisecond; a page first written by a check cost it
#: about 10 us).
PREFAULT_BYTES = JOURNAL_BYTES

#: The checkpointer renders a flush's JSON this many rows at a time, pausing between (see
#: :meth:`DecisionLog.flush`).
RENDER_CHUNK = 2
RENDER_PAUSE_S = 0.00005

#: The decisions a prune's batch deletes: in ``(after, upto]`` and logged before a time.
_PRUNED = "WHERE seq > ? AND seq <= ? AND at_ms < ?"

#: A decision id from its sequence number and 80 random bits (the format spec built once).
_DECISION_ID = f"{{:0{SEQ_DIGITS}x}}{{:020x}}".format


#: The types of a decision's parts before its body, as an earlier version journaled them.
_LEGACY_HEAD = (int, str, int, str, str, str)


def _legacy_row(line: bytes) -> tuple[Any, ...]:
    """The decision_log row of a JSON line that an earlier version journaled.

    Raises:
        ValueError: the line is JSON but not a decision's parts (its seven fields, typed).
    """
    parts = json.loads(line)
    if not (
        type(parts) is list
        and len(parts) == 7
        and all(type(p) is t for p, t in zip(parts[:6], _LEGACY_HEAD, strict=True))
        and type(parts[6]) is dict
    ):
        raise ValueError(f"a JSON line is not a decision's seven parts: {line[:80]!r}")
    return as_row(parts, line.decode("utf-8"))


class DecisionLog:
    """The ``decision_log`` table of one database, and the journal in front of it.

    Args:
        db: the database.
        durable: fsync every insert (``synchronous=FULL``) and journal nothing.
        journal: log decisions through the journal; only for the one process that serves
            the file (it replays journals left by a crash, here).

    Attributes:
        journal: the journal, or None when decisions are inserted directly.
    """

    def __init__(self, db: SqliteDatabase, *, durable: bool = False, journal: bool = False) -> None:
        self._db = db
        self._conn = db.connect("FULL" if durable else "NORMAL")
        self.journal = DecisionJournal(db.path) if journal and not durable else None
        self._flush_lock = threading.Lock()
        self._seq_lock = threading.Lock()
        self._last_seq = 0

    def open(self) -> None:
        """Replay what journals a crash left (with the journal on), then continue the ids
        after the last logged one. Call once the tables exist."""
        if self.journal is not None:
            self._replay()
        row = self._db.writer.execute("SELECT max(seq) FROM decision_log").fetchone()
        self._last_seq = int(row[0] or 0)

    def _replay(self) -> None:
        """Insert what journals left by a crash hold (complete lines only) past what was
        flushed from them (``journal_flushed``: a journal keeps flushed lines until it is
        full, and a prune may have deleted those since); delete them."""
        flushed = dict(self._db.writer.execute("SELECT journal, flushed_to FROM journal_flushed").fetchall())
        for path in journal_paths(self._db.path):
            start = int(flushed.get(path.name, 0))
            kind = journal_format(path)
            try:
                if kind == "foreign":
                    raise ValueError("it starts with neither an entry nor a JSON line")
                if kind == "frames":
                    rows = [fields_row(marshal.loads(payload)) for payload in read_frames(path, start)]
                elif kind == "lines":  # JSON lines, left by an earlier version
                    rows = [_legacy_row(line) for line in read_lines(path, start)]
                else:  # empty, or its first entry cut short by a kill: nothing was acknowledged
                    rows = []
            except (ValueError, TypeError, EOFError, IndexError, KeyError) as exc:  # not ours
                raise RuntimeError(
                    f"{path}: a decision journal entry does not decode ({exc}); the file is damaged or was "
                    "not written by a sidecar: move it aside to start without it"
                ) from None
            if rows:
                with self._db.atomic(self._conn) as conn:
                    conn.executemany(INSERT_DECISION_ONCE, rows)
            path.unlink()
        with self._db.atomic(self._conn) as conn:
            conn.execute("DELETE FROM journal_flushed")  # of files that are gone now

    def new_id(self) -> str:
        """A fresh decision id: 12 hex digits of log sequence, then 20 random ones."""
        with self._seq_lock:
            self._last_seq += 1
            seq = self._last_seq
        # the random part only keeps ids from being guessed by counting; it is no secret
        return _DECISION_ID(seq, random.getrandbits(80))

    # --- writing ------------------------------------------------------------------------------

    def record(self, record: DecisionRecord) -> None:
        """Append one decision, allow or deny, to the log (see the module docstring)."""
        journal = self.journal
        if journal is None:
            row = decision_row(record)
            with self._db.writing(self._conn, "logging the decision"):
                self._conn.execute(INSERT_DECISION, row)
            return
        deadline.start("logging the decision")  # an allow nobody would receive is not logged
        fields = decision_fields(record)  # its JSON is written when it is flushed
        try:
            payload = marshal.dumps(fields)
        except ValueError:  # an enum member among them (marshal writes only plain values)
            fields = plain(fields)
            payload = marshal.dumps(fields)
        journal.append(frame(payload), fields)

    @staticmethod
    def insert(conn: sqlite3.Connection, record: DecisionRecord) -> None:
        """Insert one decision inside the caller's transaction on ``conn``."""
        conn.execute(INSERT_DECISION, decision_row(record))

    @staticmethod
    def keep_spent(conn: sqlite3.Connection, spent: Spent) -> bool:
        """Keep an allow for a resend of its request, inside the caller's transaction;
        False when one of the same request is kept already (a lost race)."""
        cur = conn.execute(
            "INSERT INTO replays (replay_key, decision_id, grant_id, approval_id, at_ms)"
            " VALUES (?, ?, ?, ?, ?) ON CONFLICT (replay_key) DO NOTHING",
            (spent.key, spent.decision_id, spent.grant_id, spent.approval_id, spent.at_ms),
        )
        return cur.rowcount == 1

    def spent_by(self, key: str, since_ms: int) -> Spent | None:
        """The allow kept under ``key`` at or after ``since_ms``. Read under the write
        lock: the grant index a snapshot reads changes inside a commit's transaction, so a
        consumption it shows has committed its row once the lock is free."""
        with self._db.writing(self._db.writer, "reading an earlier allow") as conn:
            row = conn.execute(
                "SELECT replay_key, decision_id, grant_id, approval_id, at_ms FROM replays"
                " WHERE replay_key = ? AND at_ms >= ?",
                (key, since_ms),
            ).fetchone()
        return None if row is None else Spent(str(row[0]), str(row[1]), str(row[2]), str(row[3]), int(row[4]))

    def drop_spent(self, before_ms: int) -> int:
        """Delete the allows kept before ``before_ms``; how many."""
        with self._db.atomic(self._conn) as conn:
            return conn.execute("DELETE FROM replays WHERE at_ms < ?", (before_ms,)).rowcount

    def flush(self, *, yielding: bool = False) -> int:
        """Move journaled decisions into SQLite now; return how many.

        ``yielding`` (the checkpointer): pause every :data:`RENDER_CHUNK` rows while their
        JSON is written. That is pure Python, ~10 us a row, holding the GIL; a check that
        arrives meanwhile gets the GIL only when this thread blocks, so without the pauses
        a check in ~1.5 % waited for a whole batch (the served p99 rose by 100-300 us)."""
        journal = self.journal
        if journal is None:
            return 0
        with self._flush_lock:
            taken, full, ends = journal.take()
            if taken:
                try:
                    rows = []
                    for i, fields in enumerate(taken):
                        if yielding and i and not i % RENDER_CHUNK:
                            time.sleep(RENDER_PAUSE_S)
                        rows.append(fields_row(fields))
                    with self._db.atomic(self._conn) as conn:
                        conn.executemany(INSERT_DECISION_ONCE, rows)
                        conn.execute("DELETE FROM journal_flushed")  # journals discarded since
                        conn.executemany("INSERT INTO journal_flushed VALUES (?, ?)", ends.items())
                except BaseException:
                    journal.give_back(taken, full)  # the next flush tries them again
                    raise
            for done in full:  # every entry of it is in SQLite now
                done.discard()
            return len(taken)

    def close(self) -> None:
        """Flush, and delete the journals (nothing in them is needed any more)."""
        self.flush()
        if self.journal is not None:
            self.journal.close()

    # --- reading ------------------------------------------------------------------------------

    def get(self, decision_id: str) -> DecisionRecord:
        """One logged decision.

        Raises:
            NotFoundError: no decision has that id.
        """
        check_text("decision_id", decision_id, required=True)
        self.flush()
        conn = self._db.reader()
        seq = seq_of(decision_id)
        row = None
        if seq is not None:
            row = conn.execute(
                f"SELECT {DECISION_COLS} FROM decision_log WHERE seq = ? AND decision_id = ?",
                (seq, decision_id),
            ).fetchone()
        if row is None:  # an id from before the log had sequence numbers: look it up slowly
            row = conn.execute(
                f"SELECT {DECISION_COLS} FROM decision_log WHERE decision_id = ?", (decision_id,)
            ).fetchone()
        if row is None:
            raise NotFoundError(f"no decision with id {decision_id!r}")
        return decision_record(row)

    def query(
        self,
        principal: str = "",
        target: str = "",
        reason: str = "",
        since_ms: int = 0,
        limit: int = 50,
    ) -> list[DecisionRecord]:
        """Logged decisions, newest first, optionally filtered."""
        if limit <= 0 or limit > 10_000:
            raise InvalidArgumentError("limit", "must be within 1..10000")
        self.flush()
        sql = f"SELECT {DECISION_COLS} FROM decision_log WHERE at_ms >= ?"
        args: list[object] = [since_ms]
        for column, value in (("principal", principal), ("target", target), ("reason", reason)):
            if value:
                sql += f" AND {column} = ?"
                args.append(value)
        sql += " ORDER BY seq DESC LIMIT ?"
        args.append(limit)
        return [decision_record(r) for r in self._db.reader().execute(sql, args)]

    def count(self) -> int:
        """How many decisions the log holds."""
        self.flush()
        return int(self._db.reader().execute("SELECT count(*) FROM decision_log").fetchone()[0])

    #: Rows a prune deletes per transaction: ~2 ms of the write lock, which a state change
    #: (a grant consumed, an approval) may wait for.
    prune_batch = 1_000

    def top(self) -> int:
        """The newest decision's sequence number (0: none)."""
        self.flush()
        return int(self._db.reader().execute("SELECT coalesce(max(seq), 0) FROM decision_log").fetchone()[0])

    def window(self, after: int, below: int, limit: int) -> list[tuple[int, int]]:
        """``(seq, at_ms)`` of up to ``limit`` decisions after ``after`` and below
        ``below``, in order."""
        sql = "SELECT seq, at_ms FROM decision_log WHERE seq > ? AND seq < ? ORDER BY seq LIMIT ?"
        return [(int(s), int(t)) for s, t in self._db.reader().execute(sql, (after, below, limit))]

    def rows(self, after: int, upto: int, before_ms: int) -> list[tuple[Any, ...]]:
        """``seq`` and the decision columns of the decisions in ``(after, upto]`` logged
        before ``before_ms``, in order."""
        sql = f"SELECT seq, {DECISION_COLS} FROM decision_log {_PRUNED} ORDER BY seq"
        return self._db.reader().execute(sql, (after, upto, before_ms)).fetchall()

    def delete(self, after: int, upto: int, before_ms: int) -> int:
        """Delete the decisions in ``(after, upto]`` logged before ``before_ms``; how many."""
        with self._db.atomic(self._conn) as conn:
            return conn.execute(f"DELETE FROM decision_log {_PRUNED}", (after, upto, before_ms)).rowcount

    def delete_seqs(self, seqs: list[int], before_ms: int) -> int:
        """Delete the decisions of these sequence numbers that were logged before
        ``before_ms``; how many."""
        with self._db.atomic(self._conn) as conn:
            sql = "DELETE FROM decision_log WHERE seq = ? AND at_ms < ?"
            return conn.executemany(sql, [(seq, before_ms) for seq in seqs]).rowcount

    # --- the background thread ----------------------------------------------------------------

    def start_checkpointer(self, interval_s: float = 0.5, flush_s: float = 0.02) -> Checkpointer:
        """Start a :class:`Checkpointer` for this log and its database."""
        checkpointer = Checkpointer(self._db, self, interval_s=interval_s, flush_s=flush_s)
        checkpointer.start((self._db.writer, self._conn))
        return checkpointer


class Checkpointer:
    """A thread that moves journal flushes and WAL checkpoints off the write path: journaled
    decisions every ``flush_s`` (and the next journal file made ahead), a WAL checkpoint
    every ``interval_s``.

    Without it, SQLite checkpoints inside whichever commit crosses 1000 WAL pages, which is a
    multi-millisecond stall of one check. Build it with :meth:`DecisionLog.start_checkpointer`.
    """

    def __init__(self, db: SqliteDatabase, log: DecisionLog, *, interval_s: float, flush_s: float) -> None:
        self._db = db
        self._log = log
        self._interval_s = interval_s
        self._flush_s = flush_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, writers: tuple[sqlite3.Connection, ...]) -> None:
        """Take automatic checkpoints away from ``writers`` and start the thread."""
        for conn in writers:
            conn.execute("PRAGMA wal_autocheckpoint=0")
        conn = self._db.connect("FULL")
        self._thread = threading.Thread(target=self._run, args=(conn,), name="authz-checkpoint", daemon=True)
        self._thread.start()

    def _run(self, conn: sqlite3.Connection) -> None:
        ticks = failures = 0
        log, journal = self._log, self._log.journal
        while not self._stop.wait(self._flush_s):
            ticks += 1
            try:
                log.flush(yielding=True)
                if journal is not None:
                    with contextlib.suppress(OSError):  # a full disk: a check will say so
                        journal.prepare_spare(PREFAULT_BYTES)
                if ticks * self._flush_s >= self._interval_s:
                    ticks = 0
                    conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
            except Exception as exc:  # the thread must live on: a full disk, an I/O error, a bug
                if self._stop.is_set() or self._db.closed:
                    return  # the store is closing
                failures += 1  # a full disk, an I/O error: said, and tried again next tick
                if failures == 1 or failures % 500 == 0:
                    logger.warning("authz: flushing the decision journal failed (%d times): %s", failures, exc)
                continue
            if failures:
                logger.warning("authz: the decision journal flushes again after %d failures", failures)
                failures = 0

    def stop(self) -> None:
        """Stop the thread and wait for it (up to 5 s)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
