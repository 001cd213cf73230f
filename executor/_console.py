"""The operator console's side of the executor: who may watch, and a person at the wheel.

Every call here but the agent's request for a person (``_person``) is an operator's: the
sidecar says who the bearer token belongs to, and only an operator or an admin passes
(:meth:`ConsoleDesk.operator`). They may list the sessions, watch a session's screen and
ledger timeline, look an element up on the screen, read what an action asked for, and —
while they hold the target's lease as a person — send input into it.

A person's input goes through the same gate as an agent's action (invariant 15):

1. nothing of unknown outcome blocks the target (``RECONCILE_REQUIRED``);
2. the sidecar's ``CheckHumanInput``, made with the person's own token: allowed only while
   that person holds the live lease as a person at exactly the epoch the console names
   (``NO_LEASE``, ``STALE_EPOCH`` otherwise); every answer is in the decision log;
3. the intent, durable in the ledger under the person (``principal_kind: human``);
4. the fence: an action of unknown outcome that came up meanwhile, or an epoch newer than
   the one decided on, wins, nothing is dispatched;
5. one bounded dispatch, and its result in the ledger; an input whose dispatch may have
   begun and did not return, or whose result could not be written, is ``UNKNOWN`` and
   blocks the target like an agent's.

The ledger is awaited (on its own thread, ``AsyncLedger``): a person's inputs to one
session stay in order under that session's input lock, from the lookup of the input id
(replayed when it has a result) through the intent to the result.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from collections.abc import AsyncIterator
from typing import cast

from handrail._vocabulary import Evidence, Outcome, Reason
from handrail.authz import AsyncAuthzClient, AuthzError, AuthzRpcError, AuthzUnavailableError, Decision
from handrail.executor._backend import DispatchResult, DispatchStatus
from handrail.executor._elements import Element
from handrail.executor._errors import (
    BackendError,
    NotFoundError,
    PermissionDeniedError,
)
from handrail.executor._lease import LeaseKeeper
from handrail.executor._live import HumanInput, LiveSurface, ScreenBox, ScreenFrame, SessionSummary, TimelineItem
from handrail.executor._models import ActionResult
from handrail.executor._outcomes import Outcomes, UnknownAction
from handrail.executor._person import PersonDesk
from handrail.executor._session import Session, Sessions
from handrail.executor._watch import PersonInput, SessionWatch, page_origin
from handrail.recorder import AsyncLedger, Entry, ReconcileBody, RefusalBody, ResultBody, timeline

__all__ = ["ConsoleDesk", "element_context"]

_OPERATOR_ROLES = ("operator", "admin")
_TIMELINE_POLL_S = 0.1
_INPUT_TIMEOUT_MS = 5_000


def live(session: Session) -> LiveSurface:
    """The session's surface as a live one, or FAILED_PRECONDITION."""
    backend = session.backend
    if not hasattr(backend, "live_frames") or not hasattr(backend, "human_input"):
        raise BackendError(f"the {backend.kind} surface of {session.session_id} has no live view")
    return cast(LiveSurface, backend)


def element_context(element: Element) -> str:
    """The element and the containers it sits in (dialog, form, list item, row, heading),
    outermost first, as the observation's structured element list says: never read from
    the snapshot's text, which the page controls (a page could write a ``[ref=...]`` of its
    own there to dress up the element an operator is asked about)."""
    lines = [f"{kind}: {c.role} {c.name!r}" for kind, c in reversed(element.contexts())]
    lines.append(f"{element.role} {element.name!r} [ref={element.ref}]")
    return "\n".join(lines)


