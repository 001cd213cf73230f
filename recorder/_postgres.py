"""The PostgreSQL ledger store: every executor's chain in one database.

Each executor appends to its own hash chain (``executor_id`` is part of every row's key,
and ``ledger_heads`` records the head of each chain), in the entry format and canonical
JSON of the SQLite ledger: the same entry hashes to the same ``entry_hash`` wherever it is
stored. An append locks its chain's head row (``SELECT ... FOR UPDATE``), chains onto the
*recorded* head, inserts the entries and moves the head in one transaction, committed
synchronously before the call returns (``synchronous_commit = on``): an intent is durable
before its action is dispatched, as with SQLite. The ledger's group commit folds
concurrent appends into one such transaction.

The store remembers the head its last append left. The next append chains onto it in one
statement, in autocommit (one round trip instead of five): a compare-and-set moves the
recorded head from that one to the new one, and the entries are inserted only where it
did. When another writer of the chain moved the head meanwhile, nothing is inserted and
the append is made the locked way, onto the recorded head.

Triggers refuse ``UPDATE`` and ``DELETE`` of entries. :meth:`PgLedgerStore.snapshot`
reads one chain in a ``REPEATABLE READ`` transaction (the head and the rows as of one
moment) through a server-side cursor, so verifying a long chain neither holds up appends
nor loads it whole. Every psycopg error becomes a :class:`~handrail.recorder.LedgerError`
here and nowhere else.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any, TypeVar

import psycopg
import psycopg_pool

from handrail._dsn import (
    RETRY_WITHIN_S,
    connect_error,
    connect_options,
    first_line,
    redact,
    tls_hint,
    why_no_connection,
)

from ._chain import GENESIS_HASH, hash_columns, now_ms
from ._entry import Entry, PreparedEntry, entry_from_row
from ._errors import LedgerError, LedgerTamperedError
from ._postgres_schema import MIGRATIONS
from ._recovery import RecoveredAction, UnresolvedAction, intent_params
from ._store import BulkRow, ChainSnapshot, EntryQuery, RecoveryWrite, StoredRow

__all__ = ["PgLedgerStore", "ledger_executors"]

_T = TypeVar("_T")

_COLUMNS = (
    "seq, ts_ms, kind, session_id, action_id, idempotency_key, principal, "
    "principal_kind, epoch, body, prev_hash, entry_hash"
)
_INSERT = (
    f"INSERT INTO ledger_entries (executor_id, {_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
)

_HEAD = "SELECT head_seq, head_hash FROM ledger_heads WHERE executor_id = %s"
_CHAIN_EXISTS = (
    "SELECT EXISTS (SELECT 1 FROM ledger_heads WHERE executor_id = %s)"
    " OR EXISTS (SELECT 1 FROM ledger_entries WHERE executor_id = %s)"
)
# a new chain's head, at genesis: never for a chain with entries (its head row was deleted)
_NEW_HEAD = (
    "INSERT INTO ledger_heads (executor_id, head_seq, head_hash) SELECT %s, 0, %s"
    " WHERE NOT EXISTS (SELECT 1 FROM ledger_entries WHERE executor_id = %s) ON CONFLICT (executor_id) DO NOTHING"
)
# every chain: those with a recorded head, and those with entries (one index probe per
# chain, not a scan of the entries)
_EXECUTORS = """
WITH RECURSIVE ids(id) AS (
    (SELECT executor_id FROM ledger_entries ORDER BY executor_id LIMIT 1)
    UNION ALL
    SELECT (SELECT e.executor_id FROM ledger_entries AS e WHERE e.executor_id > ids.id ORDER BY e.executor_id LIMIT 1)
    FROM ids WHERE ids.id IS NOT NULL
)
SELECT id FROM ids WHERE id IS NOT NULL UNION SELECT executor_id FROM ledger_heads ORDER BY 1
"""

# An append onto the head the store last saw, in one statement: the recorded head moves
# from (seen_seq, seen_hash) to (head_seq, head_hash) and the entries (one array per
# column) are inserted, or, when the head is not the one seen, neither.
_APPEND_ONTO = f"""
WITH head AS (
    UPDATE ledger_heads SET head_seq = %(head_seq)s, head_hash = %(head_hash)s
    WHERE executor_id = %(exe)s AND head_seq = %(seen_seq)s AND head_hash = %(seen_hash)s
    RETURNING executor_id
)
INSERT INTO ledger_entries (executor_id, {_COLUMNS})
SELECT head.executor_id, e.* FROM head, unnest(
    %(seq)s::bigint[], %(ts_ms)s::bigint[], %(kind)s::text[], %(session_id)s::text[], %(action_id)s::text[],
    %(idempotency_key)s::text[], %(principal)s::text[], %(principal_kind)s::text[], %(epoch)s::bigint[],
    %(body)s::text[], %(prev_hash)s::text[], %(entry_hash)s::text[]
) AS e
"""
_ARRAYS = tuple(c.strip() for c in _COLUMNS.split(","))


def _jsonb(column: str) -> str:
    r"""SQL reading the text ``column`` (an entry's canonical JSON) as ``jsonb``. PostgreSQL
    refuses ``\u0000`` in jsonb (its text cannot hold a NUL) while the entry format keeps
    one a caller wrote, so an escaped NUL is read as U+FFFD; only an escape counts, not a
    backslash-u written as text (``\\u0000``: an even run of backslashes before it)."""
    return (
        rf"(CASE WHEN strpos({column}, '\u0000') = 0 THEN {column}"
        rf" ELSE regexp_replace({column}, '(?<!\\)((?:\\\\)*)\\u0000', '\1\\ufffd', 'g') END)::jsonb"
    )


_TARGET = """
    coalesce((SELECT {s_body} ->> 'target' FROM ledger_entries AS s
              WHERE s.executor_id = {e}.executor_id AND s.session_id = {e}.session_id
                AND s.idempotency_key = '' AND s.kind = 'session_open'
              ORDER BY s.seq LIMIT 1), '')
""".replace("{s_body}", _jsonb("s.body"))

_INTERRUPTED = f"""
SELECT i.seq, i.session_id, i.action_id, i.idempotency_key, i.principal, i.principal_kind,
       i.epoch, i.body, {_TARGET.format(e="i")}
FROM ledger_entries AS i
WHERE i.executor_id = %(exe)s AND i.kind = 'intent' AND NOT EXISTS (
    SELECT 1 FROM ledger_entries AS r
    WHERE r.executor_id = i.executor_id AND r.kind IN ('result', 'reconcile')
      AND r.session_id = i.session_id AND r.action_id = i.action_id)
ORDER BY i.seq
"""

_UNRESOLVED = f"""
SELECT u.seq, u.session_id, u.action_id, u.idempotency_key, u.principal, u.principal_kind,
       u.epoch, {_jsonb("u.body")} ->> 'reason',
       (SELECT p.body FROM ledger_entries AS p
        WHERE p.executor_id = u.executor_id AND p.kind = 'intent' AND p.session_id = u.session_id
          AND p.action_id = u.action_id ORDER BY p.seq DESC LIMIT 1),
       {_TARGET.format(e="u")}
FROM ledger_entries AS u
WHERE u.executor_id = %(exe)s AND u.kind = 'result' AND upper({_jsonb("u.body")} ->> 'outcome') = 'UNKNOWN'
  AND NOT EXISTS (
    SELECT 1 FROM ledger_entries AS l
    WHERE l.executor_id = u.executor_id AND l.kind IN ('result', 'reconcile')
      AND l.session_id = u.session_id AND l.action_id = u.action_id AND l.seq > u.seq)
ORDER BY u.seq
"""


class PgLedgerStore:
    """One executor's chain in a PostgreSQL database.

    Args:
        dsn: a ``postgresql://`` URL or libpq string (tables in the first schema of its
            ``search_path``; created on first use).
        executor_id: whose chain this is.
        pool_size: the most connections it opens.
        read_only: only read (an auditor, the ledger commands): nothing is created or
            migrated, the chain must exist (``LedgerError`` NOT_FOUND otherwise), appends
            raise ``LedgerError`` (READ_ONLY), and the sessions are read-only in the server too.
    """

    def __init__(self, dsn: str, executor_id: str, *, pool_size: int = 4, read_only: bool = False) -> None:
        if not executor_id or len(executor_id) > 200:
            raise LedgerError("the executor id must be 1..200 characters", reason="INVALID_ARGUMENT")
        self.dsn = dsn
        self.executor_id = executor_id
        self.read_only = read_only
        self._lock = threading.Lock()
        self._seen: tuple[int, str] | None = None  # the head this store's last append left

        def configure(conn: psycopg.Connection[Any]) -> None:
            if read_only:  # the server refuses a write too
                conn.execute("SET default_transaction_read_only = on")

        self._closed = False
        why = why_no_connection(dsn, 10.0, f"the ledger database {self.location}")
        if why:
            raise LedgerError(why)
        self._pool: psycopg_pool.ConnectionPool[psycopg.Connection[Any]] = psycopg_pool.ConnectionPool(
            dsn,
            kwargs={"autocommit": True, "connect_timeout": 5, **connect_options(dsn)},
            configure=configure,
            min_size=1,
            max_size=pool_size,
            open=False,
            timeout=10.0,
            name=f"ledger-{executor_id}",
        )
        try:
            self._pool.open(wait=True, timeout=10.0)
            self._run(self._check_chain if read_only else self._migrate)
        except psycopg_pool.PoolTimeout:
            self._pool.close()
            raise LedgerError(f"cannot connect to the ledger database {self.location}") from None
        except LedgerError:
            self._pool.close()
            raise

    @property
    def location(self) -> str:
        return f"{_describe(self.dsn)} (executor {self.executor_id})"

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._pool.close()

    def _run(
        self, work: Callable[[psycopg.Connection[Any]], _T], what: str = "use", *, again: Callable[[], bool] = bool
    ) -> _T:
        """Run ``work`` on a pooled connection; psycopg's errors become LedgerError.

        A connection the server ended in the pool fails on first use (each failed one is thrown
        away): while ``again()`` says nothing can have been written (a read; a transaction whose
        COMMIT was never sent), the work runs again, up to once per pooled connection plus one,
        within :data:`~handrail._dsn.RETRY_WITHIN_S` of the first run."""
        if self._closed:
            raise LedgerError(f"ledger {self.location} is closed")
        began = time.monotonic()
        for left in range(self._pool.max_size, -1, -1):  # runs left after this one
            try:
                with self._pool.connection() as conn:
                    return work(conn)
            except LedgerError:
                raise
            except psycopg_pool.PoolTimeout as exc:  # (an OperationalError) no connection came: say why
                why = connect_error(self.dsn)
                raise LedgerError(
                    f"cannot {what} ledger {self.location}: {first_line(exc)} ({why or 'a connection opens now'})"
                ) from exc
            except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
                if left and again() and time.monotonic() - began < RETRY_WITHIN_S:
                    with contextlib.suppress(psycopg_pool.PoolClosed):
                        self._pool.check()
                    continue
                raise LedgerError(f"cannot {what} ledger {self.location}: {first_line(exc)}") from exc
            except psycopg.Error as exc:
                raise LedgerError(f"cannot {what} ledger {self.location}: {first_line(exc)}") from exc
        raise AssertionError("unreachable")

    def _check_chain(self, conn: psycopg.Connection[Any]) -> None:
        """A chain is there when it has a recorded head or any entry: one whose head row was
        deleted is still read (and found BAD by ``verify``), not taken for no chain."""
        try:
            found = conn.execute(_CHAIN_EXISTS, (self.executor_id, self.executor_id)).fetchone()
        except psycopg.errors.UndefinedTable:
            raise LedgerError(f"no ledger in {_describe(self.dsn)}", reason="NOT_FOUND") from None
        if found is None or not found[0]:
            raise LedgerError(f"no chain of executor {self.executor_id!r} in {_describe(self.dsn)}", reason="NOT_FOUND")

    def _writing(self) -> None:
        if self.read_only:
            raise LedgerError(f"ledger {self.location} is open read-only", reason="READ_ONLY")

    def _migrate(self, conn: psycopg.Connection[Any]) -> None:
        """Apply the steps not recorded yet (under a lock, one writer at a time); start the
        chain's head. On a database where every step is recorded it creates nothing and
        takes no lock, so an executor's role needs no ``CREATE`` on the schema."""
        if self._migrated(conn):
            conn.execute(_NEW_HEAD, (self.executor_id, GENESIS_HASH, self.executor_id))
        else:
            self._apply_migrations(conn)
        if conn.execute(_HEAD, (self.executor_id,)).fetchone() is None:  # entries, and no head
            raise LedgerTamperedError(
                f"the recorded head of {self.location} is missing while its chain has entries: its row in"
                " ledger_heads was deleted outside the ledger (`handrail ledger verify` says what else changed)"
            )

    @staticmethod
    def _migrated(conn: psycopg.Connection[Any]) -> bool:
        """Whether every step this version knows is recorded (no lock: a miss is settled under it)."""
        row = conn.execute("SELECT to_regclass('ledger_migrations') IS NOT NULL").fetchone()
        if row is None or not row[0]:
            return False
        done = {int(r[0]) for r in conn.execute("SELECT version FROM ledger_migrations")}
        return done >= set(range(1, len(MIGRATIONS) + 1))

    def _apply_migrations(self, conn: psycopg.Connection[Any]) -> None:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(current_schema() || '.handrail_ledger'))")
            conn.execute(
                "CREATE TABLE IF NOT EXISTS ledger_migrations ("
                " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_ms BIGINT NOT NULL)"
            )
            done = {int(r[0]) for r in conn.execute("SELECT version FROM ledger_migrations")}
            for version, (name, sql) in enumerate(MIGRATIONS, start=1):
                if version not in done:
                    conn.execute(sql.encode())
                    conn.execute(
                        "INSERT INTO ledger_migrations (version, name, applied_ms) VALUES (%s, %s, %s)",
                        (version, name, now_ms()),
                    )
            conn.execute(_NEW_HEAD, (self.executor_id, GENESIS_HASH, self.executor_id))

    # -- writing -------------------------------------------------------------------

    def append(self, entries: Sequence[PreparedEntry]) -> list[Entry]:
        self._writing()
        if not entries:
            return []
        seen, self._seen = self._seen, None  # known again only once this append is
        rows = self._append_onto(seen, entries) if seen is not None else None
        if rows is None:  # no head seen yet, or another writer moved it: the locked way
            committing = False

            def work(conn: psycopg.Connection[Any]) -> list[StoredRow]:
                nonlocal committing
                with conn.transaction():
                    stored = self._insert(conn, entries)
                    committing = True  # a failure from here on may follow a commit: not retried
                return stored

            rows = self._run(work, "append to", again=lambda: not committing)
        self._seen = _head_of(rows)
        return [entry_from_row(row) for row in rows]

    def _append_onto(self, seen: tuple[int, str], entries: Sequence[PreparedEntry]) -> list[StoredRow] | None:
        """Append onto the head ``seen`` in one statement; None when the recorded head is
        another (nothing was written). A lost connection is retried on another one: the
        statement is all or none, and a head that already is the new one says it committed."""
        stored = _chain(entries, *seen)
        head = _head_of(stored)
        params: dict[str, Any] = {name: [row[i] for row in stored] for i, name in enumerate(_ARRAYS)}
        params.update(exe=self.executor_id, seen_seq=seen[0], seen_hash=seen[1], head_seq=head[0], head_hash=head[1])

        def work(conn: psycopg.Connection[Any]) -> bool:
            if conn.execute(_APPEND_ONTO, params, prepare=True).rowcount == len(stored):
                return True
            row = conn.execute(_HEAD, (self.executor_id,)).fetchone()  # moved: by this very append?
            return row is not None and (int(row[0]), str(row[1])) == head

        return stored if self._run(work, "append to", again=_always) else None

    def _insert(self, conn: psycopg.Connection[Any], entries: Sequence[PreparedEntry]) -> list[StoredRow]:
        head = self._locked_head(conn)
        stored = _chain(entries, *head)
        try:
            self._write(conn, stored, *_head_of(stored))
        except psycopg.errors.UniqueViolation:
            raise LedgerTamperedError(
                f"the recorded head of {self.location} (#{head[0]}) is behind its stored entries: ledger_heads"
                " was moved back outside the ledger; nothing was written (`handrail ledger verify` says more)",
                seq=head[0] + 1,
            ) from None
        return stored

    def _locked_head(self, conn: psycopg.Connection[Any]) -> tuple[int, str]:
        row = conn.execute(_HEAD + " FOR UPDATE", (self.executor_id,)).fetchone()
        if row is None:
            raise LedgerError(f"the recorded head of {self.location} is missing")
        return int(row[0]), str(row[1])

    def _write(self, conn: psycopg.Connection[Any], rows: Sequence[StoredRow], head_seq: int, head: str) -> None:
        with conn.cursor() as cur:
            cur.executemany(_INSERT, [(self.executor_id, *row) for row in rows])
        conn.execute(
            "UPDATE ledger_heads SET head_seq = %s, head_hash = %s WHERE executor_id = %s",
            (head_seq, head, self.executor_id),
        )

    def bulk_load(self, rows: Iterable[BulkRow]) -> tuple[int, str]:
        self._writing()

        def work(conn: psycopg.Connection[Any]) -> tuple[int, str]:
            with conn.transaction():
                head_seq, prev = self._locked_head(conn)
                stored: list[StoredRow] = []
                for ts, kind, sid, aid, key, who, who_kind, epoch, body in rows:
                    head_seq += 1
                    digest = hash_columns(prev, head_seq, ts, kind, sid, aid, key, who, who_kind, epoch, body)
                    stored.append((head_seq, ts, kind, sid, aid, key, who, who_kind, epoch, body, prev, digest))
                    prev = digest
                self._write(conn, stored, head_seq, prev)
                return head_seq, prev

        return self._run(work, "append to")

    def recover(self, result_for: Callable[[RecoveredAction], PreparedEntry]) -> RecoveryWrite:
        self._writing()

        def work(conn: psycopg.Connection[Any]) -> tuple[list[RecoveredAction], list[StoredRow]]:
            with conn.transaction():
                self._locked_head(conn)  # no append of this chain meanwhile
                found = [
                    RecoveredAction(
                        sid, aid, key, who, who_kind, int(epoch), intent_params(json.loads(body)), str(target), int(seq)
                    )
                    for seq, sid, aid, key, who, who_kind, epoch, body, target in conn.execute(
                        _INTERRUPTED, {"exe": self.executor_id}
                    )
                ]
                if not found:
                    return [], []
                return found, self._insert(conn, [result_for(action) for action in found])

        found, stored = self._run(work, "recover", again=_always)  # a second run finds what is left
        if not found:
            return RecoveryWrite([], None)
        marked = [action.with_result(row[0]) for action, row in zip(found, stored, strict=True)]
        return RecoveryWrite(marked, _head_of(stored))

    # -- reading -------------------------------------------------------------------

    def unresolved(self) -> list[UnresolvedAction]:
        def work(conn: psycopg.Connection[Any]) -> list[UnresolvedAction]:
            found = []
            for row in conn.execute(_UNRESOLVED, {"exe": self.executor_id}):
                seq, sid, aid, key, who, who_kind, epoch, reason, intent_body, target = row
                params = intent_params(json.loads(intent_body)) if intent_body else {}
                found.append(
                    UnresolvedAction(
                        sid, aid, key, who, who_kind, int(epoch), params, str(target), int(seq), str(reason or "")
                    )
                )
            return found

        return self._run(work, "read", again=_always)

    def select(self, query: EntryQuery) -> list[Entry]:
        where, params = _where(query)
        order = "DESC" if query.newest_first else ""
        sql = f"SELECT {_COLUMNS} FROM ledger_entries WHERE executor_id = %s{where} ORDER BY seq {order}".rstrip()
        if query.limit is not None:
            sql += " LIMIT %s"
            params.append(query.limit)
        rows = self._run(lambda conn: conn.execute(sql, [self.executor_id, *params]).fetchall(), "read", again=_always)
        return [entry_from_row(row) for row in rows]

    def head(self) -> tuple[int, str]:
        row = self._run(lambda conn: conn.execute(_HEAD, (self.executor_id,)).fetchone(), "read", again=_always)
        if row is None:
            raise LedgerError(f"the recorded head of {self.location} is missing")
        return int(row[0]), str(row[1])

    def hash_at(self, seq: int) -> str | None:
        sql = "SELECT entry_hash FROM ledger_entries WHERE executor_id = %s AND seq = %s"
        row = self._run(lambda conn: conn.execute(sql, (self.executor_id, seq)).fetchone(), "read", again=_always)
        return None if row is None else str(row[0])

    def count(self) -> int:
        sql = "SELECT count(*) FROM ledger_entries WHERE executor_id = %s"
        row = self._run(lambda conn: conn.execute(sql, (self.executor_id,)).fetchone(), "read", again=_always)
        return int(row[0]) if row else 0

    def snapshot(self, batch_size: int) -> AbstractContextManager[ChainSnapshot]:
        return self._snapshot(batch_size)

    @contextmanager
    def _snapshot(self, batch_size: int) -> Iterator[ChainSnapshot]:
        try:
            conn = psycopg.connect(self.dsn, connect_timeout=10, **connect_options(self.dsn))
        except psycopg.Error as exc:
            raise LedgerError(f"cannot read ledger {self.location}: {first_line(exc, self.dsn)}") from exc
        try:
            with conn:
                conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
                row = conn.execute(_HEAD, (self.executor_id,)).fetchone()
                head = (int(row[0]), str(row[1])) if row else (0, GENESIS_HASH)
                with conn.cursor(name="ledger_snapshot") as cursor:
                    cursor.itersize = batch_size
                    sql = f"SELECT {_COLUMNS} FROM ledger_entries WHERE executor_id = %s ORDER BY seq"
                    cursor.execute(sql, (self.executor_id,))

                    def batches() -> Iterator[list[StoredRow]]:
                        while rows := cursor.fetchmany(batch_size):
                            yield [(int(r[0]), int(r[1]), *r[2:8], int(r[8]), *r[9:]) for r in rows]

                    yield ChainSnapshot(head, batches())
        except psycopg.Error as exc:
            raise LedgerError(f"cannot read ledger {self.location}: {first_line(exc)}") from exc
        finally:
            conn.close()


