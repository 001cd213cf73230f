"""Errors raised by the recorder package::

HandrailError
└── LedgerError                 the ledger cannot be opened, read or appended to
    └── LedgerTamperedError     the hash chain does not verify
"""

from __future__ import annotations

from handrail._errors import HandrailError


class LedgerError(HandrailError):
    """The action ledger cannot be opened, read or appended to."""

    reason = "LEDGER_ERROR"


class LedgerTamperedError(LedgerError):
    """The ledger's hash chain does not verify: an entry was edited, deleted or reordered.

    Attributes:
        seq: the first entry that does not verify, if known.
    """

    reason = "LEDGER_TAMPERED"

    def __init__(self, message: str, *, seq: int | None = None, reason: str | None = None) -> None:
        super().__init__(message, reason=reason)
        self.seq = seq
