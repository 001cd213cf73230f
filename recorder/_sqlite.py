"""The SQLite ledger store: one file, WAL, ``synchronous=FULL``, recorded migrations.

SQL triggers refuse UPDATE and DELETE on ``entries``; the ``meta`` table records the head
(last seq and hash) in the same transaction as each append, so appends chain onto the
recorded head and a plain deletion of the tail is found. Several processes may append to
one file: ``BEGIN IMMEDIATE`` serializes them. Every ``sqlite3`` error becomes a
:class:`~handrail.recorder.LedgerError` here and nowhere else.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, TypeVar

from ._chain import hash_columns, now_ms
from ._entry import Entry, PreparedEntry, entry_from_row
from ._errors import LedgerError
from ._recovery import RecoveredAction, UnresolvedAction, intent_params
from ._store import BulkRow, ChainSnapshot, EntryQuery, RecoveryWrite, StoredRow
from ._verify import VerifyReport, verify

__all__ = ["SqliteLedgerStore", "verify_file"]

_T = TypeVar("_T")

_COLUMNS = (
    "seq, ts_ms, kind, session_id, action_id, idempotency_key, principal, "
    "principal_kind, epoch, body, prev_hash, entry_hash"
)
_INSERT = f"INSERT INTO entries ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
_GET_HEAD = "SELECT key, value FROM meta WHERE key IN ('head_seq', 'head_hash')"
_SET_HEAD = "UPDATE meta SET value = CASE key WHEN 'head_seq' THEN ? ELSE ? END WHERE key IN ('head_seq', 'head_hash')"

# Each migration runs once, in order, and is recorded in ``migrations``.
_MIGRATIONS: tuple[tuple[str, str], ...] = (
    (
        "create entries",
        """
        CREATE TABLE entries (
            seq INTEGER PRIMARY KEY,
            ts_ms INTEGER NOT NULL,
            kind TEXT NOT NULL,
            session_id TEXT NOT NULL DEFAULT '',
            action_id TEXT NOT NULL DEFAULT '',
            idempotency_key TEXT NOT NULL DEFAULT '',
            principal TEXT NOT NULL DEFAULT '',
            principal_kind TEXT NOT NULL
                CHECK (principal_kind IN ('agent', 'human', 'system')),
            epoch INTEGER NOT NULL DEFAULT 0,
            body TEXT NOT NULL,
            prev_hash TEXT NOT NULL,
            entry_hash TEXT NOT NULL
        );
        CREATE INDEX entries_by_key ON entries (session_id, idempotency_key, kind);
        CREATE INDEX entries_by_action ON entries (action_id);
        CREATE TRIGGER entries_no_update BEFORE UPDATE ON entries
        BEGIN
            SELECT RAISE(ABORT, 'ledger entries are append-only: UPDATE refused');
        END;
        CREATE TRIGGER entries_no_delete BEFORE DELETE ON entries
        BEGIN
            SELECT RAISE(ABORT, 'ledger entries are append-only: DELETE refused');
        END;
        INSERT INTO meta (key, value) VALUES ('head_seq', '0');
        INSERT INTO meta (key, value) VALUES ('head_hash', '0000000000000000000000000000000000000000000000000000000000000000');
        """,  # noqa: E501
    ),
    (
        # Recovery and the unresolved scan read only these (covering) indexes.
        "index actions by kind",
        """
        CREATE INDEX entries_by_kind ON entries (kind, session_id, action_id);
        """,
    ),
)

_TARGET = """
    coalesce((SELECT json_extract(s.body, '$.target') FROM entries AS s
              WHERE s.session_id = {e}.session_id AND s.idempotency_key = ''
                AND s.kind = 'session_open'
              ORDER BY s.seq LIMIT 1), '')
"""

# Intents with no result and no reconcile for the same (session, action). The inner
# query reads only the covering index; bodies are fetched for the hits alone.
_INTERRUPTED = f"""
SELECT i.seq, i.session_id, i.action_id, i.idempotency_key, i.principal, i.principal_kind,
       i.epoch, i.body, {_TARGET.format(e="i")}
FROM entries AS i
WHERE i.seq IN (
    SELECT o.seq FROM entries AS o
    WHERE o.kind = 'intent' AND NOT EXISTS (
        SELECT 1 FROM entries AS r
        WHERE r.kind IN ('result', 'reconcile')
          AND r.session_id = o.session_id AND r.action_id = o.action_id))