def _head_of(rows: Sequence[StoredRow]) -> tuple[int, str]:
    """The head a chain of stored rows ends at: the last one's seq and entry hash."""
    return rows[-1][0], rows[-1][11]


def _chain(entries: Sequence[PreparedEntry], head_seq: int, prev: str) -> list[StoredRow]:
    """``entries`` as rows chained onto the head ``(head_seq, prev)``, stamped now."""
    ts_ms = now_ms()
    stored: list[StoredRow] = []
    for kind, sid, aid, key, who, who_kind, epoch, body in entries:
        head_seq += 1
        digest = hash_columns(prev, head_seq, ts_ms, kind, sid, aid, key, who, who_kind, epoch, body)
        stored.append((head_seq, ts_ms, kind, sid, aid, key, who, who_kind, epoch, body, prev, digest))
        prev = digest
    return stored


def ledger_executors(dsn: str) -> list[str]:
    """The executors that have a chain in the ledger database ``dsn``, by name.

    Raises:
        LedgerError: the database cannot be read, or holds no ledger.
    """
    try:
        with psycopg.connect(dsn, connect_timeout=10, **connect_options(dsn)) as conn:
            rows = conn.execute(_EXECUTORS).fetchall()
    except psycopg.errors.UndefinedTable:
        raise LedgerError(f"no ledger in {_describe(dsn)}", reason="NOT_FOUND") from None
    except psycopg.Error as exc:
        reason = first_line(exc, dsn)
        raise LedgerError(f"cannot read the ledger database {_describe(dsn)}: {reason}{tls_hint(reason, dsn)}") from exc
    return [str(r[0]) for r in rows]


def _always() -> bool:
    return True


def _describe(dsn: str) -> str:
    from psycopg.conninfo import conninfo_to_dict

    try:
        parts = conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        return "postgresql://?"
    host, port, dbname = parts.get("host", "localhost"), parts.get("port", "5432"), parts.get("dbname", "")
    return redact(f"postgresql://{host}:{port}/{dbname}", dsn)  # a password cut into the host


def _where(query: EntryQuery) -> tuple[str, list[Any]]:
    where = ""
    params: list[Any] = []
    for column, value in (
        ("session_id", query.session_id),
        ("idempotency_key", query.idempotency_key),
        ("action_id", query.action_id),
        ("kind", query.kind),
        ("principal", query.principal),
    ):
        if value is not None:
            where += f" AND {column} = %s"
            params.append(value)
    if query.outcome is not None:
        where += f" AND (upper({_jsonb('body')} ->> 'outcome') = %s OR (kind = 'refusal' AND %s = 'REFUSED'))"
        params += [query.outcome.upper(), query.outcome.upper()]
    if query.since_ms is not None:
        where += " AND ts_ms >= %s"
        params.append(query.since_ms)
    if query.since_seq:
        where += " AND seq > %s"
        params.append(query.since_seq)
    return where, params
