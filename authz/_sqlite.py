"""The SQLite implementation of :class:`~handrail.authz._store.AuthzStore`.

See :mod:`handrail.authz._store` for what is durable when.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hmac
import json
import random
import secrets
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from handrail.authz import _core
from handrail.authz._decide import target_matches
from handrail.authz._errors import (
    AlreadyExistsError,
    InvalidArgumentError,
    LeaseConflictError,
    NotFoundError,
)
from handrail.authz._journal import JOURNAL_BYTES, Journal, journal_paths, read_lines
from handrail.authz._models import (
    ApprovalInfo,
    ApprovalStatus,
    DecisionRecord,
    GrantInfo,
    LeaseInfo,
    Principal,
)
from handrail.authz._sqlite_schema import (
    APPROVAL_ACTION_FIELDS,
    APPROVAL_COLS,
    DB_NAME,
    DECISION_COLS,
    ENDED_GRANT_RETENTION_MS,
    GRANT_COLS,
    INSERT_DECISION,
    INSERT_DECISION_ONCE,
    LEASE_COLS,
    MIGRATIONS,
    SEQ_DIGITS,
    approval_row,
    as_row,
    decision_record,
    decision_row,
    grant_row,
    grant_scope_json,
    hash_token,
    lease_row,
    seq_of,
)

#: Bytes of a spare journal whose pages are mapped ahead, off the request path.
_PREFAULT_BYTES = 128 * 1024


class SqliteStore:
    """The SQLite implementation of :class:`AuthzStore` (see the module docstring).

    Args:
        path: the SQLite file (created with its tables if missing).
        clock: returns unix milliseconds; defaults to the wall clock. Tests pass a fake.
        durable_decisions: fsync every decision-log insert.
        journal: log decisions through the journal (see :meth:`record_decision`); only for
            the one process that serves the file (it replays journals left by a crash).
    """

    def __init__(
        self,
        path: str | Path,
        *,
        clock: Callable[[], int] | None = None,
        durable_decisions: bool = False,
        journal: bool = False,
    ) -> None:
        self.path = Path(path)
        self._clock = clock or (lambda: time.time_ns() // 1_000_000)
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._lock = threading.Lock()  # guards _all and _closed
        self._write_lock = threading.RLock()  # one writer at a time, in this process
        self._closed = False
        self._writer = self._connect("FULL")
        self._log_writer = self._connect("FULL" if durable_decisions else "NORMAL")
        self._journal = journal and not durable_decisions
        self._journal_lock = threading.Lock()
        self._flush_lock = threading.Lock()
        self._journal_file: Journal | None = None  # where decisions are appended
        self._journal_spare: Journal | None = None  # the next one, made off the request path
        self._journal_full: list[Journal] = []  # full ones, deleted once flushed
        self._journal_rows: list[tuple[Any, ...]] = []  # journaled, not yet in SQLite
        self._checkpointer: threading.Thread | None = None
        self._stop_checkpoints = threading.Event()
        self.migrate()
        self._seq_lock = threading.Lock()
        if self._journal:
            self._replay_journals()
        row = self._writer.execute("SELECT max(seq) FROM decision_log").fetchone()
        self._last_seq = int(row[0] or 0)
        # In-memory indexes, replaced (never mutated in place) under the write lock.
        self._principals: dict[str, Principal] = {}
        self._lease_rows: dict[str, LeaseInfo] = {}
        self._grants: dict[str, GrantInfo] = {}
        self._exact: dict[tuple[str, str], tuple[GrantInfo, ...]] = {}
        self._patterns: dict[str, tuple[GrantInfo, ...]] = {}
        self._load_indexes()

    @classmethod
    def in_dir(cls, data_dir: str | Path, **kwargs: Any) -> SqliteStore:
        """Open (creating) ``authz.sqlite`` under ``data_dir``."""
        directory = Path(data_dir)
        directory.mkdir(parents=True, exist_ok=True)
        return cls(directory / DB_NAME, **kwargs)

    # --- connections and transactions ---------------------------------------------------------

    def now_ms(self) -> int:
        """The store's clock, in unix milliseconds; the only clock that judges expiry."""
        return self._clock()

    def _connect(self, synchronous: str) -> sqlite3.Connection:
        if self._closed:
            raise RuntimeError("the store is closed")
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=10.0)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(f"PRAGMA synchronous={synchronous}")
        conn.execute("PRAGMA foreign_keys=ON")
        with self._lock:
            self._all.append(conn)
        return conn

    def _conn(self) -> sqlite3.Connection:
        """This thread's connection for reads."""
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = self._connect("FULL")
        return conn

    @contextmanager
    def atomic(self, conn: sqlite3.Connection | None = None) -> Iterator[sqlite3.Connection]:
        """A write transaction (``BEGIN IMMEDIATE``) under the store's write lock."""
        with self._write_lock:
            conn = conn or self._writer
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    def close(self) -> None:
        """Flush the journal; close every connection this store opened (from any thread)."""
        self._stop_checkpoints.set()
        if self._checkpointer is not None:
            self._checkpointer.join(5)
        if not self._closed:
            self.flush_decisions()
            with self._journal_lock:
                left = [j for j in (self._journal_file, self._journal_spare) if j is not None]
                self._journal_file = self._journal_spare = None
            for journal in left:  # flushed: nothing in them is needed any more
                journal.discard()
        with self._lock:
            self._closed = True
            conns, self._all = self._all, []
        for conn in conns:
            conn.close()

    def __enter__(self) -> SqliteStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def migrate(self) -> list[int]:
        """Apply the migrations not yet recorded in ``migrations``; return their versions."""
        applied: list[int] = []
        with self.atomic() as conn:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS migrations ("
                " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at_ms INTEGER NOT NULL)"
            )
            done = {row[0] for row in conn.execute("SELECT version FROM migrations")}
            for version, name, sql in MIGRATIONS:
                if version in done:
                    continue
                for statement in sql.split(";"):
                    if statement.strip():
                        conn.execute(statement)
                conn.execute(
                    "INSERT INTO migrations (version, name, applied_at_ms) VALUES (?, ?, ?)",
                    (version, name, self.now_ms()),
                )
                applied.append(version)
        return applied

    def _load_indexes(self) -> None:
        with self._write_lock:
            conn = self._writer
            self._lease_rows = {r[0]: lease_row(r) for r in conn.execute(f"SELECT {LEASE_COLS} FROM leases")}
            horizon = self.now_ms() - ENDED_GRANT_RETENTION_MS
            rows = conn.execute(
                f"SELECT {GRANT_COLS} FROM grants WHERE max(coalesce(revoked_at_ms, 0),"
                " coalesce(used_at_ms, 0), coalesce(closed_at_ms, 0), expires_at_ms) = 0"
                " OR max(coalesce(revoked_at_ms, 0), coalesce(used_at_ms, 0),"
                " coalesce(closed_at_ms, 0), expires_at_ms) > ?"
                " ORDER BY created_at_ms, grant_id",
                (horizon,),
            )
            self._grants = {}
            self._exact = {}
            self._patterns = {}
            for row in rows:
                self._index_grant(grant_row(row))

    def _index_grant(self, grant: GrantInfo) -> None:
        """Put ``grant`` (new or changed) into the indexes; caller holds the write lock."""
        old = self._grants.get(grant.grant_id)
        self._grants[grant.grant_id] = grant
        if grant.is_pattern:
            bucket = self._patterns.get(grant.principal, ())
            self._patterns[grant.principal] = _replace_in(bucket, old, grant)
        else:
            key = (grant.principal, grant.target)
            self._exact[key] = _replace_in(self._exact.get(key, ()), old, grant)

    # --- principals ---------------------------------------------------------------------------

    def add_principal(self, name: str, role: str, token: str | None = None) -> str:
        """Create a principal; return its bearer token (generated when not given).

        Raises:
            InvalidArgumentError: empty name, unknown role, empty token.
            AlreadyExistsError: the name or the token is taken.
        """
        _core.check_text("name", name, required=True)
        _core.check_role("role", role)
        if token is None:
            token = "hr_" + secrets.token_urlsafe(24)  # never begins with '-': safe after a CLI flag
        _core.check_text("token", token, required=True)
        try:
            with self.atomic() as conn:
                conn.execute(
                    "INSERT INTO principals (name, role, token_sha256, created_at_ms) VALUES (?, ?, ?, ?)",
                    (name, role, hash_token(token), self.now_ms()),
                )
        except sqlite3.IntegrityError:
            raise AlreadyExistsError(f"a principal named {name!r} or with that token already exists") from None
        return token

    def list_principals(self) -> list[tuple[str, str, int]]:
        """Every principal as ``(name, role, created_at_ms)``, by name."""
        rows = self._conn().execute("SELECT name, role, created_at_ms FROM principals ORDER BY name")
        return [(str(n), str(r), int(c)) for n, r, c in rows]

    def authenticate(self, token: str) -> Principal | None:
        """The principal a bearer token names, or None.

        Known tokens are remembered (principals are only ever added, possibly by another
        process: an unknown token is always looked up in the file).
        """
        if not token:
            return None
        digest = hash_token(token)
        known = self._principals.get(digest)
        if known is not None:
            return known
        row = (
            self._conn()
            .execute(
                "SELECT name, role, token_sha256 FROM principals WHERE token_sha256 = ?",
                (digest,),
            )
            .fetchone()
        )
        if row is None or not hmac.compare_digest(str(row[2]), digest):
            return None
        principal = Principal(str(row[0]), str(row[1]))
        self._principals = {**self._principals, digest: principal}
        return principal

    # --- grants -------------------------------------------------------------------------------

    def add_grant(self, grant: GrantInfo, granted_by: str) -> GrantInfo:
        """Validate and store a new grant; the server sets id, granter, time and state."""
        now = self.now_ms()
        grant = _core.validate_grant(grant, now)
        stored = dataclasses.replace(
            grant,
            grant_id=uuid.uuid4().hex,
            granted_by=granted_by,
            created_at_ms=now,
            revoked=False,
            revoked_at_ms=0,
            used_at_ms=0,
            closed_at_ms=0,
        )
        with self.atomic() as conn:
            conn.execute(
                f"INSERT INTO grants ({GRANT_COLS}) VALUES (?,?,?,?,?,?,?,?,?,NULL,?,?,?,NULL,NULL)",
                (
                    stored.grant_id,
                    stored.principal,
                    stored.target,
                    json.dumps(list(stored.verbs)),
                    json.dumps(list(stored.origins)),
                    stored.expires_at_ms,
                    stored.granted_by,
                    stored.note,
                    stored.created_at_ms,
                    grant_scope_json(stored),
                    int(stored.single_use),
                    stored.task_id,
                ),
            )
            self._index_grant(stored)
        return stored

    def add_grants(self, grants: list[GrantInfo], granted_by: str) -> list[GrantInfo]:
        """Store many grants in one transaction (benchmarks and imports)."""
        now = self.now_ms()
        stored = [
            dataclasses.replace(
                _core.validate_grant(g, now),
                grant_id=uuid.uuid4().hex,
                granted_by=granted_by,
                created_at_ms=now,
            )
            for g in grants
        ]
        with self.atomic() as conn:
            conn.executemany(
                f"INSERT INTO grants ({GRANT_COLS}) VALUES (?,?,?,?,?,?,?,?,?,NULL,?,?,?,NULL,NULL)",
                [
                    (
                        g.grant_id,
                        g.principal,
                        g.target,
                        json.dumps(list(g.verbs)),
                        json.dumps(list(g.origins)),
                        g.expires_at_ms,
                        g.granted_by,
                        g.note,
                        g.created_at_ms,
                        grant_scope_json(g),
                        int(g.single_use),
                        g.task_id,
                    )
                    for g in stored
                ],
            )
            for g in stored:
                self._index_grant(g)
        return stored

    def _read_grant(self, conn: sqlite3.Connection, grant_id: str) -> GrantInfo:
        row = conn.execute(f"SELECT {GRANT_COLS} FROM grants WHERE grant_id = ?", (grant_id,)).fetchone()
        if row is None:
            raise NotFoundError(f"no grant with id {grant_id!r}")
        return grant_row(row)

    def get_grant(self, grant_id: str) -> GrantInfo:
        """One grant by id.

        Raises:
            NotFoundError: no grant has that id.
        """
        _core.check_text("grant_id", grant_id, required=True)
        return self._read_grant(self._conn(), grant_id)

    def revoke_grant(self, grant_id: str) -> GrantInfo:
        """Revoke a grant (idempotent); return it.

        Raises:
            NotFoundError: no grant has that id.
        """
        _core.check_text("grant_id", grant_id, required=True)
        with self.atomic() as conn:
            conn.execute(
                "UPDATE grants SET revoked_at_ms = ? WHERE grant_id = ? AND revoked_at_ms IS NULL",
                (self.now_ms(), grant_id),
            )
            grant = self._read_grant(conn, grant_id)
            self._index_grant(grant)
        return grant

    def close_task(self, task_id: str) -> list[GrantInfo]:
        """End every grant bound to ``task_id`` that is not closed yet; return them."""
        _core.check_text("task_id", task_id, required=True)
        with self.atomic() as conn:
            ids = [
                str(r[0])
                for r in conn.execute(
                    "SELECT grant_id FROM grants WHERE task_id = ? AND closed_at_ms IS NULL",
                    (task_id,),
                )
            ]
            conn.execute(
                "UPDATE grants SET closed_at_ms = ? WHERE task_id = ? AND closed_at_ms IS NULL",
                (self.now_ms(), task_id),
            )
            closed = [self._read_grant(conn, gid) for gid in ids]
            for grant in closed:
                self._index_grant(grant)
        return closed

    def list_grants(self, principal: str = "", target: str = "", include_inactive: bool = False) -> list[GrantInfo]:
        """Grants, oldest first, optionally filtered; inactive ones only when asked."""
        sql = f"SELECT {GRANT_COLS} FROM grants WHERE 1=1"
        args: list[object] = []
        if principal:
            sql += " AND principal = ?"
            args.append(principal)
        if target:
            sql += " AND target = ?"
            args.append(target)
        rows = self._conn().execute(sql + " ORDER BY created_at_ms, grant_id", args)
        grants = [grant_row(r) for r in rows]
        if include_inactive:
            return grants
        now = self.now_ms()
        return [g for g in grants if g.is_active(now)]

    def grants_for(self, principal: str, target: str) -> list[GrantInfo]:
        """The grants of ``principal`` whose target is or covers ``target``, oldest first."""
        exact = self._exact.get((principal, target), ())
        patterns = self._patterns.get(principal, ())
        if not patterns:
            return list(exact)
        covering = [g for g in patterns if target_matches(g.target, target)]
        return sorted([*exact, *covering], key=lambda g: (g.created_at_ms, g.grant_id))

    def active_grant_expiries(self) -> list[tuple[int, str]]:
        """``(expires_at_ms, grant_id)`` of every active grant that expires (for Watch)."""
        now = self.now_ms()
        return [(g.expires_at_ms, g.grant_id) for g in self._grants.values() if g.expires_at_ms and g.is_active(now)]

    def indexed_grant(self, grant_id: str) -> GrantInfo | None:
        """The grant as the in-memory index holds it."""
        return self._grants.get(grant_id)

    # --- leases -------------------------------------------------------------------------------

    def lease_row(self, target: str) -> LeaseInfo | None:
        """The stored lease row of ``target`` (a lapsed lease still shows its holder)."""
        return self._lease_rows.get(target)

    def get_lease(self, target: str) -> LeaseInfo:
        """The lease of ``target`` as it stands now (a lapsed lease shows as free)."""
        _core.check_text("target", target, required=True)
        lease = self._lease_rows.get(target) or LeaseInfo(target)
        return lease.effective(self.now_ms())

    def leases(self) -> list[LeaseInfo]:
        """Every lease row."""
        return list(self._lease_rows.values())

    def change_lease(
        self, target: str, transition: Callable[[LeaseInfo, int], LeaseInfo]
    ) -> tuple[LeaseInfo, LeaseInfo]:
        """Apply ``transition(current, now_ms)`` to the lease of ``target`` atomically.

        The new row is written with a compare-and-set on the epoch that was read, inside one
        ``BEGIN IMMEDIATE`` transaction. Returns the lease before and after, as seen now.
        """
        _core.check_text("target", target, required=True)
        with self.atomic() as conn:
            now = self.now_ms()
            row = conn.execute(f"SELECT {LEASE_COLS} FROM leases WHERE target = ?", (target,)).fetchone()
            current = lease_row(row) if row else LeaseInfo(target)
            new = transition(current, now)
            if new == current:
                return current.effective(now), current.effective(now)
            values = (
                new.holder_kind,
                new.holder,
                new.epoch,
                new.expires_at_ms,
                new.next_holder,
                now,
            )
            if row is None:
                conn.execute(
                    "INSERT INTO leases (holder_kind, holder, epoch, expires_at_ms, next_holder,"
                    " updated_at_ms, target) VALUES (?,?,?,?,?,?,?)",
                    (*values, target),
                )
            else:
                cur = conn.execute(
                    "UPDATE leases SET holder_kind=?, holder=?, epoch=?, expires_at_ms=?,"
                    " next_holder=?, updated_at_ms=? WHERE target=? AND epoch=?",
                    (*values, target, current.epoch),
                )
                if cur.rowcount != 1:  # cannot happen under BEGIN IMMEDIATE; kept as a guard
                    raise LeaseConflictError(f"the lease on {target!r} changed concurrently")
            self._lease_rows = {**self._lease_rows, target: new}
        return current.effective(now), new.effective(now)

    # --- checks and the decision log ----------------------------------------------------------

    def check_snapshot(self, principal: str, target: str) -> tuple[LeaseInfo | None, list[GrantInfo], int]:
        """The target's lease row, the grants that may cover it, and the clock."""
        return self._lease_rows.get(target), self.grants_for(principal, target), self.now_ms()

    def record_decision(self, record: DecisionRecord) -> None:
        """Append one decision, allow or deny, to the decision log.

        With the journal on, the record's line is copied into a memory-mapped journal file
        (:mod:`._journal`: in the page cache when this returns, it survives ``kill -9``
        exactly as a WAL commit with ``synchronous=NORMAL`` does), and a background flush
        moves journaled records into SQLite in batches, then deletes full journals. A crash
        leaves journals behind; the next start replays them (inserts are idempotent by
        sequence number). Without the journal, the record is inserted directly.
        """
        row = decision_row(record)
        if not self._journal:
            with self._write_lock:
                self._log_writer.execute(INSERT_DECISION, row)
            return
        line = row[-1].encode("utf-8") + b"\n"
        with self._journal_lock:
            journal = self._journal_file
            if journal is None or not journal.append(line):
                journal = self._next_journal(len(line))
                journal.append(line)
            self._journal_rows.append(row)

    def _next_journal(self, need: int) -> Journal:
        """Retire the current journal (full) and start the spare or a new one; caller holds
        the journal lock."""
        if self._journal_file is not None:
            self._journal_full.append(self._journal_file)
        spare, self._journal_spare = self._journal_spare, None
        if spare is None or spare.size < need:
            if spare is not None:
                self._journal_full.append(spare)  # empty: deleted at the next flush
            spare = Journal.create(self.path, max(JOURNAL_BYTES, need))
        self._journal_file = spare
        return spare

    def flush_decisions(self) -> int:
        """Move journaled decisions into SQLite now; return how many."""
        if not self._journal:
            return 0
        with self._flush_lock:
            with self._journal_lock:
                rows, self._journal_rows = self._journal_rows, []
                full, self._journal_full = self._journal_full, []
            if rows:
                with self.atomic(self._log_writer) as conn:
                    conn.executemany(INSERT_DECISION_ONCE, rows)
            for journal in full:  # every line of it is in SQLite now
                journal.discard()
            return len(rows)

    def _prepare_journal(self) -> None:
        """Make the spare journal, if there is none, so that no check has to make one."""
        with self._journal_lock:
            if self._journal_spare is not None or self._closed:
                return
        spare: Journal | None = Journal.create(self.path, prefault=_PREFAULT_BYTES)
        with self._journal_lock:
            if self._journal_spare is None and not self._closed:
                spare, self._journal_spare = None, spare
        if spare is not None:
            spare.discard()

    def _replay_journals(self) -> None:
        """Insert what journals left by a crash hold (complete lines only); delete them."""
        for path in journal_paths(self.path):
            rows = [as_row(json.loads(line), line.decode("utf-8")) for line in read_lines(path)]
            if rows:
                with self.atomic(self._log_writer) as conn:
                    conn.executemany(INSERT_DECISION_ONCE, rows)
            path.unlink()

    def commit_check(
        self,
        record: DecisionRecord,
        *,
        consume: str = "",
        use_approval: str = "",
        new_approval: ApprovalInfo | None = None,
    ) -> bool:
        """See :meth:`AuthzStore.commit_check`."""
        try:
            with self.atomic() as conn:
                now = record.at_ms
                if consume:
                    cur = conn.execute(
                        "UPDATE grants SET used_at_ms = ? WHERE grant_id = ? AND single_use = 1"
                        " AND used_at_ms IS NULL AND revoked_at_ms IS NULL"
                        " AND closed_at_ms IS NULL AND (expires_at_ms = 0 OR expires_at_ms > ?)",
                        (now, consume, now),
                    )
                    if cur.rowcount != 1:
                        raise _LostRace
                if use_approval:
                    cur = conn.execute(
                        "UPDATE approvals SET status = 'USED', used_at_ms = ?,"
                        " used_by_decision_id = ? WHERE approval_id = ? AND status = 'APPROVED'"
                        " AND deadline_ms > ?",
                        (now, record.decision_id, use_approval, now),
                    )
                    if cur.rowcount != 1:
                        raise _LostRace
                if new_approval is not None:
                    self._insert_approval(conn, new_approval)
                conn.execute(INSERT_DECISION, decision_row(record))
                if consume:
                    self._index_grant(self._read_grant(conn, consume))
        except _LostRace:
            return False
        except sqlite3.IntegrityError:
            if new_approval is None:
                raise
            return False  # another check created the pending approval first
        return True

    def get_decision(self, decision_id: str) -> DecisionRecord:
        """One logged decision.

        Raises:
            NotFoundError: no decision has that id.
        """
        _core.check_text("decision_id", decision_id, required=True)
        self.flush_decisions()
        conn = self._conn()
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

    def list_decisions(
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
        self.flush_decisions()
        sql = f"SELECT {DECISION_COLS} FROM decision_log WHERE at_ms >= ?"
        args: list[object] = [since_ms]
        for column, value in (("principal", principal), ("target", target), ("reason", reason)):
            if value:
                sql += f" AND {column} = ?"
                args.append(value)
        sql += " ORDER BY seq DESC LIMIT ?"
        args.append(limit)
        return [decision_record(r) for r in self._conn().execute(sql, args)]

    def count_decisions(self) -> int:
        """How many decisions the log holds."""
        self.flush_decisions()
        return int(self._conn().execute("SELECT count(*) FROM decision_log").fetchone()[0])

    def new_decision_id(self) -> str:
        """A fresh decision id: 12 hex digits of log sequence, then 20 random ones."""
        with self._seq_lock:
            self._last_seq += 1
            seq = self._last_seq
        # the random part only keeps ids from being guessed by counting; it is no secret
        return f"{seq:0{SEQ_DIGITS}x}{random.getrandbits(80):020x}"

    # --- background checkpoints ---------------------------------------------------------------

    def start_checkpointer(self, interval_s: float = 0.5, flush_s: float = 0.02) -> None:
        """Move WAL checkpoints and journal flushes off the write path, onto a thread:
        journaled decisions every ``flush_s`` (and the next journal file made ahead), a WAL
        checkpoint every ``interval_s``.

        Without it, SQLite checkpoints inside whichever commit crosses 1000 WAL pages, which
        is a multi-millisecond stall of one check.
        """
        if self._checkpointer is not None:
            return
        for conn in (self._writer, self._log_writer):
            conn.execute("PRAGMA wal_autocheckpoint=0")
        conn = self._connect("FULL")

        def run() -> None:
            ticks = 0
            while not self._stop_checkpoints.wait(flush_s):
                ticks += 1
                try:
                    self.flush_decisions()
                    if self._journal:
                        with contextlib.suppress(OSError):  # a full disk: a check will say so
                            self._prepare_journal()
                    if ticks * flush_s >= interval_s:
                        ticks = 0
                        conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
                except sqlite3.Error:
                    return  # the store is closing

        self._checkpointer = threading.Thread(target=run, name="authz-checkpoint", daemon=True)
        self._checkpointer.start()

    # --- approvals ----------------------------------------------------------------------------

    @staticmethod
    def _insert_approval(conn: sqlite3.Connection, a: ApprovalInfo) -> None:
        action: dict[str, Any] = {f: getattr(a, f) for f in APPROVAL_ACTION_FIELDS}
        action["policies"] = list(a.policies)
        conn.execute(
            f"INSERT INTO approvals ({APPROVAL_COLS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                a.approval_id,
                a.principal,
                a.target,
                a.fingerprint,
                a.lease_epoch,
                a.status,
                a.deadline_ms,
                json.dumps(action),
                a.grant_id,
                a.decided_by,
                a.note,
                a.created_at_ms,
                a.decided_at_ms,
                a.used_at_ms,
                a.decision_id,
                a.used_by_decision_id,
            ),
        )

    def latest_approval(self, principal: str, target: str, fingerprint: str, epoch: int) -> ApprovalInfo | None:
        """The newest approval bound to this exact action under this epoch."""
        row = (
            self._conn()
            .execute(
                f"SELECT {APPROVAL_COLS} FROM approvals WHERE principal = ? AND target = ?"
                " AND fingerprint = ? AND lease_epoch = ? ORDER BY created_at_ms DESC, rowid DESC"
                " LIMIT 1",
                (principal, target, fingerprint, epoch),
            )
            .fetchone()
        )
        return approval_row(row) if row else None

    def _read_approval(self, conn: sqlite3.Connection, approval_id: str) -> ApprovalInfo:
        row = conn.execute(f"SELECT {APPROVAL_COLS} FROM approvals WHERE approval_id = ?", (approval_id,)).fetchone()
        if row is None:
            raise NotFoundError(f"no approval with id {approval_id!r}")
        return approval_row(row)

    def get_approval(self, approval_id: str) -> ApprovalInfo:
        """One approval, with its status as of now (NotFoundError)."""
        _core.check_text("approval_id", approval_id, required=True)
        return self._read_approval(self._conn(), approval_id).effective(self.now_ms())

    def decide_approval(self, approval_id: str, status: str, by: str, note: str) -> ApprovalInfo:
        """Approve or deny a pending approval; deciding it again the same way is a no-op.

        Raises:
            NotFoundError: no such approval.
            LeaseConflictError: it is not pending any more (decided otherwise, expired, used).
        """
        _core.check_text("approval_id", approval_id, required=True)
        _core.check_text("note", note)
        with self.atomic() as conn:
            now = self.now_ms()
            current = self._read_approval(conn, approval_id).effective(now)
            if current.status == status:
                return current
            if current.status != ApprovalStatus.PENDING:
                raise LeaseConflictError(f"approval {approval_id} is {current.status.lower()}, not pending")
            conn.execute(
                "UPDATE approvals SET status = ?, decided_by = ?, note = ?, decided_at_ms = ?"
                " WHERE approval_id = ? AND status = 'PENDING'",
                (status, by, note, now, approval_id),
            )
            return self._read_approval(conn, approval_id)

    def expire_approvals(self) -> list[ApprovalInfo]:
        """Mark pending approvals past their deadline EXPIRED; return them."""
        now = self.now_ms()
        due = self._conn().execute(
            "SELECT approval_id FROM approvals WHERE status = 'PENDING' AND deadline_ms <= ?",
            (now,),
        )
        ids = [str(r[0]) for r in due]
        if not ids:
            return []
        expired: list[ApprovalInfo] = []
        with self.atomic() as conn:
            for aid in ids:
                cur = conn.execute(
                    "UPDATE approvals SET status = 'EXPIRED' WHERE approval_id = ? AND status = 'PENDING'",
                    (aid,),
                )
                if cur.rowcount == 1:
                    expired.append(self._read_approval(conn, aid))
        return expired

    def pending_deadlines(self) -> list[tuple[int, str]]:
        """``(deadline_ms, approval_id)`` of every pending approval (for Watch)."""
        rows = self._conn().execute("SELECT deadline_ms, approval_id FROM approvals WHERE status = 'PENDING'")
        return [(int(d), str(a)) for d, a in rows]

    def list_approvals(
        self, status: str = "", principal: str = "", target: str = "", limit: int = 100
    ) -> list[ApprovalInfo]:
        """Approvals, newest first, optionally filtered by their status as of now."""
        if limit <= 0 or limit > 10_000:
            raise InvalidArgumentError("limit", "must be within 1..10000")
        if status and status not in ApprovalStatus.__members__:
            raise InvalidArgumentError("status", f"unknown approval status {status!r}")
        now = self.now_ms()
        sql = f"SELECT {APPROVAL_COLS} FROM approvals WHERE 1=1"
        args: list[object] = []
        if status == ApprovalStatus.PENDING:
            sql += " AND status = 'PENDING' AND deadline_ms > ?"
            args.append(now)
        elif status == ApprovalStatus.EXPIRED:
            sql += " AND (status = 'EXPIRED' OR (status = 'PENDING' AND deadline_ms <= ?))"
            args.append(now)
        elif status:
            sql += " AND status = ?"
            args.append(status)
        for column, value in (("principal", principal), ("target", target)):
            if value:
                sql += f" AND {column} = ?"
                args.append(value)
        sql += " ORDER BY created_at_ms DESC, rowid DESC LIMIT ?"
        args.append(limit)
        return [approval_row(r).effective(now) for r in self._conn().execute(sql, args)]


#: The name the foundation exported; the SQLite store.


class _LostRace(Exception):
    """A conditional update of :meth:`SqliteStore.commit_check` matched nothing."""


def _replace_in(bucket: tuple[GrantInfo, ...], old: GrantInfo | None, new: GrantInfo) -> tuple[GrantInfo, ...]:
    if old is None:
        return (*bucket, new)
    return tuple(new if g.grant_id == new.grant_id else g for g in bucket)
