"""The append-only, hash-chained action ledger, kept in one SQLite file.

Every entry carries ``entry_hash = sha256(prev_hash || canonical_json(entry))`` where the
hashed entry is every column except the two hashes, and the first entry's ``prev_hash`` is
64 zeros. SQL triggers refuse UPDATE and DELETE on ``entries``; :meth:`Ledger.verify`
recomputes the chain so that edits made around the triggers are still found.

The ``meta`` table records the head (last seq and hash) in the same transaction as each
append, so that a truncated tail is found as well, and appends chain onto the recorded
head rather than onto whatever row happens to be last.
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
from datetime import UTC, datetime
from json.encoder import encode_basestring
from pathlib import Path
from typing import Any, Literal

from ._errors import LedgerError, LedgerTamperedError

__all__ = [
    "GENESIS_HASH",
    "KINDS",
    "REDACTED",
    "Entry",
    "Ledger",
    "PrincipalKind",
    "VerifyReport",
    "canonical_json",
    "entry_hash",
    "redact",
    "timeline",
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
    "decision",
    "lease_change",
    "reconcile",
)
"""Entry kinds used across Handrail. Others are accepted; these are the known ones."""

PrincipalKind = Literal["agent", "human", "system"]
_PRINCIPAL_KINDS = frozenset({"agent", "human", "system"})

_SECRET_WORDS = ("password", "token", "secret")
_SECRET_KEYS_FIELD = "_secret_keys"

_COLUMNS = (
    "seq, ts_ms, kind, session_id, action_id, idempotency_key, principal, "
    "principal_kind, epoch, body, prev_hash, entry_hash"
)

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
    return {
        str(k): _redact_value(str(k), v, extra) for k, v in body.items() if k != _SECRET_KEYS_FIELD
    }


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
            {str(k): _redact_value(str(k), v, extra) for k, v in item.items()}
            if isinstance(item, Mapping)
            else item
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
class VerifyReport:
    """The outcome of :meth:`Ledger.verify`.

    Attributes:
        ok: whether the whole chain verified.
        count: how many entries were read.
        first_bad_seq: the first entry that does not verify (for a deleted entry, the
            missing seq), or ``None`` when ``ok``.
        message: a one-line explanation.
    """

    ok: bool
    count: int
    first_bad_seq: int | None
    message: str


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


class Ledger:
    """An append-only, hash-chained action ledger in one SQLite file.

    Safe to share between threads: one connection, guarded by a lock. Several processes
    may append to the same file; ``BEGIN IMMEDIATE`` serializes them.

    Args:
        path: the SQLite file; created (with its parent folder) when missing.
        busy_timeout_s: how long to wait for another process's write lock.
    """

    def __init__(self, path: str | Path, *, busy_timeout_s: float = 10.0) -> None:
        self._path = Path(path)
        self._lock = threading.RLock()
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
        except sqlite3.Error as exc:
            self._conn.close()
            raise LedgerError(f"cannot open ledger {self._path}: {exc}") from exc

    # -- lifecycle -----------------------------------------------------------------

    @property
    def path(self) -> Path:
        """The SQLite file."""
        return self._path

    def close(self) -> None:
        """Close the connection. Appends already returned are durable."""
        with self._lock:
            self._conn.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

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
        if not kind:
            raise LedgerError("kind must not be empty", reason="INVALID_ARGUMENT")
        if principal_kind not in _PRINCIPAL_KINDS:
            raise LedgerError(
                f"principal_kind must be one of agent, human, system; got {principal_kind!r}",
                reason="INVALID_ARGUMENT",
            )
        if isinstance(epoch, bool) or not isinstance(epoch, int):
            raise LedgerError(f"epoch must be an int, got {epoch!r}", reason="INVALID_ARGUMENT")
        clean = redact(body or {})
        try:
            body_json = canonical_json(clean)
        except (TypeError, ValueError) as exc:
            raise LedgerError(
                f"body is not JSON-serializable: {exc}", reason="INVALID_ARGUMENT"
            ) from exc
        try:
            with self._write() as conn:
                head_seq, prev_hash = _read_head(conn)
                seq = head_seq + 1
                ts_ms = _now_ms()
                digest = _hash_columns(
                    prev_hash,
                    seq,
                    ts_ms,
                    kind,
                    session_id,
                    action_id,
                    idempotency_key,
                    principal,
                    principal_kind,
                    epoch,
                    body_json,
                )
                conn.execute(
                    f"INSERT INTO entries ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        seq,
                        ts_ms,
                        kind,
                        session_id,
                        action_id,
                        idempotency_key,
                        principal,
                        principal_kind,
                        epoch,
                        body_json,
                        prev_hash,
                        digest,
                    ),
                )
                conn.execute("UPDATE meta SET value = ? WHERE key = 'head_seq'", (str(seq),))
                conn.execute("UPDATE meta SET value = ? WHERE key = 'head_hash'", (digest,))
        except sqlite3.Error as exc:
            raise LedgerError(f"cannot append to ledger {self._path}: {exc}") from exc
        return Entry(
            seq=seq,
            ts_ms=ts_ms,
            kind=kind,
            session_id=session_id,
            action_id=action_id,
            idempotency_key=idempotency_key,
            principal=principal,
            principal_kind=principal_kind,
            epoch=epoch,
            body=json.loads(body_json),
            prev_hash=prev_hash,
            entry_hash=digest,
        )

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
            outcome: e.g. ``"succeeded"``, ``"refused"``, ``"unknown"``.
            reason: a machine-readable reason code.
            evidence: what proves the outcome (``"observed"``, ``"dispatch_returned"``, ...).
            execution_started: whether anything reached the target.
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

    # -- reading -------------------------------------------------------------------

    def entries(
        self,
        *,
        session_id: str | None = None,
        action_id: str | None = None,
        kind: str | None = None,
        since_seq: int = 0,
        limit: int | None = None,
    ) -> list[Entry]:
        """Return entries in seq order, filtered.

        Args:
            session_id: only this session's entries.
            action_id: only this action's entries.
            kind: only entries of this kind.
            since_seq: only entries with ``seq > since_seq``.
            limit: at most this many (the oldest first).
        """
        where, params = _filters(session_id, action_id, kind)
        where.append("seq > ?")
        params.append(since_seq)
        sql = f"SELECT {_COLUMNS} FROM entries WHERE {' AND '.join(where)} ORDER BY seq"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        return self._select(sql, params)

    def tail(self, n: int = 20, *, session_id: str | None = None) -> list[Entry]:
        """Return the last ``n`` entries (optionally of one session), oldest first."""
        where, params = _filters(session_id, None, None)
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
        """Recompute the whole hash chain and report the first entry that does not verify.

        Reads through a separate connection (a WAL snapshot), so appends are not held up.
        Finds an edited entry (hash mismatch), a deleted entry (gap in seq, broken
        ``prev_hash`` link, or a head that no longer matches ``meta``) and reordered
        entries.

        Args:
            batch_size: rows fetched per round trip.
        """
        try:
            conn = sqlite3.connect(self._path, isolation_level=None)
        except sqlite3.Error as exc:
            raise LedgerError(f"cannot open ledger {self._path}: {exc}") from exc
        try:
            conn.execute("BEGIN")  # one snapshot for both the rows and the recorded head
            return _verify_chain(conn, batch_size)
        except sqlite3.Error as exc:
            raise LedgerError(f"cannot read ledger {self._path}: {exc}") from exc
        finally:
            conn.close()

    def check(self) -> VerifyReport:
        """Verify the chain and raise when it does not hold.

        Raises:
            LedgerTamperedError: naming the first entry that does not verify.
        """
        report = self.verify()
        if not report.ok:
            raise LedgerTamperedError(
                f"ledger {self._path}: {report.message}", seq=report.first_bad_seq
            )
        return report


def _verify_chain(conn: sqlite3.Connection, batch_size: int) -> VerifyReport:
    head_seq, head_hash = _read_head(conn)
    cursor = conn.execute(f"SELECT {_COLUMNS} FROM entries ORDER BY seq")
    prev = GENESIS_HASH
    expected = 1
    count = 0
    hash_columns = _hash_columns
    while rows := cursor.fetchmany(batch_size):
        for seq, ts, kind, sid, aid, key, who, who_kind, epoch, body, prev_hash, digest in rows:
            if seq != expected:
                return VerifyReport(
                    False,
                    count,
                    expected,
                    f"entry #{expected} is missing (next stored entry is #{seq})",
                )
            if prev_hash != prev:
                return VerifyReport(
                    False,
                    count,
                    seq,
                    f"entry #{seq} does not link to entry #{seq - 1} (prev_hash mismatch)",
                )
            if hash_columns(prev, seq, ts, kind, sid, aid, key, who, who_kind, epoch, body) != (
                digest
            ):
                return VerifyReport(False, count, seq, f"entry #{seq} was altered (hash mismatch)")
            prev = digest
            expected += 1
            count += 1
    last = expected - 1
    if last != head_seq:
        if last < head_seq:
            message = f"entries #{last + 1}..#{head_seq} are missing (the tail was truncated)"
            return VerifyReport(False, count, last + 1, message)
        message = f"entry #{head_seq + 1} was added outside the ledger (recorded head #{head_seq})"
        return VerifyReport(False, count, head_seq + 1, message)
    if prev != head_hash:
        return VerifyReport(
            False, count, last, f"entry #{last} does not match the recorded head hash"
        )
    return VerifyReport(True, count, None, f"{count} entries, chain verified")


def _read_head(conn: sqlite3.Connection) -> tuple[int, str]:
    values = dict(conn.execute("SELECT key, value FROM meta WHERE key LIKE 'head_%'").fetchall())
    try:
        return int(values["head_seq"]), str(values["head_hash"])
    except (KeyError, ValueError) as exc:
        raise LedgerError("the ledger's recorded head is missing or damaged") from exc


def _filters(
    session_id: str | None, action_id: str | None, kind: str | None
) -> tuple[list[str], list[Any]]:
    where: list[str] = []
    params: list[Any] = []
    for column, value in (("session_id", session_id), ("action_id", action_id), ("kind", kind)):
        if value is not None:
            where.append(f"{column} = ?")
            params.append(value)
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


# -- timeline ----------------------------------------------------------------------

_VERB_KEYS = ("action", "verb", "op", "type")
_TARGET_KEYS = ("ref", "target", "element", "selector")
_QUOTED_KEYS = ("name", "label", "text", "value", "url")
_MAX_SUMMARY = 120


# Bookkeeping that makes a timeline line long without telling a reader anything.
_HIDDEN_KEYS = frozenset({"fingerprint", "decision_id", "observation_id"})


def timeline(entries: Iterable[Entry]) -> str:
    """Render entries as readable lines, one per entry.

    Example line::

        12:03:04.123  #17 intent   s=abc act=a1 key=k1 agent:demo-agent e=3  click e12 "Turn off auto-renew"

    Times are UTC. Results are summarized by outcome, reason and evidence.

    Args:
        entries: entries in the order to print them.
    """  # noqa: E501
    return "\n".join(_timeline_line(entry) for entry in entries)


def _timeline_line(entry: Entry) -> str:
    when = datetime.fromtimestamp(entry.ts_ms / 1000, tz=UTC)
    parts = [f"{when:%H:%M:%S}.{entry.ts_ms % 1000:03d} ", f"#{entry.seq}", f"{entry.kind:<8}"]
    if entry.session_id:
        parts.append(f"s={entry.session_id}")
    if entry.action_id:
        parts.append(f"act={entry.action_id}")
    if entry.idempotency_key:
        parts.append(f"key={entry.idempotency_key}")
    if entry.principal:
        parts.append(f"{entry.principal_kind}:{entry.principal}")
    parts.append(f"e={entry.epoch}")
    summary = _summarize(entry)
    line = " ".join(parts)
    return f"{line}  {summary}" if summary else line


def _summarize(entry: Entry) -> str:
    body = entry.body
    if entry.kind == "intent" and isinstance(body.get("params"), Mapping):
        text = _summarize_params(body["params"])
    elif entry.kind == "result":
        text = _summarize_result(body)
    elif entry.kind == "refusal":
        words = [str(body.get(k, "")) for k in ("kind", "ref") if body.get(k)]
        if body.get("name"):
            words.append(json.dumps(body["name"], ensure_ascii=False))
        if body.get("url"):
            words.append(str(body["url"]))
        text = f"REFUSED {body.get('reason', '')} " + " ".join(words)
        text += f": {body.get('message', '')}"
    else:
        text = _summarize_params(body)
    if len(text) > _MAX_SUMMARY:
        text = text[: _MAX_SUMMARY - 1] + "…"
    return text


def _summarize_params(params: Mapping[str, Any]) -> str:
    words: list[str] = []
    used: set[str] = set()
    for keys, quoted in ((_VERB_KEYS, False), (_TARGET_KEYS, False), (_QUOTED_KEYS, True)):
        for key in keys:
            value = params.get(key)
            if isinstance(value, str | int | float) and not isinstance(value, bool):
                words.append(json.dumps(value, ensure_ascii=False) if quoted else str(value))
                used.add(key)
                break
    for key, value in params.items():
        if key not in used and key not in _HIDDEN_KEYS:
            words.append(f"{key}={_short(value)}")
    return " ".join(words)


def _summarize_result(body: Mapping[str, Any]) -> str:
    words = [str(body.get("outcome", "?"))]
    if body.get("reason"):
        words.append(str(body["reason"]))
    if body.get("evidence"):
        words.append(f"evidence={body['evidence']}")
    if "execution_started" in body:
        words.append(f"started={'yes' if body['execution_started'] else 'no'}")
    if body.get("message"):
        words.append(json.dumps(body["message"], ensure_ascii=False))
    return " ".join(words)


def _short(value: Any) -> str:
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False) if " " in value or not value else value
    return canonical_json(value)