ORDER BY i.seq
"""

# UNKNOWN results with no later result or reconcile for the same (session, action).
_UNRESOLVED = f"""
SELECT u.seq, u.session_id, u.action_id, u.idempotency_key, u.principal, u.principal_kind,
       u.epoch, json_extract(u.body, '$.reason'),
       (SELECT p.body FROM entries AS p
        WHERE p.kind = 'intent' AND p.session_id = u.session_id AND p.action_id = u.action_id
        ORDER BY p.seq DESC LIMIT 1),
       {_TARGET.format(e="u")}
FROM entries AS u
WHERE u.kind = 'result' AND upper(json_extract(u.body, '$.outcome')) = 'UNKNOWN'
  AND NOT EXISTS (
    SELECT 1 FROM entries AS l
    WHERE l.kind IN ('result', 'reconcile')
      AND l.session_id = u.session_id AND l.action_id = u.action_id AND l.seq > u.seq)
ORDER BY u.seq
"""


class SqliteLedgerStore:
    """A ledger's entries in one SQLite file; one connection, guarded by a lock.

    Args:
        path: the SQLite file; created (with its parent folder) when missing.
        busy_timeout_s: how long to wait for another process's write lock.
        read_only: only read (an auditor's copy): the file is opened read-only and never
            migrated; when SQLite cannot read it in place (a read-only directory holding a
            WAL database), a private copy of the file and its WAL is read instead.
    """

    def __init__(self, path: str | Path, *, busy_timeout_s: float = 10.0, read_only: bool = False) -> None:
        self.path = Path(path)
        self._lock = threading.RLock()  # guards the connection
        self._closed = False
        self._copy_dir: str | None = None
        self.read_only = read_only
        self.read_path = self.path  # the file reads go to (a private copy, read-only at times)
        if read_only:
            self._conn = self._open_read_only()
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(
                self.path,
                timeout=busy_timeout_s,
                isolation_level=None,  # transactions are explicit: BEGIN IMMEDIATE
                check_same_thread=False,
            )
        except (OSError, sqlite3.Error) as exc:
            raise LedgerError(f"cannot open ledger {self.path}: {exc}") from exc
        try:
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=FULL")
            self._migrate()
        except sqlite3.Error as exc:
            self._conn.close()
            raise LedgerError(f"cannot open ledger {self.path}: {exc}") from exc

    def _open_read_only(self) -> sqlite3.Connection:
        if not self.path.is_file():
            raise LedgerError(f"no ledger at {self.path}", reason="NOT_FOUND")
        try:
            conn = _connect_read_only(self.path)
            conn.execute("SELECT value FROM meta LIMIT 1").fetchall()
            self.read_path = self.path
            return conn
        except sqlite3.Error:
            pass  # e.g. a WAL database in a directory we may not write: read a copy
        try:
            self._copy_dir = tempfile.mkdtemp(prefix="handrail-ledger-ro-")
            copy = Path(self._copy_dir) / self.path.name
            shutil.copyfile(self.path, copy)
            for suffix in ("-wal",):
                side = self.path.with_name(self.path.name + suffix)
                if side.is_file():
                    shutil.copyfile(side, copy.with_name(copy.name + suffix))
            conn = sqlite3.connect(copy, isolation_level=None, check_same_thread=False)
            conn.execute("SELECT value FROM meta LIMIT 1").fetchall()  # replays the copied WAL
            self.read_path = copy
            return conn
        except (OSError, sqlite3.Error) as exc:
            self._drop_copy()
            raise LedgerError(f"cannot read ledger {self.path}: {exc}") from None

    def _drop_copy(self) -> None:
        if self._copy_dir is not None:
            shutil.rmtree(self._copy_dir, ignore_errors=True)
            self._copy_dir = None

    @property
    def location(self) -> str:
        return str(self.path)

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                self._conn.close()
                self._drop_copy()

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            if self._closed:
                raise LedgerError(f"ledger {self.path} is closed")
            if self.read_only:
                raise LedgerError(f"ledger {self.path} is open read-only", reason="READ_ONLY")
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
                self._conn.execute("COMMIT")
            except BaseException:
                if self._conn.in_transaction:  # also when COMMIT itself failed
                    self._conn.execute("ROLLBACK")
                raise

    def _migrate(self) -> None:
        with self._write() as conn:
            conn.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")
            conn.execute(
                "CREATE TABLE IF NOT EXISTS migrations ("
                "version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_ms INTEGER NOT NULL)"
            )
            done = {row[0] for row in conn.execute("SELECT version FROM migrations")}
            for version, (name, sql) in enumerate(_MIGRATIONS, start=1):
                if version in done:
                    continue
                # executescript() would COMMIT our transaction; run statement by statement.
                for statement in _split_sql(sql):
                    conn.execute(statement)
                conn.execute(
                    "INSERT INTO migrations (version, name, applied_ms) VALUES (?, ?, ?)",
                    (version, name, now_ms()),
                )

    # -- writing -------------------------------------------------------------------

    def append(self, entries: Sequence[PreparedEntry]) -> list[Entry]:
        try:
            with self._write() as conn:
                stored = _insert(conn, entries)
        except sqlite3.Error as exc:  # nothing was written
            raise LedgerError(f"cannot append to ledger {self.path}: {exc}") from exc
        return [entry_from_row(row) for row in stored]

    def bulk_load(self, rows: Iterable[BulkRow]) -> tuple[int, str]:
        try:
            with self._write() as conn:
                head_seq, prev = _read_head(conn)
                hash_of = hash_columns

                def chained() -> Iterator[StoredRow]:
                    nonlocal head_seq, prev
                    for ts, kind, sid, aid, key, who, who_kind, epoch, body in rows:
                        head_seq += 1
                        digest = hash_of(prev, head_seq, ts, kind, sid, aid, key, who, who_kind, epoch, body)
                        yield (head_seq, ts, kind, sid, aid, key, who, who_kind, epoch, body, prev, digest)  # fmt: skip
                        prev = digest

                conn.executemany(_INSERT, chained())
                conn.execute(_SET_HEAD, (str(head_seq), prev))
        except sqlite3.Error as exc:
            raise LedgerError(f"cannot append to ledger {self.path}: {exc}") from exc
        return head_seq, prev

    def recover(self, result_for: Callable[[RecoveredAction], PreparedEntry]) -> RecoveryWrite:
        try:
            with self._write() as conn:
                found = _find_interrupted(conn)
                if not found:
                    return RecoveryWrite([], None)
                stored = _insert(conn, [result_for(action) for action in found])
        except sqlite3.Error as exc:
            raise LedgerError(f"cannot recover ledger {self.path}: {exc}") from exc
        marked = [action.with_result(row[0]) for action, row in zip(found, stored, strict=True)]
        return RecoveryWrite(marked, (stored[-1][0], stored[-1][11]))

    # -- reading -------------------------------------------------------------------

    def unresolved(self) -> list[UnresolvedAction]:
        return self._read(_find_unresolved)

    def select(self, query: EntryQuery) -> list[Entry]:
        where, params = _where(query)
        clause = f"WHERE {' AND '.join(where)} " if where else ""
        order = "DESC" if query.newest_first else ""
        sql = f"SELECT {_COLUMNS} FROM entries {clause}ORDER BY seq {order}".rstrip()
        if query.limit is not None:
            sql += " LIMIT ?"
            params.append(query.limit)
        rows = self._read(lambda conn: conn.execute(sql, params).fetchall())
        return [entry_from_row(row) for row in rows]

    def head(self) -> tuple[int, str]:
        return self._read(_read_head)

    def hash_at(self, seq: int) -> str | None:
        row = self._read(lambda conn: conn.execute("SELECT entry_hash FROM entries WHERE seq = ?", (seq,)).fetchone())
        return None if row is None else str(row[0])

    def count(self) -> int:
        return int(self._read(lambda conn: conn.execute("SELECT COUNT(*) FROM entries").fetchone())[0])

    def snapshot(self, batch_size: int) -> AbstractContextManager[ChainSnapshot]:
        return snapshot(self.read_path if self.read_only else self.path, batch_size, read_only=self.read_only)

    def _read(self, read: Callable[[sqlite3.Connection], _T]) -> _T:
        with self._lock:
            try:
                return read(self._conn)
            except sqlite3.Error as exc:  # a closed connection too
                raise LedgerError(f"cannot read ledger {self.path}: {exc}") from exc


def _connect_read_only(db: Path) -> sqlite3.Connection:
    """A read-only connection to ``db`` (``mode=ro``: never writes, never creates)."""
    return sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True, isolation_level=None, check_same_thread=False)


@contextmanager
def snapshot(db: Path, batch_size: int, *, read_only: bool = False) -> Iterator[ChainSnapshot]:
    """A read of the whole chain through a connection of its own (a WAL snapshot).

    Appends through other connections go on meanwhile.
    """
    try:
        conn = _connect_read_only(db) if read_only else sqlite3.connect(db, isolation_level=None)
    except sqlite3.Error as exc:
        raise LedgerError(f"cannot open ledger {db}: {exc}") from exc
    try:
        conn.execute("BEGIN")  # one snapshot for the rows and the recorded head
        head = _read_head(conn)
        cursor = conn.execute(f"SELECT {_COLUMNS} FROM entries ORDER BY seq")
        yield ChainSnapshot(head, iter(lambda: cursor.fetchmany(batch_size), []))
    except sqlite3.Error as exc:
        raise LedgerError(f"cannot read ledger {db}: {exc}") from exc
    finally:
        conn.close()


def verify_file(db: Path, head_path: Path, *, batch_size: int = 10_000) -> VerifyReport:
    """Verify the ledger file ``db`` against its ``meta`` head and the head file.

    Unlike opening a :class:`Ledger`, this neither migrates the file nor writes the head
    file.
    """
    return verify(lambda: snapshot(db, batch_size), head_path)


def _insert(conn: sqlite3.Connection, entries: Sequence[PreparedEntry]) -> list[StoredRow]:
    """Chain ``entries`` onto the recorded head, inside the caller's write transaction."""
    head_seq, prev = _read_head(conn)
    ts_ms = now_ms()
    stored: list[StoredRow] = []
    for kind, sid, aid, key, who, who_kind, epoch, body_json in entries:
        head_seq += 1
        digest = hash_columns(prev, head_seq, ts_ms, kind, sid, aid, key, who, who_kind, epoch, body_json)  # fmt: skip
        stored.append((head_seq, ts_ms, kind, sid, aid, key, who, who_kind, epoch, body_json, prev, digest))  # fmt: skip # noqa: E501
        prev = digest
    if len(stored) == 1:
        conn.execute(_INSERT, stored[0])
    else:
        conn.executemany(_INSERT, stored)
    conn.execute(_SET_HEAD, (str(head_seq), prev))
    return stored


def _read_head(conn: sqlite3.Connection) -> tuple[int, str]:
    values = dict(conn.execute(_GET_HEAD).fetchall())
    try:
        return int(values["head_seq"]), str(values["head_hash"])
    except (KeyError, ValueError) as exc:
        raise LedgerError("the ledger's recorded head is missing or damaged") from exc


def _find_interrupted(conn: sqlite3.Connection) -> list[RecoveredAction]:
    """Every intent without a result or reconcile, oldest first."""
    return [
        RecoveredAction(sid, aid, key, who, who_kind, epoch, intent_params(json.loads(body)), str(target), seq)
        for seq, sid, aid, key, who, who_kind, epoch, body, target in conn.execute(_INTERRUPTED)
    ]


def _find_unresolved(conn: sqlite3.Connection) -> list[UnresolvedAction]:
    """Every action whose latest result is ``UNKNOWN`` with no reconcile after it."""
    found = []
    for row in conn.execute(_UNRESOLVED):
        seq, sid, aid, key, who, who_kind, epoch, reason, intent_body, target = row
        params = intent_params(json.loads(intent_body)) if intent_body else {}
        found.append(UnresolvedAction(sid, aid, key, who, who_kind, epoch, params, str(target), seq, str(reason or "")))
    return found


def _where(query: EntryQuery) -> tuple[list[str], list[Any]]:
    where: list[str] = []
    params: list[Any] = []
    for column, value in (
        ("session_id", query.session_id),
        ("idempotency_key", query.idempotency_key),
        ("action_id", query.action_id),
        ("kind", query.kind),
        ("principal", query.principal),
    ):
        if value is not None:
            where.append(f"{column} = ?")
            params.append(value)
    if query.outcome is not None:
        where.append("(upper(json_extract(body, '$.outcome')) = ? OR (kind = 'refusal' AND ? = 'REFUSED'))")
        params += [query.outcome.upper(), query.outcome.upper()]
    if query.since_ms is not None:
        where.append("ts_ms >= ?")
        params.append(query.since_ms)
    if query.since_seq:
        where.append("seq > ?")
        params.append(query.since_seq)
    return where, params


def _split_sql(script: str) -> list[str]:
    # Split on ";" but keep trigger bodies (BEGIN ... END;) whole.
    statements: list[str] = []
    current: list[str] = []
    for line in script.splitlines():
        current.append(line)
        text = "\n".join(current).strip()
        if text.endswith(";") and sqlite3.complete_statement(text):
            statements.append(text)
            current = []
    tail = "\n".join(current).strip()
    if tail:
        statements.append(tail)
    return statements
