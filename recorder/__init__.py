"""The recorder: the append-only, hash-chained action ledger.

Example::

    from handrail.recorder import Ledger

    with Ledger("handrail-data/ledger.sqlite") as ledger:
        ledger.intent("s1", "a1", "k1", "demo-agent", 3, {"action": "click", "ref": "e12"})
        assert ledger.verify().ok
"""

from __future__ import annotations

from ._errors import LedgerError, LedgerTamperedError
from ._ledger import (
    GENESIS_HASH,
    KINDS,
    REDACTED,
    Entry,
    Ledger,
    PrincipalKind,
    VerifyReport,
    canonical_json,
    entry_hash,
    redact,
    timeline,
)

__all__ = [
    "GENESIS_HASH",
    "KINDS",
    "REDACTED",
    "Entry",
    "Ledger",
    "LedgerError",
    "LedgerTamperedError",
    "PrincipalKind",
    "VerifyReport",
    "canonical_json",
    "entry_hash",
    "redact",
    "timeline",
]
