"""The recorder: the append-only, hash-chained action ledger and its crash recovery.

Each entry kind has a typed body (:class:`IntentBody`, :class:`ResultBody` ...): the
ledger's writers build them and readers get them back from :attr:`Entry.content`.

Example::

    from handrail.recorder import Ledger, ResultBody

    with Ledger("handrail-data/ledger.sqlite") as ledger:
        ledger.recover()  # on start: intents left without a result become UNKNOWN
        ledger.intent("s1", "a1", "k1", "demo-agent", 3, {"kind": "click", "ref": "e12"})
        ledger.result("s1", "a1", "k1", "demo-agent", 3, "DONE", "ALLOW", "OBSERVED", True)
        result = ledger.find_result_by_key("s1", "k1")
        assert result is not None and result.body_as(ResultBody).outcome == "DONE"
        assert ledger.verify().ok

An event loop awaits the ledger through :class:`AsyncLedger`, which runs every call on one
thread of its own, in order (the executor does; the CLI uses :class:`Ledger` directly).
The storage is behind :class:`LedgerStore`; :class:`SqliteLedgerStore` is the default,
:class:`PgLedgerStore` keeps one chain per executor in PostgreSQL (:func:`open_ledger`
opens either by its location).
Recording a session into a scenario file starts from :func:`read_session`; the scenario
side of it is ``handrail.scenarios``.
"""

from __future__ import annotations

import typing

from handrail import _lazy

from ._async_ledger import AsyncLedger
from ._bodies import (
    KINDS,
    ActionParams,
    Body,
    DecisionBody,
    EntryBody,
    IntentBody,
    LeaseChangeBody,
    LeaseDetail,
    NavigationBody,
    OtherBody,
    ReconcileBody,
    RefusalBody,
    RequestBody,
    ResultBody,
    ResultExtra,
    SessionCloseBody,
    SessionOpenBody,
    parse_body,
)
from ._chain import GENESIS_HASH, canonical_json, entry_hash
from ._entry import LEASE_EVENTS, REDACTED, VERDICTS, Entry, NewEntry, PrincipalKind, redact
from ._errors import LedgerError, LedgerTamperedError
from ._ledger import Ledger
from ._open import open_ledger
from ._recovery import RecoveredAction, UnresolvedAction
from ._session_log import SessionLog, read_session
from ._sqlite import SqliteLedgerStore
from ._store import ChainSnapshot, EntryQuery, LedgerStore
from ._timeline import timeline
from ._verify import VerifyReport

if typing.TYPE_CHECKING:
    from ._postgres import PgLedgerStore, ledger_executors


# Imported on first use: psycopg takes a tenth of a second to load, which an executor on a
# SQLite ledger need not pay.
__getattr__ = _lazy.lazy_exports(
    __name__,
    {"PgLedgerStore": "handrail.recorder._postgres", "ledger_executors": "handrail.recorder._postgres"},
)


__all__ = [
    "GENESIS_HASH",
    "KINDS",
    "LEASE_EVENTS",
    "REDACTED",
    "VERDICTS",
    "ActionParams",
    "AsyncLedger",
    "Body",
    "ChainSnapshot",
    "DecisionBody",
    "Entry",
    "EntryBody",
    "EntryQuery",
    "IntentBody",
    "LeaseChangeBody",
    "LeaseDetail",
    "Ledger",
    "LedgerError",
    "LedgerStore",
    "LedgerTamperedError",
    "NavigationBody",
    "NewEntry",
    "OtherBody",
    "PgLedgerStore",
    "PrincipalKind",
    "ReconcileBody",
    "RecoveredAction",
    "RefusalBody",
    "RequestBody",
    "ResultBody",
    "ResultExtra",
    "SessionCloseBody",
    "SessionLog",
    "SessionOpenBody",
    "SqliteLedgerStore",
    "UnresolvedAction",
    "VerifyReport",
    "canonical_json",
    "entry_hash",
    "ledger_executors",
    "open_ledger",
    "parse_body",
    "read_session",
    "redact",
    "timeline",
]
