"""The guarded loop: observe -> check -> act -> re-observe, for every write action.

``GuardedExecutor`` is the core the gRPC servicer wraps. Checks run cheapest first and
each refusal carries its own reason code; nothing is dispatched unless every gate passed,
the intent is durable in the ledger, and the lease epoch is still the newest one seen.
An action whose outcome is unknown blocks every further write on its target until it is
reconciled against the real state.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace

from handrail.authz import AsyncAuthzClient, AuthzError, AuthzUnavailableError, Decision, WatchEventInfo
from handrail.executor._backend import Backend, DispatchResult, DispatchStatus, ObserveOptions, RawObservation
from handrail.executor._errors import InvalidArgumentError, NotFoundError, SessionClosedError
from handrail.executor._faults import Fault, NoFault
from handrail.executor._models import (
    ActionResult,
    ActionSpec,
    ActResponse,
    BackendKind,
    BatchResult,
    DesktopTarget,
    Evidence,
    Observation,
    Outcome,
    Reason,
    SessionInfo,
    Verdict,
)
from handrail.executor._session import Session, Sessions, token_digest
from handrail.executor._snapshot import RefInfo, make_diff
from handrail.recorder import Ledger

log = logging.getLogger(__name__)

DEFAULT_ACTION_TIMEOUT_MS = 5_000
SETTLE_TIMEOUT_MS = 3_000
LEASE_TTL_MS = 30_000
_FULL = ObserveOptions()


@dataclass(frozen=True)
class OpenSpec:
    """What a backend factory needs to open a session's surface."""

    backend: BackendKind
    target: str = ""  # the lease target the session controls
    start_url: str = ""
    desktop: DesktopTarget | None = None


@dataclass(frozen=True)
class UnknownAction:
    """An action that may have happened: it blocks its target until reconciled."""

    action_id: str
    session_id: str
    agent: str
    idempotency_key: str


BackendFactory = Callable[[OpenSpec], Awaitable[Backend]]


def _now_ms() -> int:
    return int(time.time() * 1000)


def _digest(raw: RawObservation) -> str:
    h = hashlib.sha256()
    parts = (raw.url, raw.title, raw.snapshot, raw.active_tab, repr(raw.dialogs), repr(raw.desktop))
    for part in parts:
        h.update(part.encode())
        h.update(b"\x00")
    return h.hexdigest()


