"""Group commit: concurrent appends share transactions, each returns once it is durable.

The first caller to find no commit in progress writes every entry queued so far in one
transaction (one fsync under ``synchronous=FULL``); the others wait. Every caller returns
only once the transaction that holds its entries has committed.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable, Sequence

from ._entry import Entry, PreparedEntry
from ._errors import LedgerError

__all__ = ["GroupCommit"]


class _Waiter:
    """One caller's entries in the queue."""

    __slots__ = ("entries", "error", "stored")

    def __init__(self, entries: Sequence[PreparedEntry]) -> None:
        self.entries = entries
        self.stored: list[Entry] | None = None
        self.error: BaseException | None = None


class GroupCommit:
    """Folds concurrent appends into shared transactions.

    Args:
        write: writes entries in one transaction, all or none, and returns them stored
            (a store's ``append``); raises :class:`LedgerError` when nothing was written.
        on_commit: called with the last entry of each transaction, once it committed.
    """

    def __init__(
        self,
        write: Callable[[Sequence[PreparedEntry]], list[Entry]],
        on_commit: Callable[[Entry], None],
    ) -> None:
        self._write = write
        self._on_commit = on_commit
        self._cv = threading.Condition()  # guards the queue
        self._queue: list[_Waiter] = []
        self._leading = False
        self.commits = 0
        """Transactions that appended entries (one holds many under load)."""

    def commit(self, entries: Sequence[PreparedEntry]) -> list[Entry]:
        """Queue ``entries``; lead a group commit or wait for the leader that took them."""
        mine = _Waiter(entries)
        with self._cv:
            self._queue.append(mine)
            while mine.stored is None and mine.error is None and self._leading:
                self._cv.wait()
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
                with self._cv:
                    self._leading = False
                    self._cv.notify_all()
        if mine.error is not None:
            raise mine.error
        assert mine.stored is not None
        return mine.stored

    def _write_batch(self, batch: list[_Waiter]) -> None:
        entries = [entry for waiter in batch for entry in waiter.entries]
        try:
            stored = self._write(entries)
        except LedgerError as exc:  # nothing in the batch was written
            for waiter in batch:  # each its own exception (no shared traceback), of the same kind
                waiter.error = copy.copy(exc)
            return
        except BaseException as exc:  # nobody may wait forever for a batch that died
            for waiter in batch:
                waiter.error = LedgerError(f"the commit holding this entry failed: {exc!r}")
            raise
        self.commits += 1
        at = 0
        for waiter in batch:
            waiter.stored = stored[at : at + len(waiter.entries)]
            at += len(waiter.entries)
        self._on_commit(stored[-1])
