"""Outcomes and idempotency: what became of every action, and what that means for the next.

Every record of an action goes through ``Outcomes``: a refusal (logged, but it does not
use up the idempotency key), the intent (durable before dispatch), the result, and the
reconcile of an action whose outcome was unknown. It is also the one reader of those
records back: an idempotency key seen before replays its recorded outcome (or is a
conflict, with other parameters), and an action left ``UNKNOWN`` — by a dispatch that may
have begun, or by a crash between intent and result — blocks every further write on its
target until a reconcile says what the real state shows. Nothing ``UNKNOWN`` is ever
dispatched again.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from handrail._vocabulary import Evidence, Outcome, Reason, Verdict
from handrail.authz import Decision
from handrail.executor._errors import InvalidArgumentError, NotFoundError
from handrail.executor._models import ActionResult, ActionSpec, ActResponse
from handrail.executor._session import Session
from handrail.executor._snapshot import RefInfo
from handrail.recorder import IntentBody, Ledger, ReconcileBody, RefusalBody, ResultBody

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class UnknownAction:
    """An action that may have happened: it blocks its target until reconciled."""

    action_id: str
    session_id: str
    agent: str
    idempotency_key: str


class Outcomes:
    """The ledger's side of the loop: records of actions, replays, and UNKNOWN blocking.

    Args:
        ledger: the action ledger (intent before dispatch, result after).
    """

    def __init__(self, ledger: Ledger) -> None:
        self._ledger = ledger
        # target -> action id -> the UNKNOWN action blocking it
        self._unknown: dict[str, dict[str, UnknownAction]] = {}
        #: The ``seq`` of the latest result entry :meth:`finish` wrote.
        self.last_result_seq = 0

    def recover(self) -> None:
        """On start: intents without results become UNKNOWN, never retried, and block."""
        for rec in self._ledger.recover():
            log.warning("action %s of %s had no result: now UNKNOWN", rec.action_id, rec.session_id)
        for open_ in self._ledger.unresolved():
            self._block(
                open_.target,
                UnknownAction(open_.action_id, open_.session_id, open_.principal, open_.idempotency_key),
            )

    # -- UNKNOWN blocking ---------------------------------------------------------------------

    def _block(self, target: str, action: UnknownAction) -> None:
        self._unknown.setdefault(target, {})[action.action_id] = action

    def block(self, target: str, action: UnknownAction) -> None:
        """Block ``target`` on an action of unknown outcome (a person's input, ``_console``)."""
        self._block(target, action)

    def unknown_actions(self, target: str) -> list[UnknownAction]:
        """The actions whose outcome is unknown on ``target``, blocking its writes."""
        return list(self._unknown.get(target, {}).values())

    def blocked(self, target: str) -> str | None:
        """Why a write to ``target`` must wait for a reconcile, or None if nothing blocks it."""
        blocking = self._unknown.get(target)
        if not blocking:
            return None
        ids = ", ".join(sorted(blocking))
        return f"the outcome of {ids} on {target} is unknown; observe the real state and reconcile it first"

    def reconcile(self, session: Session, action_id: str, verdict: Verdict, evidence: str) -> ActionResult:
        """Record what the real state shows of an UNKNOWN action on the session's target."""
        blocking = self._unknown.get(session.target, {})
        unknown = blocking.get(action_id)
        if unknown is None:
            if self._ledger.entries(action_id=action_id):
                raise InvalidArgumentError(
                    "action_id",
                    f"action {action_id} is not awaiting reconciliation on {session.target}",
                )
            raise NotFoundError("action_id", f"no action {action_id!r}")
        if unknown.agent != session.agent:
            raise InvalidArgumentError("action_id", f"action {action_id} belongs to {unknown.agent}")
        self._ledger.reconcile(unknown.session_id, action_id, session.agent, verdict.value, evidence)
        del blocking[action_id]
        if not blocking:
            self._unknown.pop(session.target, None)
        return ActionResult(
            action_id=action_id,
            outcome=Outcome.RECONCILED,
            reason=Reason.ALLOW,
            message=f"reconciled as {verdict.value}: {evidence}",
            execution_started=True,
            evidence=Evidence.RECONCILED,
            idempotency_key=unknown.idempotency_key,
        )

    # -- idempotency --------------------------------------------------------------------------

    def replay(self, session: Session, spec: ActionSpec, fingerprint: str) -> ActionResult | None:
        """The recorded outcome of an earlier action with this idempotency key, if any.

        The same key with the same parameters (``fingerprint``) gets that outcome and
        nothing is dispatched; with other parameters it is an IDEMPOTENCY_CONFLICT.
        """
        key = spec.idempotency_key
        intent = self._ledger.find_intent_by_key(session.session_id, key)
        if intent is None:
            return None
        if intent.body_as(IntentBody).params.fingerprint != fingerprint:
            return ActionResult(
                action_id=intent.action_id,
                outcome=Outcome.REFUSED,
                reason=Reason.IDEMPOTENCY_CONFLICT,
                message=f"idempotency key {key!r} was used by action {intent.action_id} with other parameters",
                execution_started=False,
                evidence=Evidence.NONE,
                idempotency_key=key,
            )
        reconciled = self._ledger.entries(action_id=intent.action_id, kind="reconcile")
        if reconciled:
            verdict = reconciled[-1].body_as(ReconcileBody)
            return ActionResult(
                action_id=intent.action_id,
                outcome=Outcome.RECONCILED,
                reason=Reason.ALLOW,
                message=f"reconciled earlier as {verdict.verdict}: {verdict.evidence}; nothing dispatched",
                execution_started=True,
                evidence=Evidence.RECONCILED,
                idempotency_key=key,
            )
        result = self._ledger.find_result_by_key(session.session_id, key)
        if result is None:  # an intent that never got a result: in flight or crashed
            return ActionResult(
                action_id=intent.action_id,
                outcome=Outcome.UNKNOWN,
                reason=Reason.ALLOW,
                message="this key's action has no recorded result; its outcome is unknown",
                execution_started=True,
                evidence=Evidence.NONE,
                idempotency_key=key,
            )
        recorded = result.body_as(ResultBody)
        return ActionResult(
            action_id=result.action_id,
            outcome=Outcome(recorded.outcome),
            reason=recorded.reason,
            message="recorded outcome of an earlier action with this key; nothing dispatched",
            execution_started=recorded.execution_started,
            evidence=Evidence(recorded.evidence or Evidence.NONE.value),
            idempotency_key=key,
            decision_id=recorded.extra.decision_id or "",
        )

    # -- records --------------------------------------------------------------------------------

    def amend_unknown(
        self,
        session: Session,
        action_id: str,
        idempotency_key: str,
        epoch: int,
        amends: int,
        message: str,
        decision_id: str = "",
    ) -> int:
        """Make a finished action UNKNOWN after its result: a later result entry that
        supersedes the first (``extra.amends``), never an edit; the target is blocked.

        Answers the new result entry's ``seq``.
        """
        self._block(session.target, UnknownAction(action_id, session.session_id, session.agent, idempotency_key))
        extra: dict[str, object] = {"amends": amends, "recorded_by": "network"}
        if decision_id:
            extra["decision_id"] = decision_id
        written = self._ledger.result(
            session.session_id,
            action_id,
            idempotency_key,
            session.agent,
            epoch,
            Outcome.UNKNOWN.value,
            Reason.ALLOW,
            Evidence.NONE.value,
            True,
            message,
            extra,
        )
        return written.seq

    def refuse(
        self,
        session: Session,
        spec: ActionSpec,
        action_id: str,
        info: RefInfo | None,
        reason: Reason | str,
        message: str,
        decision: Decision | None = None,
    ) -> ActResponse:
        """A refusal before the intent: logged, but it does not use up the key."""
        role, name = (info.role, info.name) if info else ("", "")
        policies = list(decision.policies) if decision else []
        self._ledger.append(
            "refusal",
            session_id=session.session_id,
            action_id=action_id,
            idempotency_key=spec.idempotency_key,
            principal=session.agent,
            epoch=session.latest.lease_epoch if session.latest else 0,
            body=RefusalBody(
                kind=spec.kind.value,
                ref=spec.ref,
                role=role,
                name=name,
                url=spec.url,
                reason=reason,
                message=message,
                decision_id=decision.decision_id if decision else "",
                policies=tuple(policies),
            ),
        )
        return ActResponse(
            ActionResult(
                action_id=action_id,
                outcome=Outcome.REFUSED,
                reason=reason,
                message=message,
                execution_started=False,
                evidence=Evidence.NONE,
                idempotency_key=spec.idempotency_key,
                decision_id=decision.decision_id if decision else "",
                policies=tuple(policies),
                approval_id=decision.approval_id if decision else "",
            )
        )

    def intent(self, session: Session, spec: ActionSpec, action_id: str, epoch: int, params: dict[str, Any]) -> None:
        """The intent, durable when this returns: from here on the key is used."""
        self._ledger.intent(session.session_id, action_id, spec.idempotency_key, session.agent, epoch, params)

    def finish(
        self,
        session: Session,
        spec: ActionSpec,
        action_id: str,
        decision: Decision,
        outcome: Outcome,
        reason: Reason | str,
        message: str,
        *,
        started: bool,
        evidence: Evidence,
        typed_chars: int = 0,
        via: str = "",
    ) -> ActResponse:
        """The result of an intent, durable when this returns; UNKNOWN blocks the target.

        A result that cannot be written (the ledger's database gone) leaves a durable intent
        without a result: UNKNOWN, as recovery will call it, so the target is blocked here
        too and the error raised. Otherwise the agent's next write, with a fresh key, went
        to the page while the first one's outcome stood unrecorded.
        """
        unknown = UnknownAction(action_id, session.session_id, session.agent, spec.idempotency_key)
        if outcome is Outcome.UNKNOWN:
            self._block(session.target, unknown)
        extra: dict[str, object] = {"decision_id": decision.decision_id}
        if typed_chars:
            extra["typed_chars"] = typed_chars
        if via:
            extra["via"] = via
        try:
            written = self._ledger.result(
                session.session_id,
                action_id,
                spec.idempotency_key,
                session.agent,
                decision.lease_epoch,
                outcome.value,
                reason,
                evidence.value,
                started,
                message,
                extra,
            )
        except BaseException:
            self._block(session.target, unknown)
            raise
        self.last_result_seq = written.seq
        return ActResponse(
            ActionResult(
                action_id=action_id,
                outcome=outcome,
                reason=reason,
                message=message,
                execution_started=started,
                evidence=evidence,
                idempotency_key=spec.idempotency_key,
                decision_id=decision.decision_id,
                typed_chars=typed_chars,
            )
        )