class ConsoleDesk:
    """The console's calls on the executor's sessions.

    Args:
        authz: the sidecar client, authenticated as this executor.
        ledger: the action ledger.
        sessions: the open sessions.
        leases: lease upkeep (the fences).
        outcomes: the records of actions (UNKNOWN blocking).
        watches: each session's network listener (a person's page loads are theirs).
    """

    def __init__(
        self,
        authz: AsyncAuthzClient,
        ledger: AsyncLedger,
        sessions: Sessions,
        leases: LeaseKeeper,
        outcomes: Outcomes,
        watches: dict[str, SessionWatch],
    ) -> None:
        self._authz = authz
        self._watches = watches
        self._ledger = ledger
        self._sessions = sessions
        self._leases = leases
        self._outcomes = outcomes
        self.persons = PersonDesk(authz, ledger, sessions, leases)
        self._input_locks: dict[str, asyncio.Lock] = {}
        # Which operator each token named when the sidecar last said so. Only a person's
        # input reads it, and only to skip a round trip: the sidecar's CheckHumanInput
        # authenticates the token itself and refuses a principal that is not the caller.
        self._named: dict[str, str] = {}

    # -- who may call ------------------------------------------------------------------

    async def operator(self, token: str) -> str:
        """The operator (or admin) a bearer token belongs to, as the sidecar says.

        Asked on every call (the sidecar answers from memory): nothing here remembers a
        token, so a revoked or expired operator is refused on their very next call.

        Raises:
            AuthzRpcError: the sidecar refused the token (UNAUTHENTICATED, with its reason).
            PermissionDeniedError: the token is an agent's or an executor's.
        """
        principal, role = await self._authz.who_am_i(token=token)
        if role not in _OPERATOR_ROLES:
            raise PermissionDeniedError(f"{principal} is a {role}: only an operator may call this")
        if len(self._named) > 1000:
            self._named.clear()
        self._named[token] = principal
        return principal

    # -- reading -----------------------------------------------------------------------

    async def summaries(self, session_id: str = "") -> list[SessionSummary]:
        """Every open session (or one, with its latest snapshot): lease, observation, last action."""
        out = []
        for session in self._sessions.all():
            if session_id and session.session_id != session_id:
                continue
            recent = await self._ledger.tail(8, session_id=session.session_id)
            latest = session.latest
            actions = [e for e in recent if e.action_id]
            action = actions[-1] if actions else None
            out.append(
                SessionSummary(
                    session_id=session.session_id,
                    target=session.target,
                    agent=session.agent,
                    backend=session.backend.kind,
                    lease_epoch=session.fence.highest_epoch,
                    human_holds=session.fence.human_holds,
                    url=latest.url if latest else "",
                    title=latest.title if latest else "",
                    latest_observation_id=latest.observation_id if latest else "",
                    last_action_id=action.action_id if action else "",
                    last_action=_describe(action, actions) if action else "",
                    last_outcome=_outcome_of(action) if action else "",
                    last_action_at_ms=action.ts_ms if action else 0,
                    unknown_actions=tuple(u.action_id for u in self._outcomes.unknown_actions(session.target)),
                    person_request=self.persons.latest(session.session_id),
                    live_view=hasattr(session.backend, "live_frames"),
                    snapshot=session.latest_full_snapshot or "" if session_id else "",
                )
            )
        return out

    def frames(self, session: Session, max_width: int, max_height: int, quality: int) -> AsyncIterator[ScreenFrame]:
        return live(session).live_frames(max_width, max_height, quality)

    async def timeline(self, session: Session, since_seq: int) -> AsyncIterator[TimelineItem]:
        """The session's ledger entries after ``since_seq``, then each new one, until it closes."""
        seq = since_seq
        while True:
            entries = await self._ledger.entries(session_id=session.session_id, since_seq=seq, limit=500)
            for entry in entries:
                seq = entry.seq
                yield _item(entry)
            if session.closed and not entries:
                return
            if not entries:
                await asyncio.sleep(_TIMELINE_POLL_S)

    async def locate(self, session: Session, role: str, name: str) -> ScreenBox:
        box = await live(session).locate(role, name)
        if box is None:
            raise NotFoundError("name", f"no single visible {role} named {name!r} on the screen now")
        return box

    def describe(self, session: Session, action_id: str) -> tuple[dict[str, object], str, str]:
        """An action's parameters, its cited observation's snapshot and the element's context."""
        params = session.asked.get(action_id)
        if params is None:
            raise NotFoundError("action_id", f"no recent action {action_id!r} in {session.session_id}")
        obs_id = str(params.get("observation_id", ""))
        generation = int(obs_id.rpartition(":")[2]) if obs_id.rpartition(":")[2].isdigit() else 0
        latest = session.latest
        snapshot = ""
        if latest is not None and latest.observation_id == obs_id:
            snapshot = session.latest_full_snapshot or latest.snapshot
        ref = str(params.get("ref", ""))
        element = next((e for e in session.recent_elements.get(generation, ()) if e.ref == ref), None) if ref else None
        return params, snapshot, element_context(element) if element is not None else ""

    # -- a person at the wheel -----------------------------------------------------------

    async def person_of(self, token: str) -> tuple[str, bool]:
        """The person a token names, and whether that comes from memory (the sidecar not
        asked on this call: see ``human_input``)."""
        remembered = self._named.get(token)
        return (remembered, True) if remembered else (await self.operator(token), False)

    async def human_input(
        self, token: str, person: str, unasked: bool, session: Session, spec: HumanInput
    ) -> ActionResult:
        """One input of ``person`` (the token's, from :meth:`person_of`) through the gate
        (see the module docstring).

        When the person's name came from memory, the sidecar's CheckHumanInput, which
        authenticates the token on this very call, is the only round trip before the
        dispatch; an answer given without it asks the sidecar first.
        """
        surface = live(session)
        lock = self._input_locks.setdefault(session.session_id, asyncio.Lock())
        async with lock:  # a person's inputs land in the order they were sent
            return await self._human_input(token, person, unasked, session, surface, spec)

    async def _human_input(
        self, token: str, person: str, unasked: bool, session: Session, surface: LiveSurface, spec: HumanInput
    ) -> ActionResult:
        key = spec.input_id or "h_" + secrets.token_hex(8)
        blocked = self._outcomes.blocked(session.target)
        recorded = await self._ledger.find_result_by_key(session.session_id, key)
        if unasked and (blocked is not None or recorded is not None):
            await self.operator(token)  # no answer goes out before the sidecar has seen the token
        replayed = self._replay(recorded, key)
        if replayed is not None:
            return replayed
        action_id = "h_" + secrets.token_hex(8)
        blocked = self._outcomes.blocked(session.target)  # again: the lookups were awaited
        if blocked is not None:
            return await self._refuse(session, person, spec, action_id, key, Reason.RECONCILE_REQUIRED, blocked)
        try:
            decision = await self._authz.check_human_input(
                token, person, session.target, spec.lease_epoch, spec.kind.verb.value,
                url=surface.current_url(), action_id=action_id,
            )  # fmt: skip
        except AuthzUnavailableError as exc:
            return await self._refuse(session, person, spec, action_id, key, Reason.AUTHZ_UNAVAILABLE, f"authz: {exc}")
        except AuthzRpcError:
            raise  # the person's token or role refused (UNAUTHENTICATED, PERMISSION_DENIED): an error
        except AuthzError as exc:
            return await self._refuse(session, person, spec, action_id, key, Reason.AUTHZ_UNAVAILABLE, f"authz: {exc}")
        session.fence.saw(decision.lease_epoch)
        if not decision.allow:
            return await self._refuse(
                session, person, spec, action_id, key, decision.reason, decision.message, decision
            )
        params = {**spec.ledger_params(), "decision_id": decision.decision_id}
        epoch = spec.lease_epoch
        await self._ledger.intent(session.session_id, action_id, key, person, epoch, params, principal_kind="human")
        blocked = self._outcomes.blocked(session.target)  # come up while the intent was written
        if blocked is not None:
            stopped = DispatchResult(DispatchStatus.NOT_STARTED, f"{blocked}; not sent")
            return await self._finish(
                session, person, spec, action_id, key, decision, stopped, Reason.RECONCILE_REQUIRED
            )
        if epoch < session.fence.highest_epoch:
            message = f"lease epoch {epoch} was superseded (epoch {session.fence.highest_epoch}); not sent"
            stopped = DispatchResult(DispatchStatus.NOT_STARTED, message)
            return await self._finish(session, person, spec, action_id, key, decision, stopped, Reason.STALE_EPOCH)
        mine = PersonInput(person, token, epoch, action_id, decision.decision_id, page_origin(surface.current_url()))
        watch = self._watches.get(session.session_id)
        if watch is not None:  # the documents the input loads are the person's (``_watch``)
            watch.person = mine
        try:
            dispatched = await surface.human_input(spec, _INPUT_TIMEOUT_MS)
        except TimeoutError:
            dispatched = DispatchResult(DispatchStatus.MAYBE_STARTED, f"no answer within {_INPUT_TIMEOUT_MS} ms")
        except Exception as exc:  # the intent is durable: whatever broke, record the outcome
            dispatched = DispatchResult(DispatchStatus.MAYBE_STARTED, f"the surface failed mid-input: {exc}")
        mine.at = time.monotonic()
        return await self._finish(session, person, spec, action_id, key, decision, dispatched)

    def _replay(self, result: Entry | None, key: str) -> ActionResult | None:
        if result is None or result.principal_kind != "human":
            return None
        body = result.body_as(ResultBody)
        return ActionResult(
            action_id=result.action_id,
            outcome=Outcome(body.outcome),
            reason=body.reason,
            message="recorded outcome of an earlier input with this id; nothing sent",
            execution_started=body.execution_started,
            evidence=Evidence(body.evidence or Evidence.NONE.value),
            idempotency_key=key,
        )

    async def _refuse(
        self,
        session: Session,
        person: str,
        spec: HumanInput,
        action_id: str,
        key: str,
        reason: str,
        message: str,
        decision: Decision | None = None,
    ) -> ActionResult:
        await self._ledger.append(
            "refusal",
            session_id=session.session_id,
            action_id=action_id,
            idempotency_key=key,
            principal=person,
            principal_kind="human",
            epoch=spec.lease_epoch,
            body=RefusalBody(
                kind=spec.kind.value,
                reason=reason,
                message=message,
                url="",
                decision_id=decision.decision_id if decision else "",
            ),
        )
        return ActionResult(
            action_id=action_id,
            outcome=Outcome.REFUSED,
            reason=reason,
            message=message,
            execution_started=False,
            evidence=Evidence.NONE,
            idempotency_key=key,
            decision_id=decision.decision_id if decision else "",
        )

    async def _finish(
        self,
        session: Session,
        person: str,
        spec: HumanInput,
        action_id: str,
        key: str,
        decision: Decision,
        dispatched: DispatchResult,
        reason: str = "",
    ) -> ActionResult:
        status = dispatched.status
        if status is DispatchStatus.DONE:
            outcome, evidence, started = Outcome.DONE, Evidence.DISPATCH_RETURNED, True
        elif status is DispatchStatus.NOT_STARTED:
            outcome, evidence, started = Outcome.FAILED, Evidence.NONE, False
        elif status is DispatchStatus.PARTIAL:
            outcome, evidence, started = Outcome.FAILED, Evidence.DISPATCH_RETURNED, True
        else:
            outcome, evidence, started = Outcome.UNKNOWN, Evidence.NONE, True
            # The agent reconciles it, after observing the real state, as its own.
            self._outcomes.block(session.target, UnknownAction(action_id, session.session_id, session.agent, key))
        reason = reason or (dispatched.reason or Reason.ALLOW)
        extra: dict[str, object] = {"decision_id": decision.decision_id, "by": "person"}
        if dispatched.typed_chars:
            extra["typed_chars"] = dispatched.typed_chars
        unknown = UnknownAction(action_id, session.session_id, session.agent, key)
        try:
            await self._ledger.result(
                session.session_id, action_id, key, person, spec.lease_epoch, outcome.value, reason,
                evidence.value, started, dispatched.message, extra, principal_kind="human",
            )  # fmt: skip
        except BaseException:
            # Unrecorded, the input may have gone in: UNKNOWN, as recovery would call it
            # (``Outcomes.finish`` does the same for an agent's action).
            self._outcomes.block(session.target, unknown)
            raise
        return ActionResult(
            action_id=action_id,
            outcome=outcome,
            reason=reason,
            message=dispatched.message,
            execution_started=started,
            evidence=evidence,
            idempotency_key=key,
            decision_id=decision.decision_id,
            typed_chars=dispatched.typed_chars,
        )


