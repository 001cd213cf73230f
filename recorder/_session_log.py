"""One session as the ledger holds it: what recording a session into a scenario starts from.

The ledger holds what a replay needs: the session's target and start URL
(``session_open``), every intent (kind, element role and name, parameters) with its
result, every refusal with its reason, reconciliations and lease changes. Turning that
into a scenario file is the scenario harness's business (``handrail.scenarios``); the
recorder offers the session's entries, typed.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from ._bodies import EntryBody, SessionOpenBody
from ._entry import Entry
from ._errors import LedgerError
from ._ledger import Ledger

__all__ = ["SessionLog", "read_session"]


@dataclass(frozen=True)
class SessionLog:
    """One session's entries in ledger order, and what its ``session_open`` says.

    Attributes:
        session_id: the session.
        principal: the agent that opened it.
        opened: its ``session_open`` body (target, backend, start URL).
        entries: every entry of the session and the lease changes of its target while it
            was open, oldest first.
    """

    session_id: str
    principal: str
    opened: SessionOpenBody
    entries: tuple[Entry, ...]

    def __iter__(self) -> Iterator[tuple[Entry, EntryBody]]:
        """Each entry with its typed body, oldest first."""
        return ((entry, entry.content) for entry in self.entries)


def read_session(ledger: Ledger, session_id: str) -> SessionLog:
    """Read session ``session_id`` from ``ledger``.

    Raises:
        LedgerError: the ledger has no entry of that session, or none that opens it
            (``NOT_FOUND``).
    """
    entries = tuple(ledger.session_entries(session_id))
    if not entries:
        raise LedgerError(f"no entries for session {session_id!r} in {ledger.location}", reason="NOT_FOUND")
    opened = next((e for e in entries if e.kind == SessionOpenBody.KIND), None)
    if opened is None:
        raise LedgerError("the session has no session_open entry (target and start URL)", reason="NOT_FOUND")
    return SessionLog(session_id, opened.principal, opened.body_as(SessionOpenBody), entries)