class GuardedExecutor:
    """Sessions on backends, each write passing every gate of the loop.

    Args:
        authz: the sidecar client, authenticated as this executor.
        ledger: the action ledger (intent before dispatch, result after).
        open_backend: makes a backend surface for a new session.
        lease_ttl_ms: the lease TTL asked for on behalf of each session's agent.
        fault: an injected fault (crash matrix, scenarios); None in normal operation.
    """

    def __init__(
        self,
        authz: AsyncAuthzClient,
        ledger: Ledger,
        open_backend: BackendFactory,
        *,
        lease_ttl_ms: int = LEASE_TTL_MS,
        fault: Fault | None = None,
    ) -> None:
        self._authz = authz
        self._ledger = ledger
        self._open_backend = open_backend
        self._lease_ttl_ms = lease_ttl_ms
        self._fault: Fault | NoFault = fault or NoFault()
        self.sessions = Sessions()
        # target -> action id -> the UNKNOWN action blocking it
        self._unknown: dict[str, dict[str, UnknownAction]] = {}
        # The sidecar's Watch stream: while it is up, lease changes are pushed to the
        # fences at once; while it is down, each write asks for the lease instead.
        self._watch_live = False
        self._watcher: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Recover the ledger: intents without results become UNKNOWN, never retried."""
        for rec in self._ledger.recover():
            log.warning("action %s of %s had no result: now UNKNOWN", rec.action_id, rec.session_id)
        for open_ in self._ledger.unresolved():
            self._block(
                open_.target,
                UnknownAction(open_.action_id, open_.session_id, open_.principal, open_.idempotency_key),
            )
        self._watcher = asyncio.create_task(self._watch_forever())

    async def _watch_forever(self) -> None:
        delay = 0.2
        while True:
            try:
                async for event in self._authz.watch((), on_established=self._watch_up):
                    delay = 0.2
                    self._on_event(event)
            except AuthzError as exc:
                log.info("watch on the sidecar ended: %s", exc)
            finally:
                self._watch_live = False
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)

    def _watch_up(self) -> None:
        self._watch_live = True

    def _on_event(self, event: WatchEventInfo) -> None:
        """A lease change: fence it at once, and record it for the targets we drive."""
        lease = event.lease
        if event.kind != "lease" or lease is None:
            return
        open_here = [s for s in self.sessions.all() if s.target == event.target]
        if not open_here:
            return
        fence = open_here[0].fence  # one fence per target: held epochs end here
        fence.saw_lease(lease.epoch, lease.holder_kind)
        if event.change in ("renew", "resync"):
            return
        kind = {"human": "human", "agent": "agent"}.get(lease.holder_kind, "system")
        self._ledger.lease_change(
            event.target,
            event.change,
            lease.holder or "-",
            kind,  # type: ignore[arg-type]
            lease.epoch,
            session_id=open_here[0].session_id,
            detail={"holder_kind": lease.holder_kind, "next_holder": lease.next_holder},
        )

    def _block(self, target: str, action: UnknownAction) -> None:
        self._unknown.setdefault(target, {})[action.action_id] = action

    def unknown_actions(self, target: str) -> list[UnknownAction]:
        return list(self._unknown.get(target, {}).values())

    # -- sessions -----------------------------------------------------------------------

    async def authenticate(self, token: str) -> str:
        """The agent principal a bearer token belongs to, as the sidecar says."""
        principal, role = await self._authz.who_am_i(token=token)
        if role != "agent":
            raise InvalidArgumentError("authorization", f"{principal} is a {role}, not an agent")
        return principal

    async def open_session(self, *, token: str, agent: str, target: str, spec: OpenSpec) -> SessionInfo:
        principal = await self.authenticate(token)
        if agent and agent != principal:
            raise InvalidArgumentError("agent", f"the token belongs to {principal!r}, not {agent!r}")
        backend = await self._open_backend(spec)
        session = Session(
            session_id=Sessions.new_id(),
            target=target,
            agent=principal,
            token_hash=token_digest(token),
            backend=backend,
            fence=self.sessions.fence(target),
        )
        self.sessions.add(session)
        await self._acquire(session)
        self._ledger.append(
            "session_open",
            session_id=session.session_id,
            principal=principal,
            epoch=session.fence.epoch,
            body={"target": target, "backend": spec.backend.value, "start_url": spec.start_url},
        )
        session.renewer = asyncio.create_task(self._renew_forever(session))
        return SessionInfo(session.session_id, target, principal, session.fence.epoch)

    async def close_session(self, session: Session) -> None:
        session.closed = True
        self.sessions.remove(session.session_id)
        if session.renewer is not None:
            session.renewer.cancel()
        if session.fence.held_epoch is not None and not any(s.target == session.target for s in self.sessions.all()):
            with contextlib.suppress(AuthzError):
                await self._authz.release(session.target, session.fence.held_epoch, holder=session.agent)
            session.fence.lose()
        await session.backend.close()
        self._ledger.append("session_close", session_id=session.session_id, principal=session.agent)

    async def close(self) -> None:
        if self._watcher is not None:
            self._watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watcher
        for session in self.sessions.all():
            await self.close_session(session)

    async def _acquire(self, session: Session) -> None:
        """Take the target's lease for the session's agent, if the sidecar gives it."""
        fence = session.fence
        try:
            lease = await self._authz.acquire(session.target, holder=session.agent, ttl_ms=self._lease_ttl_ms)
        except AuthzError as exc:
            log.info("lease for %s not acquired: %s", session.target, exc)
            with contextlib.suppress(AuthzError):
                fence.saw((await self._authz.get_lease(session.target)).epoch)
            return
        fence.hold(lease.epoch)

    async def _renew_forever(self, session: Session) -> None:
        fence = session.fence
        while not session.closed:
            await asyncio.sleep(self._lease_ttl_ms / 3000)
            held = fence.held_epoch
            if held is None:
                continue
            try:
                lease = await self._authz.renew(session.target, held, holder=session.agent, ttl_ms=self._lease_ttl_ms)
                fence.saw(lease.epoch)
            except AuthzUnavailableError:
                continue  # the lease may lapse; writes are refused meanwhile
            except AuthzError as exc:
                log.info("lease on %s lost: %s", session.target, exc)
                fence.lose()

    # -- observe ------------------------------------------------------------------------

    async def observe(self, session: Session, options: ObserveOptions = _FULL, *, diff: bool = False) -> Observation:
        if session.fence.held_epoch is None:
            await self._acquire(session)  # after a hand-back the agent may take it again
        raw = await session.backend.observe(options)
        previous = session.latest_full_snapshot
        session.generation += 1
        obs = Observation(
            observation_id=f"{session.session_id}:{session.generation}",
            session_id=session.session_id,
            generation=session.generation,
            lease_epoch=session.fence.epoch,
            url=raw.url,
            title=raw.title,
            snapshot=raw.snapshot,
            digest=_digest(raw),
            taken_at_ms=_now_ms(),
            screenshot_png=raw.screenshot_png,
            screenshot_scale=raw.screenshot_scale,
            tabs=raw.tabs,
            active_tab=raw.active_tab,
            frames=raw.frames,
            dialogs=raw.dialogs,
            viewport_width=raw.viewport_width,
            viewport_height=raw.viewport_height,
            mutation_counter=raw.mutation_counter,
            desktop=raw.desktop,
        )
        session.latest = obs
        session.latest_full_snapshot = raw.snapshot
        session.remember(session.generation, raw.snapshot)
        if diff and previous is not None:
            return replace(obs, snapshot="", is_diff=True, diff=make_diff(previous, raw.snapshot))
        return obs

    # -- act ----------------------------------------------------------------------------

    async def act(self, session: Session, spec: ActionSpec) -> ActResponse:
        async with session.write_lock:
            return await self._act(session, spec, batch=False)

    async def act_batch(self, session: Session, specs: list[ActionSpec]) -> BatchResult:
        """Run actions in order; stop at the first that is not DONE.

        Every action cites the same observation; between actions nothing is re-observed,
        so any navigation, dialog or change to the next target since that observation
        refuses the next action and ends the batch.
        """
        async with session.write_lock:
            results: list[ActionResult] = []
            stop_reason = ""
            for i, spec in enumerate(specs):
                if i and session.latest is not None:
                    # Did the last action change the page's structure (navigation, a
                    # dialog, another tab)? Then nothing after it is tried.
                    changed = await session.backend.check_fresh(session.latest, spec, None)
                    if changed is not None:
                        stop_reason = f"action {i - 1} changed the surface: {changed.message}"
                        break
                response = await self._act(session, spec, batch=True)
                results.append(response.result)
                if response.result.outcome is not Outcome.DONE:
                    r = response.result
                    stop_reason = f"action {len(results) - 1} ended {r.outcome.value}"
                    named = r.reason and r.reason != Reason.ALLOW
                    stop_reason += f" {r.reason}: {r.message}" if named else f": {r.message}"
                    break
            ran_any = any(r.execution_started for r in results)
            observation = None
            if ran_any:
                await session.backend.settle(SETTLE_TIMEOUT_MS)
                observation = await self.observe(session)
            not_started = tuple(range(len(results), len(specs)))
            return BatchResult(tuple(results), not_started, stop_reason, observation)

    async def _act(self, session: Session, spec: ActionSpec, *, batch: bool) -> ActResponse:
        if session.closed:
            raise SessionClosedError(f"session {session.session_id} is closed")
        action_id = "a_" + secrets.token_hex(8)
        target_info = self._resolve_cited(session, spec)
        role, name = (target_info.role, target_info.name) if target_info else ("", "")
        fingerprint = spec.fingerprint(role, name)

        if spec.kind.is_read:
            return await self._wait(session, spec, action_id, batch)
        # Idempotency first: a repeated key never dispatches again.
        repeat = self._repeat(session, spec, fingerprint)
        if repeat is not None:
            return ActResponse(repeat)
        blocking = self._unknown.get(session.target)
        if blocking:
            ids = ", ".join(sorted(blocking))
            return self._refuse(
                session,
                spec,
                action_id,
                target_info,
                Reason.RECONCILE_REQUIRED,
                f"the outcome of {ids} on {session.target} is unknown; observe the real state and reconcile it first",
            )

        refusal = await self._check_fresh(session, spec, target_info)
        if refusal is not None:
            return self._refuse(session, spec, action_id, target_info, *refusal)
        obs = session.latest
        assert obs is not None  # _check_fresh refused otherwise

        try:
            decision = await self._decide(session, spec, action_id, target_info, fingerprint)
            # Hold an action that needs approval until an operator decides, boundedly; then
            # check it all again: the page may have changed while the operator looked.
            if decision.reason == Reason.APPROVAL_REQUIRED and decision.approval_id and spec.approval_wait_ms:
                approval = await self._await_approval(decision.approval_id, spec.approval_wait_ms)
                if approval == "APPROVED":
                    refusal = await self._check_fresh(session, spec, target_info)
                    if refusal is not None:
                        return self._refuse(session, spec, action_id, target_info, *refusal)
                if approval != "PENDING":  # the sidecar's answer now: allow, denied or expired
                    decision = await self._decide(session, spec, action_id, target_info, fingerprint)
        except AuthzError as exc:
            return self._refuse(session, spec, action_id, target_info, Reason.AUTHZ_UNAVAILABLE, f"authz: {exc}")
        session.fence.saw(decision.lease_epoch)
        session.fence.human_holds = decision.reason == Reason.HELD_BY_HUMAN
        if not decision.allow:
            if decision.reason in (Reason.STALE_EPOCH, Reason.HELD_BY_HUMAN, Reason.NO_LEASE):
                session.fence.lose()
            return self._refuse(session, spec, action_id, target_info, decision.reason, decision.message, decision)

        await self._fault.hit("before-intent", spec.idempotency_key)
        # The intent is durable before anything reaches the surface.
        params = spec.ledger_params(role, name)
        params["fingerprint"] = fingerprint
        params["decision_id"] = decision.decision_id
        self._ledger.intent(
            session.session_id,
            action_id,
            spec.idempotency_key,
            session.agent,
            obs.lease_epoch,
            params,
        )
        await self._fault.hit("after-intent", spec.idempotency_key)

        # The fence: a lease change seen since the decision wins over it.
        await self._refresh_fence(session)
        if obs.lease_epoch < session.fence.highest_epoch or session.fence.held_epoch != obs.lease_epoch:
            return self._finish(
                session,
                spec,
                action_id,
                decision,
                Outcome.REFUSED,
                Reason.STALE_EPOCH,
                f"lease epoch {obs.lease_epoch} was superseded (epoch {session.fence.highest_epoch}); not dispatched",
                started=False,
                evidence=Evidence.NONE,
            )

        try:
            dispatched = await session.backend.dispatch(spec, spec.timeout_ms or DEFAULT_ACTION_TIMEOUT_MS)
        except Exception as exc:  # the intent is durable: whatever broke, record the outcome
            log.exception("dispatch of %s failed unexpectedly", action_id)
            dispatched = DispatchResult(DispatchStatus.MAYBE_STARTED, f"the backend failed mid-action: {exc}")
        await self._fault.hit("after-dispatch", spec.idempotency_key)
        status = dispatched.status
        if status is DispatchStatus.NOT_STARTED:
            return self._finish(
                session,
                spec,
                action_id,
                decision,
                Outcome.FAILED,
                dispatched.reason or Reason.ALLOW,
                f"not dispatched: {dispatched.message}",
                started=False,
                evidence=Evidence.NONE,
            )
        if status is DispatchStatus.PARTIAL:
            return self._finish(
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
        if status is DispatchStatus.MAYBE_STARTED:
            self._block(
                session.target,
                UnknownAction(action_id, session.session_id, session.agent, spec.idempotency_key),
            )
            return self._finish(
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

        new_obs: Observation | None = None
        if not batch and not spec.skip_reobserve:
            await session.backend.settle(SETTLE_TIMEOUT_MS)
            new_obs = await self.observe(session)
        evidence, message = await self._evidence(session, spec, new_obs is not None)
        response = self._finish(
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
        await self._fault.hit("after-result", spec.idempotency_key)
        return ActResponse(response.result, new_obs)

    async def _decide(
        self, session: Session, spec: ActionSpec, action_id: str, target: RefInfo | None, fingerprint: str
    ) -> Decision:
        """Ask the sidecar about this exact action, under the cited observation's epoch.

        An approval binds to the action's fingerprint together with the target and the
        cited observation: approved once, it allows this action and no other.
        """
        obs = session.latest
        assert obs is not None
        resource = await session.backend.describe(spec, target)
        approval_fp = hashlib.sha256(f"{session.target}\x00{obs.observation_id}\x00{fingerprint}".encode()).hexdigest()
        return await self._authz.check(
            session.agent,
            session.target,
            obs.lease_epoch,
            spec.kind.verb,
            url=resource.url,
            element_role=resource.element_role,
            element_name=resource.element_name,
            password_field=resource.password_field,
            window_class=resource.window_class,
            window_title=resource.window_title,
            action_id=action_id,
            fingerprint=approval_fp,
            observation_id=obs.observation_id,
        )

    async def _await_approval(self, approval_id: str, wait_ms: int) -> str:
        """Poll the approval until it is decided or ``wait_ms`` passes; return its status."""
        deadline = time.monotonic() + wait_ms / 1000
        status = "PENDING"
        while time.monotonic() < deadline:
            status = (await self._authz.get_approval(approval_id)).status
            if status != "PENDING":
                return status
            await asyncio.sleep(min(0.1, max(0.0, deadline - time.monotonic())))
        return status

    async def _refresh_fence(self, session: Session) -> None:
        """Learn of any lease change right before dispatch.

        Without a live Watch stream from the sidecar, ask for the lease; if the sidecar
        cannot say, the fence treats the lease as lost (fail-closed).
        """
        if self._watching(session.target):
            return
        try:
            lease = await self._authz.get_lease(session.target)
        except AuthzError:
            session.fence.lose()
            return
        session.fence.saw(lease.epoch)
        if lease.holder_kind != "agent" or lease.holder != session.agent:
            session.fence.lose()

    def _watching(self, target: str) -> bool:
        return self._watch_live

    async def _wait(self, session: Session, spec: ActionSpec, action_id: str, batch: bool) -> ActResponse:
        """A bounded wait: a read, so no authz check and no ledger intent."""
        dispatched = await session.backend.dispatch(spec, spec.timeout_ms or DEFAULT_ACTION_TIMEOUT_MS)
        done = dispatched.status is DispatchStatus.DONE
        obs = None if batch else await self.observe(session)
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

    def _resolve_cited(self, session: Session, spec: ActionSpec) -> RefInfo | None:
        """The cited observation must exist; a cited ref must be one it produced."""
        sid, _, gen = spec.observation_id.partition(":")
        if sid != session.session_id or not gen.isdigit() or not 1 <= int(gen) <= session.generation:
            raise NotFoundError("observation_id", f"no observation {spec.observation_id!r} in this session")
        if not spec.ref:
            return None
        if int(gen) not in session.recent_snapshots:
            return None  # too old to know its refs: refused as stale by _check_fresh
        info = session.ref_info(int(gen), spec.ref)
        if info is None:
            raise NotFoundError("ref", f"{spec.ref!r} is not a ref of observation {spec.observation_id}")
        return info

    async def _check_fresh(self, session: Session, spec: ActionSpec, info: RefInfo | None) -> tuple[str, str] | None:
        obs = session.latest
        if obs is None or obs.observation_id != spec.observation_id:
            latest = obs.observation_id if obs else "none"
            stale = f"observation {spec.observation_id} is not the latest ({latest}); observe again"
            return Reason.STALE_OBSERVATION, stale
        if obs.lease_epoch != session.fence.epoch or obs.lease_epoch < session.fence.highest_epoch:
            if session.fence.human_holds and await self._human_holds_now(session):
                return Reason.HELD_BY_HUMAN, f"a person has taken control of {session.target} since the observation"
            return Reason.STALE_OBSERVATION, (
                f"observation {obs.observation_id} was taken under lease epoch {obs.lease_epoch}; "
                f"the lease has changed since (epoch {session.fence.highest_epoch}); observe again"
            )
        refusal = await session.backend.check_fresh(obs, spec, info)
        if refusal is not None:
            return refusal.reason, f"{refusal.message}; observe again"
        return None

    async def _human_holds_now(self, session: Session) -> bool:
        """Whether a person still holds the lease, as the sidecar says now.

        The fence learns of a takeover and of the hand-back after it one pushed event at a
        time; an action that comes in between is refused either way, but with the reason
        that is true now (a person holds it, or it was handed back and the observation is
        merely stale), so that the agent neither waits for a person who has gone nor acts
        while one is there. Without an answer from the sidecar the person is taken to hold it.
        """
        try:
            lease = await self._authz.get_lease(session.target)
        except AuthzError:
            return True
        session.fence.saw_lease(lease.epoch, lease.holder_kind)
        return session.fence.human_holds

    def _repeat(self, session: Session, spec: ActionSpec, fingerprint: str) -> ActionResult | None:
        """The recorded outcome of an earlier action with this idempotency key, if any."""
        intent = self._ledger.find_intent_by_key(session.session_id, spec.idempotency_key)
        if intent is None:
            return None
        key = spec.idempotency_key
        if intent.body.get("params", {}).get("fingerprint") != fingerprint:
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
            body = reconciled[-1].body
            return ActionResult(
                action_id=intent.action_id,
                outcome=Outcome.RECONCILED,
                reason=Reason.ALLOW,
                message=f"reconciled earlier as {body.get('verdict')}: {body.get('evidence', '')}; nothing dispatched",
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
        body = result.body
        return ActionResult(
            action_id=result.action_id,
            outcome=Outcome(body["outcome"]),
            reason=str(body.get("reason", "")),
            message="recorded outcome of an earlier action with this key; nothing dispatched",
            execution_started=bool(body.get("execution_started")),
            evidence=Evidence(body.get("evidence", Evidence.NONE.value)),
            idempotency_key=key,
            decision_id=str(body.get("extra", {}).get("decision_id", "")),
        )

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

    # -- reconcile ----------------------------------------------------------------------

    async def reconcile(self, session: Session, action_id: str, verdict: Verdict, evidence: str) -> ActionResult:
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

    # -- ledger -------------------------------------------------------------------------

    def _refuse(
        self,
        session: Session,
        spec: ActionSpec,
        action_id: str,
        info: RefInfo | None,
        reason: str,
        message: str,
        decision: Decision | None = None,
    ) -> ActResponse:
        """A refusal before the intent: logged, but it does not consume the key."""
        role, name = (info.role, info.name) if info else ("", "")
        policies = list(decision.policies) if decision else []
        self._ledger.append(
            "refusal",
            session_id=session.session_id,
            action_id=action_id,
            idempotency_key=spec.idempotency_key,
            principal=session.agent,
            epoch=session.latest.lease_epoch if session.latest else 0,
            body={
                "kind": spec.kind.value,
                "ref": spec.ref,
                "role": role,
                "name": name,
                "url": spec.url,
                "reason": reason,
                "message": message,
                "decision_id": decision.decision_id if decision else "",
                "policies": policies,
            },
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

    def _finish(
        self,
        session: Session,
        spec: ActionSpec,
        action_id: str,
        decision: Decision,
        outcome: Outcome,
        reason: str,
        message: str,
        *,
        started: bool,
        evidence: Evidence,
        typed_chars: int = 0,
        via: str = "",
    ) -> ActResponse:
        extra: dict[str, object] = {"decision_id": decision.decision_id}
        if typed_chars:
            extra["typed_chars"] = typed_chars
        if via:
            extra["via"] = via
        self._ledger.result(
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