def _outcome_of(entry: Entry) -> str:
    body = entry.content
    if isinstance(body, ResultBody):
        return body.outcome
    if isinstance(body, RefusalBody):
        return "REFUSED"
    if isinstance(body, ReconcileBody):
        return "RECONCILED"
    return ""


def _summary(entry: Entry) -> str:
    """The readable part of an entry's timeline line (what it did, not its ids)."""
    return timeline([entry]).split("  ")[-1]


def _describe(action: Entry, recent: list[Entry]) -> str:
    """An action as the overview shows it: who, what, and how it ended (if it has)."""
    who = f"{'person' if action.principal_kind == 'human' else 'agent'} {action.principal}: "
    if action.kind == "result":
        intent = next((e for e in recent if e.action_id == action.action_id and e.kind == "intent"), None)
        return who + (f"{_summary(intent)} → " if intent else "") + _summary(action)
    return who + _summary(action)


def _item(entry: Entry) -> TimelineItem:
    body = entry.content
    reason = body.reason if isinstance(body, ResultBody | RefusalBody) else ""
    return TimelineItem(
        seq=entry.seq,
        at_ms=entry.ts_ms,
        kind=entry.kind,
        action_id=entry.action_id,
        principal=entry.principal,
        principal_kind=entry.principal_kind,
        epoch=entry.epoch,
        outcome=_outcome_of(entry),
        reason=str(reason),
        line=timeline([entry]),
    )


def params_json(params: dict[str, object]) -> str:
    return json.dumps(params, ensure_ascii=False, sort_keys=True)
