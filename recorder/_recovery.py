"""Crash recovery: what it finds and what it writes.

An intent without a result means the process stopped between the intent and its result,
so the action may have happened: :meth:`Ledger.recover` gives each such intent an
``UNKNOWN`` result (:func:`recovered_result`), never a retry. :meth:`Ledger.unresolved`
lists the actions whose latest word is ``UNKNOWN`` and that no reconcile has followed.

The scans themselves are the store's (one SQL query each over a covering index for
SQLite); this module holds what they return. An action is identified by
``(session_id, action_id)``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from handrail._vocabulary import Evidence, Outcome

from ._bodies import IntentBody, ResultBody, ResultExtra
from ._entry import NewEntry, PrincipalKind

__all__ = [
    "RECOVERED",
    "RECOVERED_MESSAGE",
    "RecoveredAction",
    "UnresolvedAction",
    "intent_params",
    "recovered_result",
]

RECOVERED = "RECOVERED"
"""The reason of the ``UNKNOWN`` result that :meth:`Ledger.recover` writes."""

RECOVERED_MESSAGE = (
    "the executor stopped after recording the intent and before recording a result; "
    "the action may have happened: reconcile it by observing the real state"
)


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


def intent_params(body: Mapping[str, Any] | None) -> dict[str, Any]:
    """The parameters of an intent body as stored (``{}`` for none)."""
    return IntentBody.params_of(body)


def recovered_result(action: RecoveredAction) -> NewEntry:
    """The ``UNKNOWN`` result :meth:`Ledger.recover` writes for an interrupted action."""
    return NewEntry(
        ResultBody.KIND,
        session_id=action.session_id,
        action_id=action.action_id,
        idempotency_key=action.idempotency_key,
        principal=action.principal,
        principal_kind=action.principal_kind,
        epoch=action.epoch,
        body=ResultBody(
            outcome=Outcome.UNKNOWN,
            reason=RECOVERED,
            evidence=Evidence.NONE,
            execution_started=True,
            message=RECOVERED_MESSAGE,
            extra=ResultExtra(intent_seq=action.intent_seq, recorded_by="recovery"),
        ),
    )
