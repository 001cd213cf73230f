"""The append-only, hash-chained action ledger.

Every entry carries ``entry_hash = sha256(prev_hash || canonical_json(entry))`` where the
hashed entry is every column except the two hashes, and the first entry's ``prev_hash`` is
64 zeros (see ``_chain``). The store refuses UPDATE and DELETE; :meth:`Ledger.verify`
recomputes the chain so that edits made around it are still found.

Two records of the head (last seq and hash) catch a truncated tail:

- the store's own (the ``meta`` table of a SQLite ledger), updated in the same
  transaction as each append, so appends chain onto the recorded head rather than onto
  whatever row happens to be last;
- the head file ``<db>.head``, outside the database, rewritten atomically at most every
  ``head_interval_s`` (or every ``head_every`` entries) and on close. It still holds when
  the whole database file is replaced by an older copy. It cannot see the entries appended
  after its last write: at most ``head_interval_s`` worth (default 100 ms), or everything
  since the last write when the process died before its next one.

Appends from several threads are *group-committed* (see ``_group_commit``): every caller
returns only once the transaction that holds its entry has committed.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from handrail._vocabulary import Outcome

from ._bodies import (
    ActionParams,
    Body,
    IntentBody,
    LeaseChangeBody,
    LeaseDetail,
    ReconcileBody,
    ResultBody,
    ResultExtra,
    SessionCloseBody,
    SessionOpenBody,
)
from ._entry import VERDICTS, Entry, NewEntry, PrincipalKind, prepare
from ._errors import LedgerError, LedgerTamperedError
from ._group_commit import GroupCommit
from ._headfile import HeadWriter, head_file_path
from ._recovery import RecoveredAction, UnresolvedAction, recovered_result
from ._sqlite import SqliteLedgerStore
from ._store import BulkRow, EntryQuery, LedgerStore
from ._verify import VerifyReport, verify

__all__ = ["Ledger"]


class Ledger:
    """An append-only, hash-chained action ledger, by default in one SQLite file.

    Safe to share between threads; concurrent appends are group-committed. Several
    processes may append to the same SQLite file.

    Args:
        path: the SQLite file; created (with its parent folder) when missing. The head
            file is ``<path>.head``.
        busy_timeout_s: how long to wait for another process's write lock.
        head_interval_s: the longest time the head file lags behind an append.
        head_every: write the head file at once when this many entries are waiting.
        store: where the entries live instead of the SQLite file at ``path`` (which then
            only names the head file; None: no head file, e.g. reading a PostgreSQL ledger
            from another host).
        read_only: only read, never write (the file, its WAL or the head file): for
            auditing a copy, even in a read-only directory. Appends raise ``LedgerError``.
    """

    def __init__(
        self,
        path: str | Path | None,
        *,
        busy_timeout_s: float = 10.0,
        head_interval_s: float = 0.1,
        head_every: int = 1000,
        store: LedgerStore | None = None,
        read_only: bool = False,
    ) -> None:
        if path is None and store is None:
            raise LedgerError("a ledger needs a file or a store", reason="INVALID_ARGUMENT")
        self._path = Path(path) if path is not None else None
        self._closing = threading.Lock()
        self._closed = False
        self._store: LedgerStore = store or SqliteLedgerStore(
            Path(str(path)), busy_timeout_s=busy_timeout_s, read_only=read_only
        )
        self._head = HeadWriter(
            head_file_path(self._path) if self._path else None, head_interval_s, head_every, writable=not read_only
        )
        self._writer = GroupCommit(self._store.append, self._committed)
        try:
            self._head.check(self._store)
        except LedgerError:
            self._store.close()
            raise

    # -- lifecycle -----------------------------------------------------------------

    @property
    def path(self) -> Path:
        """The SQLite file (or the name the head file of another store is made from)."""
        if self._path is None:
            raise LedgerError(f"ledger {self.location} has no file", reason="INVALID_ARGUMENT")
        return self._path

    @property
    def location(self) -> str:
        """Where the entries are (a file, or a database and an executor's chain)."""
        return self._store.location

    @property
    def head_path(self) -> Path | None:
        """The head file, ``<path>.head`` (None: there is none)."""
        return self._head.path

    @property
    def _commits(self) -> int:
        # Transactions that appended entries; the benchmark reports it.
        return self._writer.commits

    def close(self) -> None:
        """Write the head file and close the store. Appends already returned are durable."""
        with self._closing:
            if self._closed:
                return
            self._closed = True
        self._store.close()
        self._head.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _committed(self, last: Entry) -> None:
        self._head.advance(last.seq, last.entry_hash)

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
        body: Mapping[str, Any] | Body | None = None,
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
            body: the typed body of ``kind`` (``SessionOpenBody(...)``, ``RefusalBody(...)``
                ...), or JSON-serializable details stored as given.

        Returns:
            The stored entry, with its seq and hashes.

        Raises:
            LedgerError: bad arguments, an unserializable body, a body of another kind,
                or a storage failure.
        """
        new = NewEntry(kind, session_id, action_id, idempotency_key, principal, principal_kind, epoch, body)
        (entry,) = self.append_many([new])
        return entry

    def append_many(self, entries: Iterable[NewEntry]) -> list[Entry]:
        """Append several entries in one transaction: all or none, with consecutive seqs.

        Durable when this returns, like :meth:`append`. Concurrent callers share
        transactions (group commit), so the entries may sit next to other threads'.

        Raises:
            LedgerError: any bad entry (then nothing is written), or a storage failure.
        """
        prepared = [prepare(new) for new in entries]
        if not prepared:
            return []
        return self._writer.commit(prepared)

    def intent(
        self,
        session_id: str,
        action_id: str,
        idempotency_key: str,
        principal: str,
        epoch: int,
        params: Mapping[str, Any] | ActionParams,
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
            IntentBody.KIND,
            session_id=session_id,
            action_id=action_id,
            idempotency_key=idempotency_key,
            principal=principal,
            principal_kind=principal_kind,
            epoch=epoch,
            body=IntentBody(params) if isinstance(params, ActionParams) else IntentBody.body_of(params),
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
        extra: Mapping[str, Any] | ResultExtra | None = None,
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
            outcome: an :class:`~handrail.Outcome` (``DONE``, ``FAILED``, ``UNKNOWN`` ...).
            reason: a machine-readable reason code.
            evidence: an :class:`~handrail.Evidence`: what proves the outcome.
            execution_started: whether anything may have reached the target.
            message: a human-readable explanation.
            extra: more details, stored as ``body["extra"]``.
            principal_kind: who ``principal`` is.
        """
        if isinstance(extra, ResultExtra):
            body = ResultBody(outcome, reason, evidence, execution_started, message, extra).to_body()
        else:
            body = ResultBody.body_of(outcome, reason, evidence, execution_started, message, extra)
        return self.append(
            ResultBody.KIND,
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
        verdict: str,
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
            verdict: a :class:`~handrail.Verdict`: ``"HAPPENED"`` or ``"DID_NOT_HAPPEN"``.
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
                f"verdict must be {' or '.join(VERDICTS)}, got {verdict!r}",
                reason="INVALID_ARGUMENT",
            )
        found = self._store.select(
            EntryQuery(session_id=session_id, action_id=action_id, kind=IntentBody.KIND, newest_first=True, limit=1)
        )
        if not found:
            raise LedgerError(
                f"no intent for action {action_id!r} in session {session_id!r}",
                reason="NOT_FOUND",
            )
        intent = found[0]
        return self.append(
            ReconcileBody.KIND,
            session_id=session_id,
            action_id=action_id,
            idempotency_key=intent.idempotency_key,
            principal=principal,
            principal_kind=principal_kind,
            epoch=intent.epoch,
            body=ReconcileBody(verdict, evidence, observation_id, message, Outcome.RECONCILED),
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
        detail: Mapping[str, Any] | LeaseDetail | None = None,
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
        if not isinstance(detail, LeaseDetail):
            detail = LeaseDetail.from_dict(detail or {})
        return self.append(
            LeaseChangeBody.KIND,
            session_id=session_id,
            principal=principal,
            principal_kind=principal_kind,
            epoch=epoch,
            body=LeaseChangeBody(target, event, detail),
        )

    def _bulk_load(self, rows: Iterable[BulkRow]) -> int:
        """Append many pre-serialized rows in one transaction, chained as usual.

        For benchmarks and tests that need a large ledger fast: each row is ``(ts_ms,
        kind, session_id, action_id, idempotency_key, principal, principal_kind, epoch,
        body_json)`` with ``body_json`` already canonical and redacted. No validation.
        Returns the new head seq.
        """
        seq, digest = self._store.bulk_load(rows)
        self._head.advance(seq, digest)
        return seq

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
        done = self._store.recover(lambda action: prepare(recovered_result(action)))
        if done.head is not None:
            self._writer.commits += 1
            self._head.advance(*done.head)
        return done.marked

    def unresolved(self) -> list[UnresolvedAction]:
        """Return actions whose latest word is ``UNKNOWN`` and that no reconcile followed.

        The executor refuses new writes to their sessions and targets until each is
        reconciled (:meth:`reconcile`). Intents still without any result are not listed:
        they are in flight, or waiting for :meth:`recover`.
        """
        return self._store.unresolved()

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
        return self._store.select(
            EntryQuery(
                session_id=session_id,
                action_id=action_id,
                kind=kind,
                principal=principal,
                outcome=outcome,
                since_ms=since_ms,
                since_seq=since_seq,
                limit=limit,
            )
        )

    def session_entries(self, session_id: str) -> list[Entry]:
        """One session's timeline: its own entries, and every lease change of its target
        while it was open, in seq order.

        A lease change is written once per target (under no session); each session's
        timeline of that target reads it here, so a takeover that refused a session's
        action shows in that session's timeline whichever session was open first.
        """
        own = self.entries(session_id=session_id)
        opened = next((e for e in own if e.kind == SessionOpenBody.KIND), None)
        if opened is None:
            return own
        target = opened.body_as(SessionOpenBody).target
        closed = next((e.seq for e in own if e.kind == SessionCloseBody.KIND), None)
        seen = {e.seq for e in own}
        changes = [
            e
            for e in self.entries(kind=LeaseChangeBody.KIND, since_seq=opened.seq)
            if e.seq not in seen and (closed is None or e.seq < closed) and e.body_as(LeaseChangeBody).target == target
        ]
        return sorted(own + changes, key=lambda e: e.seq)

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
        query = EntryQuery(
            session_id=session_id,
            action_id=action_id,
            kind=kind,
            principal=principal,
            outcome=outcome,
            since_ms=since_ms,
            limit=n,
            newest_first=True,
        )
        return list(reversed(self._store.select(query)))

    def find_result_by_key(self, session_id: str, idempotency_key: str) -> Entry | None:
        """Return the latest ``result`` recorded for an idempotency key, or ``None``."""
        return self._find_by_key(session_id, idempotency_key, ResultBody.KIND)

    def find_intent_by_key(self, session_id: str, idempotency_key: str) -> Entry | None:
        """Return the latest ``intent`` recorded for an idempotency key, or ``None``."""
        return self._find_by_key(session_id, idempotency_key, IntentBody.KIND)

    def find_reconcile_by_key(self, session_id: str, idempotency_key: str) -> Entry | None:
        """Return the latest ``reconcile`` recorded for an idempotency key, or ``None``."""
        return self._find_by_key(session_id, idempotency_key, ReconcileBody.KIND)

    def head(self) -> tuple[int, str]:
        """Return ``(seq, hash)`` of the last entry; ``(0, GENESIS_HASH)`` when empty."""
        return self._store.head()

    def count(self) -> int:
        """Return how many entries are stored."""
        return self._store.count()

    def _find_by_key(self, session_id: str, idempotency_key: str, kind: str) -> Entry | None:
        query = EntryQuery(
            session_id=session_id, idempotency_key=idempotency_key, kind=kind, newest_first=True, limit=1
        )
        found = self._store.select(query)
        return found[0] if found else None

    # -- verifying -----------------------------------------------------------------

    def verify(self, *, batch_size: int = 10_000) -> VerifyReport:
        """Recompute the whole hash chain and check it against both recorded heads.

        Reads a snapshot of the store (for SQLite, through a connection of its own), so
        appends are not held up. Finds an edited entry (hash mismatch), a deleted entry
        (gap in seq, broken ``prev_hash`` link), reordered entries, and a truncated tail:
        entries missing after the store's head, or after the head file's (see the module
        docs for the window the head file cannot see).

        Args:
            batch_size: rows fetched per round trip.
        """
        return verify(lambda: self._store.snapshot(batch_size), self._head.path)

    def check(self) -> VerifyReport:
        """Verify the chain and raise when it does not hold.

        Raises:
            LedgerTamperedError: naming the first entry that does not verify.
        """
        report = self.verify()
        if not report.ok:
            raise LedgerTamperedError(f"ledger {self.location}: {report.message}", seq=report.first_bad_seq)
        return report
