"""The recorder: the append-only, hash-chained action ledger and its crash recovery.

Example::

    from handrail.recorder import Ledger

    with Ledger("handrail-data/ledger.sqlite") as ledger:
        ledger.recover()  # on start: intents left without a result become UNKNOWN
        ledger.intent("s1", "a1", "k1", "demo-agent", 3, {"action": "click", "ref": "e12"})
        assert ledger.verify().ok
"""

from __future__ import annotations

from ._errors import LedgerError, LedgerTamperedError
from ._ledger import (
    GENESIS_HASH,
    KINDS,
    LEASE_EVENTS,
    REDACTED,
    VERDICTS,
    Entry,
    Ledger,
    NewEntry,
    PrincipalKind,
    canonical_json,
    entry_hash,
    redact,
)
from ._recovery import RecoveredAction, UnresolvedAction, VerifyReport
from ._timeline import timeline

__all__ = [
    "GENESIS_HASH",
    "KINDS",
    "LEASE_EVENTS",
    "REDACTED",
    "VERDICTS",
    "Entry",
    "Ledger",
    "LedgerError",
    "LedgerTamperedError",
    "NewEntry",
    "PrincipalKind",
    "RecoveredAction",
    "UnresolvedAction",
    "VerifyReport",
    "canonical_json",
    "entry_hash",
    "redact",
    "timeline",
]
