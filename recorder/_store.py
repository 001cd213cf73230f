"""The storage seam of the ledger: one hash chain, appended to in transactions.

:class:`~handrail.recorder.Ledger` does everything that does not depend on where the
entries live (validation and redaction, group commit, typed writers, the head file,
verification of the chain) and asks a :class:`LedgerStore` for the rest. The SQLite store
(``_sqlite``) is the one there is; a PostgreSQL store would keep one chain per executor
in the same entry format.

A store maps its own database errors to :class:`~handrail.recorder.LedgerError`: nothing
above it sees ``sqlite3`` (or ``psycopg``) errors.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import NamedTuple, Protocol

from ._entry import Entry, PreparedEntry
from ._recovery import RecoveredAction, UnresolvedAction

__all__ = ["BulkRow", "ChainSnapshot", "EntryQuery", "LedgerStore", "RecoveryWrite", "StoredRow"]

StoredRow = tuple[int, int, str, str, str, str, str, str, int, str, str, str]
"""An entry's stored columns: seq, ts_ms, kind, session_id, action_id, idempotency_key,
principal, principal_kind, epoch, body (canonical JSON), prev_hash, entry_hash."""

BulkRow = tuple[int, str, str, str, str, str, str, int, str]
"""A pre-serialized entry for :meth:`LedgerStore.bulk_load`: ts_ms, kind, session_id,
action_id, idempotency_key, principal, principal_kind, epoch, body (canonical, redacted)."""


class EntryQuery(NamedTuple):
    """Which entries to read, in seq order (``None``: any).

    Attributes:
        outcome: entries stating this outcome (``body.outcome``, any case); a
            ``refusal`` entry counts as ``REFUSED``.
        since_seq: entries with ``seq > since_seq``.
        since_ms: entries appended at or after this time (ms since the epoch).
        limit: at most this many.
        newest_first: from the last entry backwards (for a tail, or the latest match).
    """

    session_id: str | None = None
    action_id: str | None = None
    kind: str | None = None
    principal: str | None = None
    idempotency_key: str | None = None
    outcome: str | None = None
    since_ms: int | None = None
    since_seq: int = 0
    limit: int | None = None
    newest_first: bool = False


@dataclass(frozen=True)
class ChainSnapshot:
    """One consistent view of a chain, for verification.

    Attributes:
        head: ``(seq, hash)`` the store records as its head.
        rows: the stored rows in seq order, a batch at a time.
    """

    head: tuple[int, str]
    rows: Iterable[Sequence[StoredRow]]


@dataclass(frozen=True)
class RecoveryWrite:
    """What :meth:`LedgerStore.recover` did.

    Attributes:
        marked: the actions it gave an ``UNKNOWN`` result, with that result's seq.
        head: ``(seq, hash)`` of the last entry it wrote, or None when it wrote none.
    """

    marked: list[RecoveredAction]
    head: tuple[int, str] | None


class LedgerStore(Protocol):
    """Where a ledger's entries live. Safe to call from several threads.

    Every append chains its entries onto the *recorded* head (not onto whatever row
    happens to be last) and records the new head in the same transaction.
    """

    @property
    def location(self) -> str:
        """Where the entries are, for messages (a file path, a database and chain name)."""
        ...

    def append(self, entries: Sequence[PreparedEntry]) -> list[Entry]:
        """Chain and write ``entries`` in one transaction: all or none, consecutive seqs."""
        ...

    def bulk_load(self, rows: Iterable[BulkRow]) -> tuple[int, str]:
        """Chain and write pre-serialized rows in one transaction; return the new head."""
        ...

    def recover(self, result_for: Callable[[RecoveredAction], PreparedEntry]) -> RecoveryWrite:
        """In one transaction, find every intent with neither a result nor a reconcile
        (oldest first) and append ``result_for(action)`` for each."""
        ...

    def unresolved(self) -> list[UnresolvedAction]:
        """Every action whose latest result is ``UNKNOWN`` with no reconcile after it."""
        ...

    def select(self, query: EntryQuery) -> list[Entry]:
        """The entries ``query`` names, in seq order (or newest first)."""
        ...

    def head(self) -> tuple[int, str]:
        """``(seq, hash)`` of the recorded head; ``(0, GENESIS_HASH)`` when empty."""
        ...

    def hash_at(self, seq: int) -> str | None:
        """The stored hash of entry ``seq``, or None when there is none."""
        ...

    def count(self) -> int:
        """How many entries are stored."""
        ...

    def snapshot(self, batch_size: int) -> AbstractContextManager[ChainSnapshot]:
        """A consistent view of the whole chain that does not hold up appends."""
        ...

    def close(self) -> None:
        """Release the store; later calls raise :class:`LedgerError`."""
        ...
