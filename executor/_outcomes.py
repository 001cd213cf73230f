"""Outcomes and idempotency: what became of every action, and what that means for the next.

Every record of an action goes through ``Outcomes``: a refusal (logged, but it does not
use up the idempotency key), the intent (durable before dispatch), the result, and the
reconcile of an action whose outcome was unknown. It is also the one reader of those
records back: an idempotency key seen before replays its recorded outcome (or is a
conflict, with other parameters), and an action left ``UNKNOWN`` — by a dispatch that may
have begun, or by a crash between intent and result — blocks every further write on its
target until a reconcile says what the real state shows. Nothing ``UNKNOWN`` is ever
dispatched again.

The ledger is awaited (``AsyncLedger``: every call on one ledger thread, in the order the
loop queued them), so other coroutines run while a record is being written. What stays
atomic, and how:

- **An idempotency key's check and its intent.** Every act of a session holds the
  session's ``write_lock`` (``_act``) from the replay lookup through the intent to the
  result, so a second write with the same key waits and then replays the first's outcome
  (or conflicts). The lookup itself (intent, reconcile, result of the key) is one call on
  the ledger thread: no entry lands between its three reads.
- **UNKNOWN blocking.** The in-memory block is set *before* the result is awaited when the
  outcome is UNKNOWN, and at once when writing the result fails or times out: from the
  moment the outcome may be unrecorded, no check on the target passes. The act path checks
  the block again once its intent is durable, so an UNKNOWN that came up while it waited
  (another session's, a late request's amend) stops it before dispatch.
- **A reconcile** holds its target's reconcile lock from the check of the blocking action
  through the ``reconcile`` entry to lifting the block: two reconciles of one action never
  both write, and the block lifts only once the entry is durable.
- **An intent the ledger was too slow to confirm** (``LEDGER_TIMEOUT``) is not dispatched;
  it may still become durable, so a FAILED, not-started result is queued right behind it,
  written only if the intent was.
- **Records written from callbacks that cannot wait** (a late request's amend) are queued
  in order and block the target first; their failure is logged, the block stays.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from dataclasses import dataclass
from typing import Any

from handrail._vocabulary import Evidence, Outcome, Reason, Verdict
from handrail.authz import Decision
from handrail.executor._errors import InvalidArgumentError, NotFoundError
from handrail.executor._models import ActionResult, ActionSpec, ActResponse
from handrail.executor._session import Session
from handrail.executor._snapshot import RefInfo
from handrail.recorder import (
    AsyncLedger,
    Entry,
    IntentBody,
    Ledger,
    LedgerError,
    ReconcileBody,
    RefusalBody,
    ResultBody,
)

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
        ledger: the action ledger (intent before dispatch, result after), awaited.
    """

    def __init__(self, ledger: AsyncLedger) -> None:
        self._ledger = ledger
        # target -> action id -> the UNKNOWN action blocking it
        self._unknown: dict[str, dict[str, UnknownAction]] = {}
        # action id -> the seq of the result entry :meth:`finish` wrote (taken by the act path)
        self._result_seqs: dict[str, int] = {}
        self._reconciling: dict[str, asyncio.Lock] = {}  # target -> its reconcile lock

    async def recover(self) -> None:
        """On start: intents without results become UNKNOWN, never retried, and block."""
        for rec in await self._ledger.recover():
            log.warning("action %s of %s had no result: now UNKNOWN", rec.action_id, rec.session_id)
        for open_ in await self._ledger.unresolved():
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

    async def reconcile(self, session: Session, action_id: str, verdict: Verdict, evidence: str) -> ActionResult:
        """Record what the real state shows of an UNKNOWN action on the session's target."""
        lock = self._reconciling.setdefault(session.target, asyncio.Lock())
        async with lock:  # the check, the entry and lifting the block: one step per target
            unknown = self._unknown.get(session.target, {}).get(action_id)
            if unknown is None:
                if await self._ledger.entries(action_id=action_id):
                    raise InvalidArgumentError(
                        "action_id",
                        f"action {action_id} is not awaiting reconciliation on {session.target}",
                    )
                raise NotFoundError("action_id", f"no action {action_id!r}")
            if unknown.agent != session.agent:
                raise InvalidArgumentError("action_id", f"action {action_id} belongs to {unknown.agent}")
            await self._ledger.reconcile(unknown.session_id, action_id, session.agent, verdict.value, evidence)
            blocking = self._unknown.get(session.target, {})  # re-read: blocks may have come and gone
            blocking.pop(action_id, None)
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

    async def replay(self, session: Session, spec: ActionSpec, fingerprint: str) -> ActionResult | None:
        """The recorded outcome of an earlier action with this idempotency key, if any.

        The same key with the same parameters (``fingerprint``) gets that outcome and
        nothing is dispatched; with other parameters it is an IDEMPOTENCY_CONFLICT.
        """
        key = spec.idempotency_key
        intent, reconciled, result = await self._ledger.call(_recorded, self._ledger.ledger, session.session_id, key)
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
    ) -> asyncio.Future[Entry]:
        """Make a finished action UNKNOWN after its result: a later result entry that
        supersedes the first (``extra.amends``), never an edit; the target is blocked.

        For a callback that cannot wait: the target is blocked at once and the entry queued
        (after every record queued before it); answers the future of the written entry.
        """
        self._block(session.target, UnknownAction(action_id, session.session_id, session.agent, idempotency_key))
        extra: dict[str, object] = {"amends": amends, "recorded_by": "network"}
        if decision_id:
            extra["decision_id"] = decision_id
        return self._ledger.post(
            self._ledger.ledger.result,
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

    async def refuse(
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
        await self._ledger.append(
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

    async def intent(
        self, session: Session, spec: ActionSpec, action_id: str, epoch: int, params: dict[str, Any]
    ) -> None:
        """The intent, durable when this returns: from here on the key is used.

        Raises:
            LedgerError: the intent is not durable. With ``LEDGER_TIMEOUT`` it may become so
                later: a FAILED result (not started) is queued right behind it then.
        """
        key = spec.idempotency_key
        written = self._ledger.submit(
            self._ledger.ledger.intent, session.session_id, action_id, key, session.agent, epoch, params
        )
        try:
            await self._ledger.wait(written)
        except LedgerError as exc:
            if exc.reason == "LEDGER_TIMEOUT":
                why = f"not dispatched: the ledger took longer than {self._ledger.deadline_s:g} s to commit the intent"
                extra = {"decision_id": str(params.get("decision_id", ""))}
                args = (session.session_id, action_id, key, session.agent, epoch, why, extra)
                self._ledger.post(_not_dispatched, self._ledger.ledger, written, *args)
            raise

    def result_seq(self, action_id: str) -> int:
        """The seq of the result entry :meth:`finish` wrote for ``action_id`` (0: none);
        asked once, by the act path."""
        return self._result_seqs.pop(action_id, 0)

    async def finish(
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
            written = await self._ledger.result(
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
        self._result_seqs[action_id] = written.seq
        while len(self._result_seqs) > 1000:  # none left behind by an act that never asked
            del self._result_seqs[next(iter(self._result_seqs))]
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


def _recorded(ledger: Ledger, session_id: str, key: str) -> tuple[Entry | None, list[Entry], Entry | None]:
    """On the ledger thread: an idempotency key's intent, the reconciles of its action and
    its result, read as one step (no entry lands between the reads)."""
    intent = ledger.find_intent_by_key(session_id, key)
    if intent is None:
        return None, [], None
    reconciled = ledger.entries(action_id=intent.action_id, kind="reconcile")
    return intent, reconciled, ledger.find_result_by_key(session_id, key)


def _not_dispatched(
    ledger: Ledger,
    intent: concurrent.futures.Future[Entry],
    session_id: str,
    action_id: str,
    key: str,
    agent: str,
    epoch: int,
    message: str,
    extra: dict[str, str],
) -> None:
    """On the ledger thread, right after an intent the act stopped waiting for: if it was
    written after all, its result says nothing was dispatched (a result with no intent is
    never written)."""
    if intent.exception() is not None:
        return
    ledger.result(
        session_id, action_id, key, agent, epoch, Outcome.FAILED.value, Reason.ALLOW, Evidence.NONE.value,
        False, message, extra,
    )  # fmt: skip
