"""Proving and restoring a ledger: chain verification, the head file, crash recovery.

- :func:`verify_file` walks the hash chain and compares its end with the two recorded
  heads: ``meta`` inside the database and the head file ``<db>.head`` outside it.
- :class:`HeadWriter` keeps the head file a little behind the database.
- :func:`find_interrupted` and :func:`find_unresolved` are the two recovery scans; each is
  one SQL query over the covering index ``entries_by_kind (kind, session_id, action_id)``.

An action is identified by ``(session_id, action_id)``.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import tempfile
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ._errors import LedgerError, LedgerTamperedError
from ._ledger import (
    _COLUMNS,
    GENESIS_HASH,
    NewEntry,
    PrincipalKind,
    _hash_columns,
    _now_ms,
    _read_head,
    canonical_json,
)

__all__ = [
    "HeadWriter",
    "RecoveredAction",
    "UnresolvedAction",
    "VerifyReport",
    "find_interrupted",
    "find_unresolved",
    "head_file_path",
    "read_head_file",
    "recovered_result",
    "verify_file",
    "write_head_file",
]

_log = logging.getLogger("handrail.recorder")

RECOVERED = "RECOVERED"
"""The reason of the ``UNKNOWN`` result that :meth:`Ledger.recover` writes."""

RECOVERED_MESSAGE = (
    "the executor stopped after recording the intent and before recording a result; "
    "the action may have happened: reconcile it by observing the real state"
)


# -- verification --------------------------------------------------------------------


@dataclass(frozen=True)
class VerifyReport:
    """The outcome of :meth:`Ledger.verify`.

    Attributes:
        ok: whether the whole chain verified, against both recorded heads.
        count: how many entries were read.
        first_bad_seq: the first entry that does not verify (for a deleted entry, the
            missing seq), or ``None`` when ``ok``.
        message: a one-line explanation.
        head_file: what the head file check found (``"seq 120 matches"``, ``"none"``, ...).
    """

    ok: bool
    count: int
    first_bad_seq: int | None
    message: str
    head_file: str = ""


def verify_file(db: Path, head_path: Path, *, batch_size: int = 10_000) -> VerifyReport:
    """Verify the ledger ``db`` against its own ``meta`` head and the head file.

    The head file is read before the database snapshot is taken: it is only ever
    written after the entries it names committed, so it is never ahead of a later
    snapshot of an intact database.
    """
    try:
        recorded = read_head_file(head_path)
    except LedgerTamperedError as exc:
        return VerifyReport(False, 0, None, str(exc), head_file="damaged")
    try:
        conn = sqlite3.connect(db, isolation_level=None)
    except sqlite3.Error as exc:
        raise LedgerError(f"cannot open ledger {db}: {exc}") from exc
    try:
        conn.execute("BEGIN")  # one snapshot for the rows and the recorded head
        return _verify_chain(conn, batch_size, recorded)
    except sqlite3.Error as exc:
        raise LedgerError(f"cannot read ledger {db}: {exc}") from exc
    finally:
        conn.close()


def _verify_chain(conn: sqlite3.Connection, batch_size: int, recorded: tuple[int, str] | None) -> VerifyReport:
    head_seq, head_hash = _read_head(conn)
    file_seq, file_hash = recorded if recorded is not None else (0, GENESIS_HASH)
    at_file_seq = GENESIS_HASH  # the stored hash of entry #file_seq, once read
    cursor = conn.execute(f"SELECT {_COLUMNS} FROM entries ORDER BY seq")
    prev = GENESIS_HASH
    expected = 1
    hash_columns = _hash_columns
    while rows := cursor.fetchmany(batch_size):
        for seq, ts, kind, sid, aid, key, who, who_kind, epoch, body, prev_hash, digest in rows:
            if seq != expected:
                return _bad(expected, f"entry #{expected} is missing (next stored entry is #{seq})")
            if prev_hash != prev:
                return _bad(seq, f"entry #{seq} does not link to entry #{seq - 1} (prev_hash mismatch)")
            if hash_columns(prev, seq, ts, kind, sid, aid, key, who, who_kind, epoch, body) != (digest):
                return _bad(seq, f"entry #{seq} was altered (hash mismatch)")
            if seq == file_seq:
                at_file_seq = digest
            prev = digest
            expected += 1
    last = expected - 1
    if last != head_seq:
        if last < head_seq:
            return _bad(last + 1, f"entries #{last + 1}..#{head_seq} are missing (the tail was truncated)")
        return _bad(
            head_seq + 1,
            f"entry #{head_seq + 1} was added outside the ledger (recorded head #{head_seq})",
        )
    if prev != head_hash:
        return _bad(last, f"entry #{last} does not match the recorded head hash")
    if recorded is None:
        note = "none (a truncated tail cannot be checked)"
        return VerifyReport(True, last, None, f"{last} entries, chain verified", note)
    if file_seq > last:
        return _bad(
            last + 1,
            f"truncated: head file says seq {file_seq} hash {file_hash}, database ends at seq {last}",
            f"seq {file_seq} is past the end",
        )
    if at_file_seq != file_hash:
        return _bad(
            file_seq,
            f"replaced: head file says seq {file_seq} hash {file_hash}, "
            f"database entry #{file_seq} has hash {at_file_seq}",
            f"seq {file_seq} does not match",
        )
    return VerifyReport(True, last, None, f"{last} entries, chain verified", f"seq {file_seq} matches")


def _bad(seq: int, message: str, head_file: str = "not checked") -> VerifyReport:
    return VerifyReport(False, max(seq - 1, 0), seq, message, head_file)


# -- the head file -----------------------------------------------------------------


def head_file_path(db: str | Path) -> Path:
    """Where the head file of the ledger ``db`` lives: ``<db>.head``."""
    db = Path(db)
    return db.with_name(db.name + ".head")


def read_head_file(path: Path) -> tuple[int, str] | None:
    """Return ``(seq, hash)`` from a head file, or ``None`` when there is none.

    Raises:
        LedgerTamperedError: the file exists but does not parse.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise LedgerError(f"cannot read head file {path}: {exc}") from exc
    try:
        data = json.loads(text)
        seq, digest = int(data["seq"]), str(data["hash"])
    except (ValueError, KeyError, TypeError) as exc:
        raise LedgerTamperedError(f"head file {path} is damaged: {exc}") from exc
    if seq < 0 or len(digest) != 64:
        raise LedgerTamperedError(f"head file {path} is damaged: seq {seq}, hash {digest!r}")
    return seq, digest


