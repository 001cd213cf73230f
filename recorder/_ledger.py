"""The append-only, hash-chained action ledger, kept in one SQLite file.

Every entry carries ``entry_hash = sha256(prev_hash || canonical_json(entry))`` where the
hashed entry is every column except the two hashes, and the first entry's ``prev_hash`` is
64 zeros. SQL triggers refuse UPDATE and DELETE on ``entries``; :meth:`Ledger.verify`
recomputes the chain so that edits made around the triggers are still found.

Two records of the head (last seq and hash) catch a truncated tail:

- the ``meta`` table, updated in the same transaction as each append, so appends chain
  onto the recorded head rather than onto whatever row happens to be last;
- the head file ``<db>.head``, outside the database, rewritten atomically at most every
  ``head_interval_s`` (or every ``head_every`` entries) and on close. It still holds when
  the whole database file is replaced by an older copy. It cannot see the entries appended
  after its last write: at most ``head_interval_s`` worth (default 100 ms), or everything
  since the last write when the process died before its next one.

Appends from several threads are *group-committed*: the first caller to find no commit in
progress writes every entry queued so far in one transaction (one fsync under
``synchronous=FULL``); the others wait. Every caller returns only once the transaction
that holds its entry has committed.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from json.encoder import encode_basestring
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ._errors import LedgerError, LedgerTamperedError

if TYPE_CHECKING:
    from ._recovery import HeadWriter, RecoveredAction, UnresolvedAction, VerifyReport

# ``_recovery`` (verification, the head file, recovery) builds on this module, so the
# Ledger methods that delegate to it import it when called.

__all__ = [
    "GENESIS_HASH",
    "KINDS",
    "LEASE_EVENTS",
    "REDACTED",
    "VERDICTS",
    "Entry",
    "Ledger",
    "NewEntry",
    "PrincipalKind",
    "canonical_json",
    "entry_hash",
    "redact",
]

GENESIS_HASH = "0" * 64
"""The ``prev_hash`` of the first entry."""

REDACTED = "[REDACTED]"
"""What a secret value is replaced with before it is hashed and stored."""

KINDS = (
    "session_open",
    "session_close",
    "intent",
    "result",
    "reconcile",
    "refusal",
    "decision",
    "lease_change",
)
"""Entry kinds used across Handrail. Others are accepted; these are the known ones."""

VERDICTS = ("HAPPENED", "DID_NOT_HAPPEN")
"""What a ``reconcile`` entry may say about an UNKNOWN action."""

LEASE_EVENTS = ("acquire", "renew", "takeover", "hand_back", "release", "expire", "revoke")
"""Known ``lease_change`` events. Others are accepted."""

PrincipalKind = Literal["agent", "human", "system"]
_PRINCIPAL_KINDS = frozenset({"agent", "human", "system"})

_SECRET_WORDS = ("password", "token", "secret")
_SECRET_KEYS_FIELD = "_secret_keys"

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


def canonical_json(obj: Any) -> str:
    """Serialize ``obj`` the one way the ledger hashes it: sorted keys, no spaces, UTF-8."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _hash_columns(
    prev_hash: str,
    seq: int,
    ts_ms: int,
    kind: str,
    session_id: str,
    action_id: str,
    idempotency_key: str,
    principal: str,
    principal_kind: str,
    epoch: int,
    body_json: str,
) -> str:
    # Builds canonical_json(entry without hashes) by hand, keys in sorted order, so that
    # verify() need not parse and re-serialize each body: ``body_json`` is stored canonical.
    payload = (
        f'{{"action_id":{encode_basestring(action_id)},"body":{body_json},"epoch":{epoch},'
        f'"idempotency_key":{encode_basestring(idempotency_key)},'
        f'"kind":{encode_basestring(kind)},"principal":{encode_basestring(principal)},'
        f'"principal_kind":{encode_basestring(principal_kind)},"seq":{seq},'
        f'"session_id":{encode_basestring(session_id)},"ts_ms":{ts_ms}}}'
    )
    return hashlib.sha256((prev_hash + payload).encode()).hexdigest()


