"""The act path: one write action through every gate, in order.

1. **Check**, cheapest first: the cited observation exists and the ref is one it
   produced; the idempotency key is new (else its recorded outcome is returned as is);
   nothing on the target awaits reconciliation; the observation is the session's latest,
   under the current lease epoch; the backend finds its surface unchanged.
2. **Decide**: the authz sidecar allows this exact action for this principal, target and
   epoch (waiting, boundedly, for an operator's approval when one is asked for). No
   answer in time is a refusal: AUTHZ_UNAVAILABLE.
3. **Intent**, durable in the ledger (awaited: other sessions go on meanwhile); then the
   **fence**: an UNKNOWN that came up on the target while the intent was written, or a
   lease change seen since the decision, wins over it, and nothing is dispatched.
4. **Dispatch** one bounded action, and record its **result**: DONE, FAILED (known not
   to have had its effect), or UNKNOWN (it may have), which blocks the target until it
   is reconciled. ``execution_started`` is false only when nothing was dispatched.
5. **Re-observe**, and say what proves the result (the evidence).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import secrets
import time
from collections.abc import Awaitable
from dataclasses import replace
from typing import Any, TypeVar

from handrail._vocabulary import ActionKind, Evidence, Outcome, Reason, Verb
from handrail.authz import ApprovalStatus, AsyncAuthzClient, AuthzError, AuthzUnavailableError, Decision
from handrail.executor._backend import AuthzResource, DispatchResult, DispatchStatus
from handrail.executor._errors import NotFoundError, SessionClosedError, TargetGoneError
from handrail.executor._faults import FaultPoint
from handrail.executor._lease import LeaseKeeper
from handrail.executor._models import (
    DEFAULT_ACTION_TIMEOUT_MS,
    ActionResult,
    ActionSpec,
    ActResponse,
    BatchResult,
    Observation,
)
from handrail.executor._observe import Observer
from handrail.executor._outcomes import Outcomes
from handrail.executor._points import bind_point
from handrail.executor._session import Session
from handrail.executor._sidechecks import LostChecks, check_effects, check_end, element_context
from handrail.executor._snapshot import RefInfo
from handrail.executor._watch import ActionNetwork, SessionWatch

log = logging.getLogger(__name__)
_T = TypeVar("_T")

#: The actions that only look: let through while the target awaits a reconcile (a GET
#: navigation, in this tab or a new one, back in history, or another tab brought forward).
READ_KINDS = frozenset({ActionKind.NAVIGATE, ActionKind.TAB_OPEN, ActionKind.BACK, ActionKind.TAB_SWITCH})


# Verbs whose allow covers a form post to the action's own URLs.
_WRITES = frozenset({Verb.SUBMIT, Verb.PURCHASE, Verb.DELETE})


SETTLE_TIMEOUT_MS = 3_000


def _prefixed(prefix: str, message: str) -> str:
    """``message`` with ``prefix`` in front, once (a backend's message may carry it already)."""
    return message if message.startswith(prefix) else prefix + message


class ActPath:
    """Runs write actions (and bounded waits) of sessions through the gates of the loop.

    Args:
        authz: the sidecar client, authenticated as this executor.
        leases: the lease upkeep (the fence before dispatch).
        outcomes: the records of actions (replays, UNKNOWN blocking, results).
        observer: takes the re-observation after an action.
        fault: the fault injected at the kill points of an action's life.
    """

    def __init__(
        self,
        authz: AsyncAuthzClient,
        leases: LeaseKeeper,
        outcomes: Outcomes,
        observer: Observer,
        fault: FaultPoint,
        watches: dict[str, SessionWatch] | None = None,
    ) -> None:
        self._authz = authz
        self._watches: dict[str, SessionWatch] = watches if watches is not None else {}
        self._leases = leases
        self._outcomes = outcomes
        self._observer = observer
        self._fault = fault
        self._lost = LostChecks()  # checks whose answer may be lost: an agent's retry resends them
        # Acts that run on after their caller went away, until they have written their result.
        self._running: set[asyncio.Future[object]] = set()

    async def _shielded(self, work: Awaitable[_T]) -> _T:
        """Run ``work`` to its end whatever its caller does (invariant 14).

        gRPC cancels a handler whose client went away or whose deadline passed; an action
        that has begun must still end with a result in the ledger (UNKNOWN blocking as
        usual), so the work runs in a task of its own and the caller only waits for it.
        """
        task: asyncio.Future[_T] = asyncio.ensure_future(work)
        self._running.add(task)  # type: ignore[arg-type]
        task.add_done_callback(self._ended)
        return await asyncio.shield(task)

    def _ended(self, task: asyncio.Future[Any]) -> None:
        self._running.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.debug("an act ended with %r", task.exception())

    async def drain(self, timeout_s: float = 10.0) -> None:
        """Wait (boundedly) for the acts whose callers went away to write their results."""
        if self._running:
            await asyncio.wait(list(self._running), timeout=timeout_s)

    async def act(self, session: Session, spec: ActionSpec) -> ActResponse:
        """One action, then (unless ``skip_reobserve``) the re-observation.

        Shielded from the caller's cancellation: once called, the action runs to its result.
        """
        return await self._shielded(self._act_locked(session, spec))

    async def _act_locked(self, session: Session, spec: ActionSpec) -> ActResponse:
        async with session.write_lock:
            return await self._act(session, spec, batch=False)

    async def act_batch(self, session: Session, specs: list[ActionSpec]) -> BatchResult:
        """Run actions in order; stop at the first that is not DONE.

        Every action cites the same observation; between actions nothing is re-observed,
        so any navigation, dialog or change to the next target since that observation
        refuses the next action and ends the batch. Shielded from the caller's cancellation
        as :meth:`act` is.
        """
        return await self._shielded(self._batch_locked(session, specs))

    async def _batch_locked(self, session: Session, specs: list[ActionSpec]) -> BatchResult:
        async with session.write_lock:
            results: list[ActionResult] = []
            stop_reason = stop = ""
            for i, spec in enumerate(specs):
                if i and session.latest is not None:
                    # Did the last action change the page's structure (navigation, a
                    # dialog, another tab)? Then nothing after it is tried.
                    changed = await session.backend.check_fresh(session.latest, spec, None)
                    if changed is not None:
                        stop_reason = f"action {i - 1} changed the surface: {changed.message}"
                        stop = "surface_changed"
                        break
                response = await self._act(session, spec, batch=True)
                results.append(response.result)
                if response.result.outcome is not Outcome.DONE:
                    r = response.result
                    stop_reason = f"action {len(results) - 1} ended {r.outcome.value}"
                    named = r.reason and r.reason != Reason.ALLOW
                    stop_reason += f" {r.reason}: {r.message}" if named else f": {r.message}"
                    stop = "not_done"
                    break
            observation = None
            if any(r.execution_started for r in results):
                await session.backend.settle(SETTLE_TIMEOUT_MS)
                observation = await self._observer.observe(session)
            not_started = tuple(range(len(results), len(specs)))
            return BatchResult(tuple(results), not_started, stop_reason, observation, stop)

    async def _act(self, session: Session, spec: ActionSpec, *, batch: bool) -> ActResponse:
        if session.closed:
            raise SessionClosedError(f"session {session.session_id} is closed")
        action_id = "a_" + secrets.token_hex(8)
        target = self._resolve_cited(session, spec)
        end = self._end_of(session, spec)
        ends = (end.role, end.name) if end else ("", "")
        fingerprint = spec.fingerprint(*((target.role, target.name) if target else ("", "")), ends)
        if spec.kind.is_read:
            return await self._wait(session, spec, action_id, batch)

        # 1. Check. Idempotency first: a repeated key never dispatches again.
        replayed = await self._outcomes.replay(session, spec, fingerprint)
        if replayed is not None:
            return ActResponse(replayed)
        blocked = self._outcomes.blocked(session.target)
        # While the target waits for a reconcile, reads stay open: a GET navigation (typed,
        # in a new tab, back) or a tab switch lets the agent look at the real state.
        read_only = blocked is not None and spec.kind in READ_KINDS
        if blocked is not None and not read_only:
            return await self._outcomes.refuse(session, spec, action_id, target, Reason.RECONCILE_REQUIRED, blocked)
        if spec.at_point and session.backend.kind == "browser":
            spec, target = self._bind_point(session, spec)
        refusal = await self._check_fresh(session, spec, target)
        if refusal is not None:
            return await self._outcomes.refuse(session, spec, action_id, target, *refusal)
        try:
            return await self._decide_and_act(session, spec, action_id, target, fingerprint, batch, read_only)
        finally:
            await session.backend.release()  # what the check armed, when no dispatch came

    async def _decide_and_act(
        self,
        session: Session,
        spec: ActionSpec,
        action_id: str,
        target: RefInfo | None,
        fingerprint: str,
        batch: bool,
        read_only: bool,
    ) -> ActResponse:
        cited = session.latest
        assert cited is not None  # _check_fresh refused otherwise

        # 2. Decide.
        decided = await self._decide(session, spec, action_id, target, fingerprint)
        if isinstance(decided, ActResponse):
            return decided
        decision, resource = decided

        # 3. Intent, durable before anything reaches the surface; then the fence.
        await self._fault.hit("before-intent", spec.idempotency_key)
        params = spec.ledger_params(*((target.role, target.name) if target else ("", "")))
        if target is not None and target.element is not None and target.element.contexts():
            # Where the element sat, as observed: "the Cancel of Plan E's row".
            params["context"] = {kind: f"{c.role} {c.name}" for kind, c in target.element.contexts()}
        params["fingerprint"] = fingerprint
        params["decision_id"] = decision.decision_id
        if resource.verb is not None and resource.verb is not spec.kind.verb:
            params["verb"] = resource.verb.value  # judged by its effect (Enter that submits)
        if resource.effects:
            params["effects"] = [f"{e.verb.value} {e.method} {e.url}" for e in resource.effects]
        end = self._end_of(session, spec)
        if end is not None:
            params["to"] = f"{end.role} {end.name}"  # a drag's drop target, as observed
        if read_only:
            params["read"] = True  # let through while the target awaits a reconcile
        await self._outcomes.intent(session, spec, action_id, cited.lease_epoch, params)
        await self._fault.hit("after-intent", spec.idempotency_key)
        # Checked again: the intent was awaited, and an UNKNOWN may have come up meanwhile
        # (another session's on this target, a late request of an earlier action).
        blocked = None if read_only else self._outcomes.blocked(session.target)
        fenced = (Reason.RECONCILE_REQUIRED, blocked) if blocked else await self._leases.fenced(session, cited)
        if fenced is not None:
            reason, why = fenced
            return await self._outcomes.finish(
                session, spec, action_id, decision, Outcome.REFUSED, reason, why, started=False, evidence=Evidence.NONE
            )

        # 4. Dispatch, and the result. From here what the page loads and sends is this
        # action's (its own loads were allowed with it; anything else is judged anew).
        watch = self._watches.get(session.session_id)
        urls = [resource.url, *(e.url for e in resource.effects)]
        net = watch.begin(
            action_id,
            spec.idempotency_key,
            decision.lease_epoch,
            urls,
            writes=(resource.verb or spec.kind.verb) in _WRITES,
            read_only=read_only,
            idempotency_header=decision.idempotency_header,
            decision_id=decision.decision_id,
        ) if watch is not None else None  # fmt: skip
        try:
            response = await self._dispatch_and_finish(session, spec, action_id, decision, net, batch, read_only)
        except BaseException:
            if watch is not None and net is not None:
                watch.abandon(net)  # no result of this process: recovery makes it UNKNOWN
            raise
        if watch is not None and net is not None:
            watch.finished(net, self._outcomes.result_seq(action_id), response.result.outcome)
        await self._fault.hit("after-result", spec.idempotency_key)
        return response

    async def _dispatch_and_finish(
        self,
        session: Session,
        spec: ActionSpec,
        action_id: str,
        decision: Decision,
        net: ActionNetwork | None,
        batch: bool,
        read_only: bool,
    ) -> ActResponse:
        timeout_ms = spec.timeout_ms or DEFAULT_ACTION_TIMEOUT_MS
        try:
            dispatched = await session.backend.dispatch(spec, timeout_ms)
        except Exception as exc:  # the intent is durable: whatever broke, record the outcome
            log.exception("dispatch of %s failed unexpectedly", action_id)
            dispatched = DispatchResult(DispatchStatus.MAYBE_STARTED, f"the backend failed mid-action: {exc}")
        await self._fault.hit("after-dispatch", spec.idempotency_key)
        if read_only and dispatched.status is DispatchStatus.MAYBE_STARTED:
            # A GET changes nothing on the server: a read that did not finish simply failed.
            dispatched = DispatchResult(DispatchStatus.PARTIAL, f"the read did not finish: {dispatched.message}")
        if dispatched.status is not DispatchStatus.DONE:
            return await self._not_done(session, spec, action_id, decision, dispatched, net)

        # 5. Re-observe, and what proves it; the network says whether it is known to be done.
        new_obs: Observation | None = None
        gone = ""
        if not batch and not spec.skip_reobserve:
            await session.backend.settle(SETTLE_TIMEOUT_MS)
            if net is not None:
                await net.quiet(timeout_ms / 1000)
        lost = [] if net is None or read_only else net.lost()
        pending = [] if net is None or read_only or batch or spec.skip_reobserve else net.pending()
        if not (lost or pending) and not batch and not spec.skip_reobserve:
            try:
                new_obs = await self._observer.observe(session)
            except TargetGoneError as exc:  # the action closed its own target: it still happened
                gone = f"; {exc}"
        if lost or pending:  # as any UNKNOWN: no re-observation, the agent observes to reconcile
            what = "; ".join([*lost, *pending])
            response = await self._outcomes.finish(
                session,
                spec,
                action_id,
                decision,
                Outcome.UNKNOWN,
                Reason.ALLOW,
                f"the outcome is unknown: {what}: the server may have processed it; observe and reconcile",
                started=True,
                evidence=Evidence.NONE,
                via=dispatched.via,
            )
            return response
        evidence, message = await self._evidence(session, spec, new_obs is not None)
        message += gone
        if dispatched.message:
            message = f"{message}; {dispatched.message}"
        if net is not None and net.blocked:
            message = f"{message}; " + "; ".join(net.blocked)
        response = await self._outcomes.finish(
            session,
            spec,
            action_id,
            decision,
            Outcome.DONE,
            Reason.ALLOW,
            message,
            started=True,
            evidence=evidence,
            typed_chars=dispatched.typed_chars,
            via=dispatched.via,
        )
        return ActResponse(response.result, new_obs)

    async def _not_done(
        self,
        session: Session,
        spec: ActionSpec,
        action_id: str,
        decision: Decision,
        dispatched: DispatchResult,
        net: ActionNetwork | None = None,
    ) -> ActResponse:
        """The result of a dispatch that did not return DONE: FAILED, or UNKNOWN."""
        finish = self._outcomes.finish
        if net is not None and net.blocked:
            dispatched = replace(dispatched, message=f"{dispatched.message}; " + "; ".join(net.blocked))
        if dispatched.status is DispatchStatus.NOT_STARTED:
            return await finish(
                session,
                spec,
                action_id,
                decision,
                Outcome.FAILED,
                dispatched.reason or Reason.ALLOW,
                _prefixed("not dispatched: ", dispatched.message),
                started=False,
                evidence=Evidence.NONE,
            )
        if dispatched.status is DispatchStatus.PARTIAL:
            return await finish(
                session,
                spec,
                action_id,
                decision,
                Outcome.FAILED,
                dispatched.reason or Reason.ALLOW,
                dispatched.message,
                started=True,
                evidence=Evidence.DISPATCH_RETURNED,
                typed_chars=dispatched.typed_chars,
            )
        return await finish(  # MAYBE_STARTED: it may have happened
            session,
            spec,
            action_id,
            decision,
            Outcome.UNKNOWN,
            Reason.ALLOW,
            f"the outcome is unknown: {dispatched.message}; observe and reconcile",
            started=True,
            evidence=Evidence.NONE,
            via=dispatched.via,
        )

    # -- checks ---------------------------------------------------------------------------

    def _resolve_cited(self, session: Session, spec: ActionSpec) -> RefInfo | None:
        """The cited observation must exist; a cited ref must be one it produced."""
        sid, _, gen = spec.observation_id.partition(":")
        if sid != session.session_id or not gen.isdigit() or not 1 <= int(gen) <= session.generation:
            raise NotFoundError("observation_id", f"no observation {spec.observation_id!r} in this session")
        if not spec.ref:
            return None
        if int(gen) not in session.recent_elements:
            return None  # too old to know its refs: refused as stale by _check_fresh
        info = session.ref_info(int(gen), spec.ref)
        if info is None:
            raise NotFoundError("ref", f"{spec.ref!r} is not a ref of observation {spec.observation_id}")
        return info

    def _end_of(self, session: Session, spec: ActionSpec) -> RefInfo | None:
        """A drag by ref's drop target: a ref of the same observation as the start's."""
        if not spec.to_ref:
            return None
        gen = int(spec.observation_id.rpartition(":")[2])
        if gen not in session.recent_elements:
            return None  # too old to know its refs: refused as stale by _check_fresh
        info = session.ref_info(gen, spec.to_ref)
        if info is None:
            raise NotFoundError("to_ref", f"{spec.to_ref!r} is not a ref of observation {spec.observation_id}")
        return info

    def _bind_point(self, session: Session, spec: ActionSpec) -> tuple[ActionSpec, RefInfo | None]:
        """A browser point: the element the cited observation had under it (``_points``).

        From here the action cites that element's ref and is checked, decided and recorded
        as a ref action on it. An observation that is not the latest is left unbound: the
        freshness check refuses it.
        """
        obs = session.latest
        gen = int(spec.observation_id.rpartition(":")[2])
        elements = session.recent_elements.get(gen)
        if obs is None or obs.observation_id != spec.observation_id or elements is None:
            return spec, None
        binding = bind_point(obs, elements, spec)
        return binding.spec, RefInfo.of(binding.element) if binding.element is not None else None

    async def _check_fresh(self, session: Session, spec: ActionSpec, info: RefInfo | None) -> tuple[Reason, str] | None:
        obs = session.latest
        if obs is None or obs.observation_id != spec.observation_id:
            latest = obs.observation_id if obs else "none"
            stale = f"observation {spec.observation_id} is not the latest ({latest}); observe again"
            return Reason.STALE_OBSERVATION, stale
        fence = session.fence
        if obs.lease_epoch != fence.epoch or obs.lease_epoch < fence.highest_epoch:
            if fence.human_holds and await self._leases.human_holds_now(session):
                return Reason.HELD_BY_HUMAN, f"a person has taken control of {session.target} since the observation"
            return Reason.STALE_OBSERVATION, (
                f"observation {obs.observation_id} was taken under lease epoch {obs.lease_epoch}; "
                f"the lease has changed since (epoch {fence.highest_epoch}); observe again"
            )
        refusal = await session.backend.check_fresh(obs, spec, info)
        if refusal is not None:
            return refusal.reason, f"{refusal.message}; observe again"
        return None

    # -- the decision -----------------------------------------------------------------------

    async def _decide(
        self, session: Session, spec: ActionSpec, action_id: str, target: RefInfo | None, fingerprint: str
    ) -> tuple[Decision, AuthzResource] | ActResponse:
        """The sidecar's allow for this action (and each of its effects), or the refusal.

        An action that needs approval is held until an operator decides, boundedly; then
        it is all checked again: the page may have changed while the operator looked.
        """
        refuse = self._outcomes.refuse
        end = self._end_of(session, spec)
        resource = await session.backend.describe(spec, target)
        session.note_action(  # what an operator deciding an approval sees (the console)
            action_id,
            {**spec.ledger_params(*((target.role, target.name) if target else ("", ""))), "url": resource.url},
        )
        lost = (session.session_id, spec.idempotency_key, fingerprint)
        checked_as = self._lost.take(*lost, action_id)  # a retry of an action whose answer was lost
        try:
            decision = await self._check(session, spec, checked_as, resource, fingerprint)
            if decision.reason == Reason.APPROVAL_REQUIRED and decision.approval_id and spec.approval_wait_ms:
                approval = await self._await_approval(decision.approval_id, spec.approval_wait_ms)
                if approval == ApprovalStatus.APPROVED:
                    refusal = await self._check_fresh(session, spec, target)
                    if refusal is not None:
                        return await refuse(session, spec, action_id, target, *refusal)
                if approval != ApprovalStatus.PENDING:  # the sidecar's answer now: allow, denied or expired
                    decision = await self._check(session, spec, checked_as, resource, fingerprint)
            if decision.allow:
                decision = await check_effects(self._authz, session, spec, checked_as, resource, decision)
            if decision.allow and end is not None:
                decision = await check_end(self._authz, session, spec, checked_as, resource, end, decision)
        except AuthzError as exc:
            if isinstance(exc, AuthzUnavailableError):  # an allow may have been committed, unheard
                self._lost.lost(*lost, checked_as)
            return await refuse(session, spec, action_id, target, Reason.AUTHZ_UNAVAILABLE, str(exc))
        self._leases.saw_decision(session, decision)
        if not decision.allow:
            return await refuse(session, spec, action_id, target, decision.reason, decision.message, decision)
        return decision, resource

    async def _check(
        self, session: Session, spec: ActionSpec, action_id: str, resource: AuthzResource, fingerprint: str
    ) -> Decision:
        """Ask the sidecar about this exact action, under the cited observation's epoch.

        An approval binds to the action's fingerprint together with the target and the
        cited observation: approved once, it allows this action and no other.
        """
        obs = session.latest
        assert obs is not None
        approval_fp = hashlib.sha256(f"{session.target}\x00{obs.observation_id}\x00{fingerprint}".encode()).hexdigest()
        return await self._authz.check(
            session.agent,
            session.target,
            obs.lease_epoch,
            resource.verb or spec.kind.verb,
            url=resource.url,
            element_role=resource.element_role,
            element_name=resource.element_name,
            password_field=resource.password_field,
            window_class=resource.window_class,
            window_title=resource.window_title,
            action_id=action_id,
            fingerprint=approval_fp,
            observation_id=obs.observation_id,
            context=element_context(resource),
            document_load=resource.document_load,
            approval_asked=spec.approval_asked,
        )

    async def _await_approval(self, approval_id: str, wait_ms: int) -> str:
        """Poll the approval until it is decided or ``wait_ms`` passes; return its status."""
        deadline = time.monotonic() + wait_ms / 1000
        status: str = ApprovalStatus.PENDING
        while time.monotonic() < deadline:
            status = (await self._authz.get_approval(approval_id)).status
            if status != ApprovalStatus.PENDING:
                return status
            await asyncio.sleep(min(0.1, max(0.0, deadline - time.monotonic())))
        return status

    # -- reads and evidence ---------------------------------------------------------------------

    async def _wait(self, session: Session, spec: ActionSpec, action_id: str, batch: bool) -> ActResponse:
        """A bounded wait: a read, so no authz check and no ledger intent."""
        dispatched = await session.backend.dispatch(spec, spec.timeout_ms or DEFAULT_ACTION_TIMEOUT_MS)
        done = dispatched.status is DispatchStatus.DONE
        obs = None if batch else await self._observer.observe(session)
        result = ActionResult(
            action_id=action_id,
            outcome=Outcome.DONE if done else Outcome.FAILED,
            reason=Reason.ALLOW,
            message="the wait condition holds" if done else f"the wait timed out: {dispatched.message}",
            execution_started=False,
            evidence=Evidence.VERIFIED if done else Evidence.OBSERVED,
            idempotency_key=spec.idempotency_key,
        )
        return ActResponse(result, obs)

    async def _evidence(self, session: Session, spec: ActionSpec, observed: bool) -> tuple[Evidence, str]:
        base = Evidence.OBSERVED if observed else Evidence.DISPATCH_RETURNED
        what = "the surface was re-observed" if observed else "the dispatch returned"
        if not spec.expect:
            return base, f"done; {what}"
        gen = int(spec.observation_id.rpartition(":")[2])
        field = spec.expect.field_ref
        named = session.ref_info(gen, field) if field else None
        holds, why = await session.backend.expectation_holds(spec.expect, {field: named} if named else {})
        if not holds:
            return base, f"done, but the expectation did not hold: {why}"
        return Evidence.VERIFIED, "done; the expectation holds"