def write_head_file(path: Path, seq: int, digest: str) -> None:
    """Replace the head file atomically: temp file, fsync, rename, fsync the folder."""
    data = canonical_json({"seq": seq, "hash": digest, "ts_ms": _now_ms()}) + "\n"
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    folder = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)


class HeadWriter:
    """Keeps the head file a little behind the database, off the append path.

    A thread (started on the first append) writes the newest committed head when
    ``interval_s`` has passed since its last write, or at once when ``every`` entries
    are waiting. The writer is *frozen* when the file already disagrees with the
    database at open (a truncated or replaced database): the file is evidence, so it is
    never overwritten then.
    """

    def __init__(self, path: Path, interval_s: float, every: int) -> None:
        self.path = path
        self.frozen: str | None = None
        self._interval_s = interval_s
        self._every = every
        self._cv = threading.Condition()
        self._pending: tuple[int, str] | None = None
        self._written_seq = 0
        self._last_write = 0.0
        self._thread: threading.Thread | None = None
        self._closed = False
        self._idle = False

    def check(self, conn: sqlite3.Connection) -> None:
        """Compare the file with the database at open; freeze or schedule a write."""
        try:
            recorded = read_head_file(self.path)
        except LedgerError as exc:
            self.frozen = str(exc)
            return
        db_seq, db_hash = _read_head(conn)
        if recorded is not None:
            seq, digest = recorded
            row = conn.execute("SELECT entry_hash FROM entries WHERE seq = ?", (seq,)).fetchone()
            if seq > 0 and (row is None or row[0] != digest):
                self.frozen = f"head file {self.path} says seq {seq}, the database disagrees"
                return
            self._written_seq = seq
        if db_seq > self._written_seq:
            self._pending = (db_seq, db_hash)  # written on the next append or at close

    def advance(self, seq: int, digest: str) -> None:
        """Note a committed head. Cheap: wakes the thread only when it is idle or behind."""
        with self._cv:
            if self.frozen or self._closed:
                return
            if self._pending is None or seq > self._pending[0]:
                self._pending = (seq, digest)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=f"ledger-head:{self.path.name}", daemon=True)
                self._thread.start()
            elif self._idle or seq - self._written_seq >= self._every:
                self._cv.notify()

    def close(self) -> None:
        with self._cv:
            self._closed = True
            self._cv.notify_all()
        if self._thread is not None:
            self._thread.join()
        with self._cv:
            pending, self._pending = self._pending, None
        if pending is not None and not self.frozen:
            self._write(*pending)

    def _run(self) -> None:
        while True:
            with self._cv:
                while self._pending is None and not self._closed:
                    self._idle = True
                    self._cv.wait()
                self._idle = False
                if self._closed or self._pending is None:
                    return  # close() writes what is left
                wait = self._last_write + self._interval_s - time.monotonic()
                if wait > 0 and self._pending[0] - self._written_seq < self._every:
                    self._cv.wait(wait)  # advance() does not wake us here, unless behind
                    continue
                seq, digest = self._pending
                self._pending = None
            self._write(seq, digest)  # outside the lock: appends never wait on it

    def _write(self, seq: int, digest: str) -> None:
        if seq <= self._written_seq:
            return
        try:
            # Another process appending to the same file may have written a newer head.
            current = read_head_file(self.path)
            if current is not None and current[0] >= seq:
                self._written_seq = current[0]
                return
            write_head_file(self.path, seq, digest)
        except (OSError, LedgerError) as exc:  # the ledger itself is fine; say so loudly
            _log.warning("cannot write head file %s: %s", self.path, exc)
            return
        self._written_seq = seq
        self._last_write = time.monotonic()


