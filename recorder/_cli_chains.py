"""The chains a ``handrail ledger`` command reads, opened one at a time."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from ._errors import LedgerError
from ._ledger import Ledger
from ._verify import VerifyReport, verify_absent

__all__ = ["Chains"]


class Chains:
    """The chains a command reads (``""``: a file's one chain; else executor ids), opened
    one at a time: an open chain of a PostgreSQL ledger holds connections of its own.
    ``head_of`` names a chain's head file; ``missing`` says what a chain the store lacks means;
    ``relist``, when given, lists the store's chains again (``tail -f`` of a whole database).
    """

    def __init__(
        self,
        names: list[str],
        open_one: Callable[[str], Ledger],
        head_of: Callable[[str], Path | None],
        missing: str,
        relist: Callable[[], list[str]] | None = None,
    ) -> None:
        self.names = names
        self._relist = relist
        self._open_one = open_one
        self._head_of = head_of
        self._missing = missing
        self._kept: dict[str, Ledger] = {}

    @contextmanager
    def opened(self, exe: str) -> Iterator[Ledger]:
        """The chain ``exe``, open for the block (or for as long as :meth:`kept` holds it)."""
        if exe in self._kept:
            yield self._kept[exe]
            return
        ledger = self._open_one(exe)
        try:
            yield ledger
        finally:
            ledger.close()

    @contextmanager
    def kept(self) -> Iterator[None]:
        """Keep a lone chain open for the block (``tail -f`` polls it): never more than one."""
        if len(self.names) != 1:
            yield
            return
        with self.opened(self.names[0]) as ledger:
            self._kept[self.names[0]] = ledger
            try:
                yield
            finally:
                self._kept.clear()

    def verify(self, exe: str) -> VerifyReport:
        """Verify one chain; one the store does not have, against its head file.

        Raises:
            LedgerError: the chain cannot be read, or is not there and has no head file.
        """
        try:
            with self.opened(exe) as ledger:
                return ledger.verify()
        except LedgerError as exc:
            if exc.reason != "NOT_FOUND":
                raise
            report = verify_absent(self._head_of(exe), self._missing)
            if report is None:
                raise
            return report

    def relisted(self) -> list[str]:
        """The chains begun since the list was read (added to :attr:`names`); none when the
        command named its chain, or the store cannot be listed just now (the next poll tries)."""
        if self._relist is None:
            return []
        try:
            now = self._relist()
        except LedgerError:
            return []
        new = [exe for exe in now if exe not in self.names]
        self.names = sorted({*self.names, *new})
        return new