def redact(body: Mapping[str, Any]) -> dict[str, Any]:
    """Return a copy of ``body`` with secret values replaced by ``"[REDACTED]"``.

    A value is secret when its key (at any depth) contains ``password``, ``token`` or
    ``secret``, or when the key is listed in ``body["_secret_keys"]``. The
    ``_secret_keys`` list itself is dropped.

    Args:
        body: the entry body as given to :meth:`Ledger.append`.
    """
    listed = body.get(_SECRET_KEYS_FIELD, ())
    if isinstance(listed, str):
        listed = (listed,)
    extra = frozenset(str(k) for k in listed)
    return {str(k): _redact_value(str(k), v, extra) for k, v in body.items() if k != _SECRET_KEYS_FIELD}


def _is_secret_key(key: str, extra: frozenset[str]) -> bool:
    lowered = key.lower()
    return key in extra or any(word in lowered for word in _SECRET_WORDS)


def _redact_value(key: str, value: Any, extra: frozenset[str]) -> Any:
    if _is_secret_key(key, extra):
        return REDACTED
    if isinstance(value, Mapping):
        return {str(k): _redact_value(str(k), v, extra) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [
            {str(k): _redact_value(str(k), v, extra) for k, v in item.items()} if isinstance(item, Mapping) else item
            for item in value
        ]
    return value


@dataclass(frozen=True)
class Entry:
    """One ledger entry, as stored.

    Attributes:
        seq: position in the chain, from 1, without gaps.
        ts_ms: wall-clock time of the append, in milliseconds since the epoch.
        kind: ``"intent"``, ``"result"``, ``"lease_change"``, ... (see ``KINDS``).
        session_id: the executor session, or ``""``.
        action_id: the action this entry is about, or ``""``.
        idempotency_key: the agent's idempotency key for the action, or ``""``.
        principal: who caused the entry (an agent id, a person, ``"executor"``).
        principal_kind: ``"agent"``, ``"human"`` or ``"system"``.
        epoch: the control-lease epoch (fencing token) in force.
        body: the redacted body.
        prev_hash: the previous entry's hash (64 zeros for the first entry).
        entry_hash: ``sha256(prev_hash || canonical_json(entry without hashes))``.
    """

    seq: int
    ts_ms: int
    kind: str
    session_id: str
    action_id: str
    idempotency_key: str
    principal: str
    principal_kind: str
    epoch: int
    body: dict[str, Any]
    prev_hash: str
    entry_hash: str

    def hashed_fields(self) -> dict[str, Any]:
        """Return the entry without its two hashes: what ``entry_hash`` covers."""
        return {
            "seq": self.seq,
            "ts_ms": self.ts_ms,
            "kind": self.kind,
            "session_id": self.session_id,
            "action_id": self.action_id,
            "idempotency_key": self.idempotency_key,
            "principal": self.principal,
            "principal_kind": self.principal_kind,
            "epoch": self.epoch,
            "body": self.body,
        }

    def to_dict(self) -> dict[str, Any]:
        """Return every column as a JSON-ready dict."""
        return {**self.hashed_fields(), "prev_hash": self.prev_hash, "entry_hash": self.entry_hash}


def entry_hash(prev_hash: str, fields: Mapping[str, Any]) -> str:
    """Compute an entry's hash the way the specification states it.

    Args:
        prev_hash: the previous entry's hash (hex).
        fields: the entry without ``prev_hash`` and ``entry_hash``.

    Returns:
        ``sha256(prev_hash || canonical_json(fields))`` as hex.
    """
    return hashlib.sha256((prev_hash + canonical_json(dict(fields))).encode()).hexdigest()


@dataclass(frozen=True)
class NewEntry:
    """An entry to append with :meth:`Ledger.append_many`; the fields of :meth:`Ledger.append`."""

    kind: str
    session_id: str = ""
    action_id: str = ""
    idempotency_key: str = ""
    principal: str = ""
    principal_kind: PrincipalKind = "agent"
    epoch: int = 0
    body: Mapping[str, Any] | None = None


# A validated entry waiting for its seq: kind, session, action, key, principal,
# principal_kind, epoch, canonical body JSON.
_Row = tuple[str, str, str, str, str, str, int, str]


def _prepare(new: NewEntry) -> _Row:
    if not new.kind:
        raise LedgerError("kind must not be empty", reason="INVALID_ARGUMENT")
    if new.principal_kind not in _PRINCIPAL_KINDS:
        raise LedgerError(
            f"principal_kind must be one of agent, human, system; got {new.principal_kind!r}",
            reason="INVALID_ARGUMENT",
        )
    if isinstance(new.epoch, bool) or not isinstance(new.epoch, int):
        raise LedgerError(f"epoch must be an int, got {new.epoch!r}", reason="INVALID_ARGUMENT")
    try:
        body_json = canonical_json(redact(new.body or {}))
    except (TypeError, ValueError) as exc:
        raise LedgerError(f"body is not JSON-serializable: {exc}", reason="INVALID_ARGUMENT") from exc
    return (
        new.kind,
        new.session_id,
        new.action_id,
        new.idempotency_key,
        new.principal,
        new.principal_kind,
        new.epoch,
        body_json,
    )


def _row_to_entry(row: Sequence[Any]) -> Entry:
    return Entry(
        seq=row[0],
        ts_ms=row[1],
        kind=row[2],
        session_id=row[3],
        action_id=row[4],
        idempotency_key=row[5],
        principal=row[6],
        principal_kind=row[7],
        epoch=row[8],
        body=json.loads(row[9]),
        prev_hash=row[10],
        entry_hash=row[11],
    )


def _insert(conn: sqlite3.Connection, rows: Sequence[_Row]) -> list[tuple[Any, ...]]:
    """Chain ``rows`` onto the recorded head, inside the caller's write transaction."""
    head_seq, prev = _read_head(conn)
    ts_ms = _now_ms()
    stored: list[tuple[Any, ...]] = []
    for kind, sid, aid, key, who, who_kind, epoch, body_json in rows:
        head_seq += 1
        digest = _hash_columns(prev, head_seq, ts_ms, kind, sid, aid, key, who, who_kind, epoch, body_json)  # fmt: skip
        stored.append((head_seq, ts_ms, kind, sid, aid, key, who, who_kind, epoch, body_json, prev, digest))  # fmt: skip # noqa: E501
        prev = digest
    if len(stored) == 1:
        conn.execute(_INSERT, stored[0])
    else:
        conn.executemany(_INSERT, stored)
    conn.execute(_SET_HEAD, (str(head_seq), prev))
    return stored


class _Waiter:
    """One caller's rows in the group-commit queue."""

    __slots__ = ("error", "rows", "stored")

    def __init__(self, rows: Sequence[_Row]) -> None:
        self.rows = rows
        self.stored: list[tuple[Any, ...]] | None = None
        self.error: BaseException | None = None


class Ledger:
    """An append-only, hash-chained action ledger in one SQLite file.

    Safe to share between threads: one connection, guarded by a lock; concurrent appends
    are group-committed. Several processes may append to the same file; ``BEGIN
    IMMEDIATE`` serializes them.

    Args:
        path: the SQLite file; created (with its parent folder) when missing.
        busy_timeout_s: how long to wait for another process's write lock.
        head_interval_s: the longest time the head file lags behind an append.
        head_every: write the head file at once when this many entries are waiting.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        busy_timeout_s: float = 10.0,
        head_interval_s: float = 0.1,
        head_every: int = 1000,
    ) -> None:
        self._path = Path(path)
        self._lock = threading.RLock()  # guards the connection
        self._queue_cv = threading.Condition()  # guards the group-commit queue
        self._queue: list[_Waiter] = []
        self._leading = False
        self._closed = False
        self._commits = 0  # transactions that appended entries (group commit folds many)
        from ._recovery import HeadWriter, head_file_path

        self._head: HeadWriter = HeadWriter(head_file_path(self._path), head_interval_s, head_every)
        try:
            self._path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(
                self._path,
                timeout=busy_timeout_s,
                isolation_level=None,  # transactions are explicit: BEGIN IMMEDIATE
                check_same_thread=False,
            )
        except (OSError, sqlite3.Error) as exc:
            raise LedgerError(f"cannot open ledger {self._path}: {exc}") from exc
        try:
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=FULL")
            self._migrate()
            self._head.check(self._conn)
        except sqlite3.Error as exc:
            self._conn.close()
            raise LedgerError(f"cannot open ledger {self._path}: {exc}") from exc

    # -- lifecycle -----------------------------------------------------------------

    @property
    def path(self) -> Path:
        """The SQLite file."""
        return self._path

    @property
    def head_path(self) -> Path:
        """The head file, ``<path>.head``."""
        return self._head.path

    def close(self) -> None:
        """Write the head file and close the connection. Appends already returned are durable."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._conn.close()
        self._head.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            if self._closed:
                raise LedgerError(f"ledger {self._path} is closed")
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
                    (version, name, _now_ms()),
                )

    # -- writing -------------------------------------------------------------------

    def append(
        self,
        kind: str,
        *,
        session_id: str = "",
        action_id: str = "",
        idempotency_key: str = "",
        principal: str = "",
        principal_kind: PrincipalKind = "agent",
        epoch: int = 0,
        body: Mapping[str, Any] | None = None,
    ) -> Entry:
        """Append one entry; it is durable when this returns.

        Secret values in ``body`` are redacted before hashing (see :func:`redact`).

        Args:
            kind: the entry kind, e.g. ``"intent"`` or ``"result"``.
            session_id: the executor session.
            action_id: the action the entry is about.
            idempotency_key: the agent's idempotency key.
            principal: who caused the entry.
            principal_kind: ``"agent"``, ``"human"`` or ``"system"``.
            epoch: the control-lease epoch in force.
            body: JSON-serializable details.

        Returns:
            The stored entry, with its seq and hashes.

        Raises:
            LedgerError: bad arguments, an unserializable body, or a database failure.
        """
        new = NewEntry(kind, session_id, action_id, idempotency_key, principal, principal_kind, epoch, body)
        (entry,) = self.append_many([new])
        return entry

    def append_many(self, entries: Iterable[NewEntry]) -> list[Entry]:
        """Append several entries in one transaction: all or none, with consecutive seqs.

        Durable when this returns, like :meth:`append`. Concurrent callers share
        transactions (group commit), so the entries may sit next to other threads'.

        Raises:
            LedgerError: any bad entry (then nothing is written), or a database failure.
        """
        rows = [_prepare(new) for new in entries]
        if not rows:
            return []
        stored = self._commit(rows)
        return [_row_to_entry(row) for row in stored]

    def _commit(self, rows: Sequence[_Row]) -> list[tuple[Any, ...]]:
        """Queue ``rows``; lead a group commit or wait for the leader that took them."""
        mine = _Waiter(rows)
        with self._queue_cv:
            self._queue.append(mine)
            while mine.stored is None and mine.error is None and self._leading:
                self._queue_cv.wait()
            if mine.stored is None and mine.error is None:
                # No commit in progress and ours not written: lead, taking the whole queue.
                self._leading = True
                batch, self._queue = self._queue, []
            else:
                batch = []
        if batch:
            try:
                self._write_batch(batch)
            finally:
                with self._queue_cv:
                    self._leading = False
                    self._queue_cv.notify_all()
        if mine.error is not None:
            raise mine.error
        assert mine.stored is not None
        return mine.stored

    def _write_batch(self, batch: list[_Waiter]) -> None:
        rows = [row for waiter in batch for row in waiter.rows]
        try:
            with self._write() as conn:
                stored = _insert(conn, rows)
        except sqlite3.Error as exc:  # nothing in the batch was written
            for waiter in batch:
                waiter.error = LedgerError(f"cannot append to ledger {self._path}: {exc}")
            return
        except BaseException as exc:  # nobody may wait forever for a batch that died
            for waiter in batch:
                waiter.error = LedgerError(f"the commit holding this entry failed: {exc!r}")
            raise
        self._commits += 1
        at = 0
        for waiter in batch:
            waiter.stored = stored[at : at + len(waiter.rows)]
            at += len(waiter.rows)
        self._head.advance(stored[-1][0], stored[-1][11])

    def intent(
        self,
        session_id: str,
        action_id: str,
        idempotency_key: str,
        principal: str,
        epoch: int,
        params: Mapping[str, Any],
        *,
        principal_kind: PrincipalKind = "agent",
    ) -> Entry:
        """Append an ``intent`` entry: the action about to be dispatched.

        Args:
            session_id: the executor session.
            action_id: the executor's id for this action.
            idempotency_key: the agent's idempotency key.
            principal: the agent (or person) asking.
            epoch: the control-lease epoch in force.
            params: the action's parameters, stored as ``body["params"]``.
            principal_kind: who ``principal`` is.
        """
        return self.append(
            "intent",
            session_id=session_id,
            action_id=action_id,
            idempotency_key=idempotency_key,
            principal=principal,
            principal_kind=principal_kind,
            epoch=epoch,
            body={"params": dict(params)},
        )

    def result(
        self,
        session_id: str,
        action_id: str,
        idempotency_key: str,
        principal: str,
        epoch: int,
        outcome: str,
        reason: str,
        evidence: str,
        execution_started: bool,
        message: str = "",
        extra: Mapping[str, Any] | None = None,
        *,
        principal_kind: PrincipalKind = "agent",
    ) -> Entry:
        """Append a ``result`` entry: what happened to an intent.

        Args:
            session_id: the executor session.
            action_id: the action the intent named.
            idempotency_key: the agent's idempotency key.
            principal: the agent (or person) that asked.
            epoch: the control-lease epoch in force.
            outcome: ``"DONE"``, ``"FAILED"``, ``"UNKNOWN"``, ``"REFUSED"``, ...
            reason: a machine-readable reason code.
            evidence: what proves the outcome (``"OBSERVED"``, ``"DISPATCH_RETURNED"``, ...).
            execution_started: whether anything may have reached the target.
            message: a human-readable explanation.
            extra: more details, stored as ``body["extra"]``.
            principal_kind: who ``principal`` is.
        """
        body: dict[str, Any] = {
            "outcome": outcome,
            "reason": reason,
            "evidence": evidence,
            "execution_started": execution_started,
            "message": message,
        }
        if extra:
            body["extra"] = dict(extra)
        return self.append(
            "result",
            session_id=session_id,
            action_id=action_id,
            idempotency_key=idempotency_key,
            principal=principal,
            principal_kind=principal_kind,
            epoch=epoch,
            body=body,
        )

    def reconcile(
        self,
        session_id: str,
        action_id: str,
        principal: str,
        verdict: Literal["HAPPENED", "DID_NOT_HAPPEN"],
        evidence: str,
        *,
        principal_kind: PrincipalKind = "agent",
        observation_id: str = "",
        message: str = "",
    ) -> Entry:
        """Append a ``reconcile`` entry: the real state says whether an action happened.

        The idempotency key and epoch are copied from the action's intent. The body
        holds ``outcome="RECONCILED"``, the ``verdict`` and the ``evidence``.

        Args:
            session_id: the action's session.
            action_id: the action, usually one left ``UNKNOWN``.
            principal: who looked at the real state.
            verdict: ``"HAPPENED"`` or ``"DID_NOT_HAPPEN"``.
            evidence: a readable account of what shows it.
            principal_kind: who ``principal`` is.
            observation_id: the observation the verdict rests on, if any.
            message: a human-readable note.

        Raises:
            LedgerError: an unknown verdict (``INVALID_ARGUMENT``), or no intent for
                that action in that session (``NOT_FOUND``).
        """
        if verdict not in VERDICTS:
            raise LedgerError(
                f"verdict must be HAPPENED or DID_NOT_HAPPEN, got {verdict!r}",
                reason="INVALID_ARGUMENT",
            )
        found = self._select(
            f"SELECT {_COLUMNS} FROM entries WHERE action_id = ? AND session_id = ? "
            "AND kind = 'intent' ORDER BY seq DESC LIMIT 1",
            [action_id, session_id],
        )
        if not found:
            raise LedgerError(
                f"no intent for action {action_id!r} in session {session_id!r}",
                reason="NOT_FOUND",
            )
        intent = found[0]
        body = {"outcome": "RECONCILED", "verdict": verdict, "evidence": evidence}
        if observation_id:
            body["observation_id"] = observation_id
        if message:
            body["message"] = message
        return self.append(
            "reconcile",
            session_id=session_id,
            action_id=action_id,
            idempotency_key=intent.idempotency_key,
            principal=principal,
            principal_kind=principal_kind,
            epoch=intent.epoch,
            body=body,
        )

    def lease_change(
        self,
        target: str,
        event: str,
        principal: str,
        principal_kind: PrincipalKind,
        epoch: int,
        session_id: str = "",
        *,
        detail: Mapping[str, Any] | None = None,
    ) -> Entry:
        """Append a ``lease_change`` entry: who got, kept or lost control of a target.

        Args:
            target: the controlled target (``"browser:alice"``, a window, ...).
            event: ``"takeover"``, ``"hand_back"``, ... (see ``LEASE_EVENTS``).
            principal: who now holds (or gave up) the lease.
            principal_kind: ``"human"``, ``"agent"`` or ``"system"``.
            epoch: the lease epoch after the change.
            session_id: the executor session that saw it, if any.
            detail: more details, stored as ``body["detail"]``.
        """
        if not event:
            raise LedgerError("event must not be empty", reason="INVALID_ARGUMENT")
        body: dict[str, Any] = {"target": target, "event": event}
        if detail:
            body["detail"] = dict(detail)
        return self.append(
            "lease_change",
            session_id=session_id,
            principal=principal,
            principal_kind=principal_kind,
            epoch=epoch,
            body=body,
        )

    def _bulk_load(self, rows: Iterable[tuple[int, str, str, str, str, str, str, int, str]]) -> int:
        """Append many pre-serialized rows in one transaction, chained as usual.

        For benchmarks and tests that need a large ledger fast: each row is ``(ts_ms,
        kind, session_id, action_id, idempotency_key, principal, principal_kind, epoch,
        body_json)`` with ``body_json`` already canonical and redacted. No validation.
        Returns the new head seq.
        """
        with self._write() as conn:
            head_seq, prev = _read_head(conn)
            hash_columns = _hash_columns

            def chained() -> Iterator[tuple[Any, ...]]:
                nonlocal head_seq, prev
                for ts, kind, sid, aid, key, who, who_kind, epoch, body in rows:
                    head_seq += 1
                    digest = hash_columns(prev, head_seq, ts, kind, sid, aid, key, who, who_kind, epoch, body)  # fmt: skip # noqa: E501
                    yield (head_seq, ts, kind, sid, aid, key, who, who_kind, epoch, body, prev, digest)  # fmt: skip
                    prev = digest

            conn.executemany(_INSERT, chained())
            conn.execute(_SET_HEAD, (str(head_seq), prev))
        self._head.advance(head_seq, prev)
        return head_seq

    # -- recovery ------------------------------------------------------------------

    def recover(self) -> list[RecoveredAction]:
        """Mark every intent that has neither a result nor a reconcile ``UNKNOWN``.

        Run it on start, before serving: an intent left without a result means the
        process stopped between the intent and its result, so the action may have
        happened. Each gets a ``result`` entry with outcome ``UNKNOWN``, reason
        ``RECOVERED`` and ``execution_started=True`` — it is never retried. The scan and
        the appends happen in one transaction; a second call finds nothing new.

        Returns:
            The actions marked, oldest intent first, with their session's target.
        """
        from ._recovery import find_interrupted, recovered_result

        try:
            with self._write() as conn:
                found = find_interrupted(conn)
                if not found:
                    return []
                stored = _insert(conn, [_prepare(recovered_result(action)) for action in found])
        except sqlite3.Error as exc:
            raise LedgerError(f"cannot recover ledger {self._path}: {exc}") from exc
        self._commits += 1
        self._head.advance(stored[-1][0], stored[-1][11])
        return [action.with_result(row[0]) for action, row in zip(found, stored, strict=True)]

    def unresolved(self) -> list[UnresolvedAction]:
        """Return actions whose latest word is ``UNKNOWN`` and that no reconcile followed.

        The executor refuses new writes to their sessions and targets until each is
        reconciled (:meth:`reconcile`). Intents still without any result are not listed:
        they are in flight, or waiting for :meth:`recover`.
        """
        from ._recovery import find_unresolved

        with self._lock:
            try:
                return find_unresolved(self._conn)
            except sqlite3.Error as exc:
                raise LedgerError(f"cannot read ledger {self._path}: {exc}") from exc

    # -- reading -------------------------------------------------------------------

    def entries(
        self,
        *,
        session_id: str | None = None,
        action_id: str | None = None,
        kind: str | None = None,
        since_seq: int = 0,
        limit: int | None = None,
        principal: str | None = None,
        outcome: str | None = None,
        since_ms: int | None = None,
    ) -> list[Entry]:
        """Return entries in seq order, filtered.

        Args:
            session_id: only this session's entries.
            action_id: only this action's entries.
            kind: only entries of this kind.
            since_seq: only entries with ``seq > since_seq``.
            limit: at most this many (the oldest first).
            principal: only entries caused by this principal.
            outcome: only entries stating this outcome (``body["outcome"]``, any case;
                a ``refusal`` entry counts as ``REFUSED``).
            since_ms: only entries appended at or after this time (ms since the epoch).
        """
        where, params = _filters(session_id, action_id, kind, principal, outcome, since_ms)
        where.append("seq > ?")
        params.append(since_seq)
        sql = f"SELECT {_COLUMNS} FROM entries WHERE {' AND '.join(where)} ORDER BY seq"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        return self._select(sql, params)

    def iter_entries(self, *, batch_size: int = 5000, **filters: Any) -> Iterator[Entry]:
        """Yield entries in seq order, a batch at a time; takes :meth:`entries`' filters.

        Entries appended while iterating are yielded too.
        """
        since = int(filters.pop("since_seq", 0))
        filters.pop("limit", None)
        while batch := self.entries(since_seq=since, limit=batch_size, **filters):
            yield from batch
            since = batch[-1].seq

    def tail(
        self,
        n: int = 20,
        *,
        session_id: str | None = None,
        action_id: str | None = None,
        kind: str | None = None,
        principal: str | None = None,
        outcome: str | None = None,
        since_ms: int | None = None,
    ) -> list[Entry]:
        """Return the last ``n`` entries (filtered as in :meth:`entries`), oldest first."""
        where, params = _filters(session_id, action_id, kind, principal, outcome, since_ms)
        clause = f"WHERE {' AND '.join(where)} " if where else ""
        sql = f"SELECT {_COLUMNS} FROM entries {clause}ORDER BY seq DESC LIMIT ?"
        params.append(n)
        return list(reversed(self._select(sql, params)))

    def find_result_by_key(self, session_id: str, idempotency_key: str) -> Entry | None:
        """Return the latest ``result`` recorded for an idempotency key, or ``None``."""
        return self._find_by_key(session_id, idempotency_key, "result")

    def find_intent_by_key(self, session_id: str, idempotency_key: str) -> Entry | None:
        """Return the latest ``intent`` recorded for an idempotency key, or ``None``."""
        return self._find_by_key(session_id, idempotency_key, "intent")

    def find_reconcile_by_key(self, session_id: str, idempotency_key: str) -> Entry | None:
        """Return the latest ``reconcile`` recorded for an idempotency key, or ``None``."""
        return self._find_by_key(session_id, idempotency_key, "reconcile")

    def head(self) -> tuple[int, str]:
        """Return ``(seq, hash)`` of the last entry; ``(0, GENESIS_HASH)`` when empty."""
        with self._lock:
            try:
                return _read_head(self._conn)
            except sqlite3.Error as exc:
                raise LedgerError(f"cannot read ledger {self._path}: {exc}") from exc

    def count(self) -> int:
        """Return how many entries are stored."""
        with self._lock:
            row = self._conn.execute("SELECT COUNT(*) FROM entries").fetchone()
        return int(row[0])

    def _find_by_key(self, session_id: str, idempotency_key: str, kind: str) -> Entry | None:
        found = self._select(
            f"SELECT {_COLUMNS} FROM entries "
            "WHERE session_id = ? AND idempotency_key = ? AND kind = ? "
            "ORDER BY seq DESC LIMIT 1",
            [session_id, idempotency_key, kind],
        )
        return found[0] if found else None

    def _select(self, sql: str, params: Sequence[Any]) -> list[Entry]:
        with self._lock:
            try:
                rows = self._conn.execute(sql, params).fetchall()
            except sqlite3.Error as exc:
                raise LedgerError(f"cannot read ledger {self._path}: {exc}") from exc
        return [_row_to_entry(row) for row in rows]

    # -- verifying -----------------------------------------------------------------

    def verify(self, *, batch_size: int = 10_000) -> VerifyReport:
        """Recompute the whole hash chain and check it against both recorded heads.

        Reads through a separate connection (a WAL snapshot), so appends are not held up.
        Finds an edited entry (hash mismatch), a deleted entry (gap in seq, broken
        ``prev_hash`` link), reordered entries, and a truncated tail: entries missing
        after the ``meta`` head, or after the head file's (see the module docs for the
        window the head file cannot see).

        Args:
            batch_size: rows fetched per round trip.
        """
        from ._recovery import verify_file

        return verify_file(self._path, self._head.path, batch_size=batch_size)

    def check(self) -> VerifyReport:
        """Verify the chain and raise when it does not hold.

        Raises:
            LedgerTamperedError: naming the first entry that does not verify.
        """
        report = self.verify()
        if not report.ok:
            raise LedgerTamperedError(f"ledger {self._path}: {report.message}", seq=report.first_bad_seq)
        return report


def _read_head(conn: sqlite3.Connection) -> tuple[int, str]:
    values = dict(conn.execute(_GET_HEAD).fetchall())
    try:
        return int(values["head_seq"]), str(values["head_hash"])
    except (KeyError, ValueError) as exc:
        raise LedgerError("the ledger's recorded head is missing or damaged") from exc


def _filters(
    session_id: str | None = None,
    action_id: str | None = None,
    kind: str | None = None,
    principal: str | None = None,
    outcome: str | None = None,
    since_ms: int | None = None,
) -> tuple[list[str], list[Any]]:
    where: list[str] = []
    params: list[Any] = []
    for column, value in (
        ("session_id", session_id),
        ("action_id", action_id),
        ("kind", kind),
        ("principal", principal),
    ):
        if value is not None:
            where.append(f"{column} = ?")
            params.append(value)
    if outcome is not None:
        where.append("(upper(json_extract(body, '$.outcome')) = ? OR (kind = 'refusal' AND ? = 'REFUSED'))")
        params += [outcome.upper(), outcome.upper()]
    if since_ms is not None:
        where.append("ts_ms >= ?")
        params.append(since_ms)
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


def _now_ms() -> int:
    return time.time_ns() // 1_000_000