# -- recovery ------------------------------------------------------------------------


@dataclass(frozen=True)
class RecoveredAction:
    """An action whose intent had no result; :meth:`Ledger.recover` marked it ``UNKNOWN``.

    Attributes:
        session_id: the action's session.
        action_id: the action.
        idempotency_key: the agent's key for it.
        principal: who asked for it.
        principal_kind: ``"agent"``, ``"human"`` or ``"system"``.
        epoch: the lease epoch of the intent.
        params: the intent's parameters (``body["params"]``).
        target: the session's target (from its ``session_open`` entry), or ``""``.
        intent_seq: the intent entry.
        result_seq: the ``UNKNOWN`` result entry that recovery wrote (0 before it is).
    """

    session_id: str
    action_id: str
    idempotency_key: str
    principal: str
    principal_kind: PrincipalKind
    epoch: int
    params: dict[str, Any]
    target: str
    intent_seq: int
    result_seq: int = 0

    def with_result(self, seq: int) -> RecoveredAction:
        return replace(self, result_seq=seq)


@dataclass(frozen=True)
class UnresolvedAction:
    """An action whose latest word is ``UNKNOWN`` and that no reconcile has followed.

    Attributes:
        session_id: the action's session.
        action_id: the action.
        idempotency_key: the agent's key for it.
        principal: who asked for it.
        principal_kind: ``"agent"``, ``"human"`` or ``"system"``.
        epoch: the lease epoch of the ``UNKNOWN`` result.
        params: the intent's parameters, or ``{}`` when the intent is not found.
        target: the session's target (from its ``session_open`` entry), or ``""``.
        unknown_seq: the ``UNKNOWN`` result entry.
        reason: that result's reason (``"RECOVERED"``, ``"CONNECTION_LOST"``, ...).
    """

    session_id: str
    action_id: str
    idempotency_key: str
    principal: str
    principal_kind: PrincipalKind
    epoch: int
    params: dict[str, Any]
    target: str
    unknown_seq: int
    reason: str


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


def find_interrupted(conn: sqlite3.Connection) -> list[RecoveredAction]:
    """Every intent without a result or reconcile, oldest first."""
    found = []
    for seq, sid, aid, key, who, who_kind, epoch, body, target in conn.execute(_INTERRUPTED):
        params = json.loads(body).get("params", {})
        found.append(
            RecoveredAction(
                sid, aid, key, who, who_kind, epoch, params if isinstance(params, dict) else {},
                str(target), seq,
            )
        )  # fmt: skip
    return found


def recovered_result(action: RecoveredAction) -> NewEntry:
    """The ``UNKNOWN`` result :meth:`Ledger.recover` writes for an interrupted action."""
    return NewEntry(
        "result",
        session_id=action.session_id,
        action_id=action.action_id,
        idempotency_key=action.idempotency_key,
        principal=action.principal,
        principal_kind=action.principal_kind,
        epoch=action.epoch,
        body={
            "outcome": "UNKNOWN",
            "reason": RECOVERED,
            "evidence": "NONE",
            "execution_started": True,
            "message": RECOVERED_MESSAGE,
            "extra": {"intent_seq": action.intent_seq, "recorded_by": "recovery"},
        },
    )


def find_unresolved(conn: sqlite3.Connection) -> list[UnresolvedAction]:
    """Every action whose latest result is ``UNKNOWN`` with no reconcile after it."""
    found = []
    for row in conn.execute(_UNRESOLVED):
        seq, sid, aid, key, who, who_kind, epoch, reason, intent_body, target = row
        params = json.loads(intent_body).get("params", {}) if intent_body else {}
        found.append(
            UnresolvedAction(
                sid, aid, key, who, who_kind, epoch, params if isinstance(params, dict) else {},
                str(target), seq, str(reason or ""),
            )
        )  # fmt: skip
    return found
