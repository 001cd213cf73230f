"""The guarded loop: observe -> check -> act -> re-observe, for every write action.

``GuardedExecutor`` is the core the gRPC servicer wraps. Checks run cheapest first and
each refusal carries its own reason code; nothing is dispatched unless every gate passed,
the intent is durable in the ledger, and the lease epoch is still the newest one seen.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import re
import secrets
import time
from collections.abc import Awaitable, Callable

from handrail.authz import AsyncAuthzClient, AuthzError, AuthzUnavailableError, Decision
from handrail.executor._backend import Backend, DispatchStatus
from handrail.executor._errors import InvalidArgumentError, NotFoundError
from handrail.executor._models import (
    ALLOW,
    AUTHZ_UNAVAILABLE,
    IDEMPOTENCY_CONFLICT,
    RECONCILE_REQUIRED,
    STALE_EPOCH,
    STALE_OBSERVATION,
    STALE_REF,
    ActionResult,
    ActionSpec,
    ActResponse,
    Evidence,
    Observation,
    Outcome,
    SessionInfo,
)
from handrail.executor._session import Session, Sessions, token_digest
from handrail.executor._snapshot import RefInfo, parse_refs
from handrail.recorder import Ledger

log = logging.getLogger(__name__)

DEFAULT_ACTION_TIMEOUT_MS = 5_000
MAX_ACTION_TIMEOUT_MS = 60_000
SETTLE_TIMEOUT_MS = 3_000
LEASE_TTL_MS = 30_000

BackendFactory = Callable[[str], Awaitable[Backend]]


def _now_ms() -> int:
    return int(time.time() * 1000)


def _digest(url: str, title: str, snapshot: str) -> str:
    h = hashlib.sha256()
    for part in (url, title, snapshot):
        h.update(part.encode())
        h.update(b"\x00")
    return h.hexdigest()


class GuardedExecutor:
    """Sessions on a backend, each write passing every gate of the loop.

    Args:
        authz: the sidecar client, authenticated as this executor.
        ledger: the action ledger (intent before dispatch, result after).
        open_backend: makes a backend surface for a new session from its start URL.
        lease_ttl_ms: the lease TTL asked for on behalf of each session's agent.
    """

    def __init__(
        self,
        authz: AsyncAuthzClient,
        ledger: Ledger,
        open_backend: BackendFactory,
        *,
        lease_ttl_ms: int = LEASE_TTL_MS,
    ) -> None:
        self._authz = authz
        self._ledger = ledger
        self._open_backend = open_backend
        self._lease_ttl_ms = lease_ttl_ms
        self.sessions = Sessions()

    # -- sessions -----------------------------------------------------------------------

    async def authenticate(self, token: str) -> str:
        """The agent principal a bearer token belongs to, as the sidecar says."""
        principal, role = await self._authz.who_am_i(token=token)
        if role != "agent":
            raise InvalidArgumentError("authorization", f"{principal} is a {role}, not an agent")
        return principal

    async def open_session(
        self, *, token: str, agent: str, target: str, start_url: str
    ) -> SessionInfo:
        principal = await self.authenticate(token)
        if agent and agent != principal:
            raise InvalidArgumentError(
                "agent", f"the token belongs to {principal!r}, not {agent!r}"
            )
        backend = await self._open_backend(start_url)
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
            body={"target": target, "start_url": start_url},
        )
        session.renewer = asyncio.create_task(self._renew_forever(session))
        return SessionInfo(session.session_id, target, principal, session.fence.epoch)

    async def close_session(self, session: Session) -> None:
        session.closed = True
        self.sessions.remove(session.session_id)
        if session.renewer is not None:
            session.renewer.cancel()
        if session.fence.held_epoch is not None:
            with contextlib.suppress(AuthzError):
                await self._authz.release(
                    session.target, session.fence.held_epoch, holder=session.agent
                )
            session.fence.lose()
        await session.backend.close()
        self._ledger.append("session_close", session_id=session.session_id, principal=session.agent)

    async def close(self) -> None:
        for session in self.sessions.all():
            await self.close_session(session)

    async def _acquire(self, session: Session) -> None:
        """Take the target's lease for the session's agent, if the sidecar gives it."""
        fence = session.fence
        try:
            lease = await self._authz.acquire(
                session.target, holder=session.agent, ttl_ms=self._lease_ttl_ms
            )
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
                lease = await self._authz.renew(
                    session.target, held, holder=session.agent, ttl_ms=self._lease_ttl_ms
                )
                fence.saw(lease.epoch)
            except AuthzUnavailableError:
                continue  # the lease may lapse; writes are refused meanwhile
            except AuthzError as exc:
                log.info("lease on %s lost: %s", session.target, exc)
                fence.lose()

    # -- observe ------------------------------------------------------------------------

    async def observe(self, session: Session, *, screenshot: bool = False) -> Observation:
        if session.fence.held_epoch is None:
            await self._acquire(session)  # after a hand-back the agent may take it again
        raw = await session.backend.observe(screenshot=screenshot)
        session.generation += 1
        obs = Observation(
            observation_id=f"{session.session_id}:{session.generation}",
            session_id=session.session_id,
            generation=session.generation,
            lease_epoch=session.fence.epoch,
            url=raw.url,
            title=raw.title,
            snapshot=raw.snapshot,
            digest=_digest(raw.url, raw.title, raw.snapshot),
            taken_at_ms=_now_ms(),
            screenshot_png=raw.screenshot_png,
        )
        session.latest = obs
        session.remember_refs(session.generation, parse_refs(raw.snapshot))
        session.latest_structure = raw.structure_version
        return obs

    # -- act ----------------------------------------------------------------------------

    async def act(self, session: Session, spec: ActionSpec) -> ActResponse:
        async with session.write_lock:
            return await self._act(session, spec)

    async def _act(self, session: Session, spec: ActionSpec) -> ActResponse:
        action_id = "a_" + secrets.token_hex(8)
        target_info = self._resolve_cited(session, spec)
        role, name = (target_info.role, target_info.name) if target_info else ("", "")
        fingerprint = spec.fingerprint(role, name)

        # Idempotency first: a repeated key never dispatches again.
        repeat = self._repeat(session, spec, fingerprint)
        if repeat is not None:
            return ActResponse(repeat)
        if session.blocked_by:
            return self._refuse(
                session,
                spec,
                action_id,
                target_info,
                RECONCILE_REQUIRED,
                f"action {session.blocked_by} has an unknown outcome; reconcile it first",
            )

        refusal = await self._check_fresh(session, spec, target_info)
        if refusal is not None:
            return self._refuse(session, spec, action_id, target_info, *refusal)

        obs = session.latest
        assert obs is not None  # _check_fresh refused otherwise
        url = spec.url if spec.kind.value == "navigate" else session.backend.current_url()
        try:
            decision = await self._authz.check(
                session.agent,
                session.target,
                obs.lease_epoch,
                spec.kind.verb,
                url=url,
                element_role=role,
                element_name=name,
                action_id=action_id,
            )
        except AuthzError as exc:
            return self._refuse(
                session, spec, action_id, target_info, AUTHZ_UNAVAILABLE, f"authz: {exc}"
            )
        session.fence.saw(decision.lease_epoch)
        if not decision.allow:
            if decision.reason in ("STALE_EPOCH", "HELD_BY_HUMAN", "NO_LEASE"):
                session.fence.lose()
            return self._refuse(
                session, spec, action_id, target_info, decision.reason, decision.message, decision
            )

        # The intent is durable before anything reaches the page.
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

        # The fence: a takeover seen since the decision wins over it.
        if obs.lease_epoch < session.fence.highest_epoch:
            return self._finish(
                session,
                spec,
                action_id,
                Outcome.REFUSED,
                STALE_EPOCH,
                f"lease epoch {obs.lease_epoch} was superseded by {session.fence.highest_epoch}",
                False,
                Evidence.NONE,
                decision,
            )

        timeout = spec.timeout_ms or DEFAULT_ACTION_TIMEOUT_MS
        dispatched = await session.backend.dispatch(spec, timeout)
        if dispatched.status is DispatchStatus.NOT_STARTED:
            return self._finish(
                session,
                spec,
                action_id,
                Outcome.FAILED,
                ALLOW,
                f"not dispatched: {dispatched.message}",
                False,
                Evidence.NONE,
                decision,
            )
        if dispatched.status is DispatchStatus.MAYBE_STARTED:
            session.blocked_by = action_id
            return self._finish(
                session,
                spec,
                action_id,
                Outcome.UNKNOWN,
                ALLOW,
                f"the outcome is unknown: {dispatched.message}",
                True,
                Evidence.NONE,
                decision,
            )

        await session.backend.settle(SETTLE_TIMEOUT_MS)
        new_obs = await self.observe(session)
        evidence, message = await self._evidence(session, spec, new_obs)
        response = self._finish(
            session, spec, action_id, Outcome.DONE, ALLOW, message, True, evidence, decision
        )
        return ActResponse(response.result, new_obs)

    def _resolve_cited(self, session: Session, spec: ActionSpec) -> RefInfo | None:
        """The cited observation must exist; a cited ref must be one it produced."""
        sid, _, gen = spec.observation_id.partition(":")
        if sid != session.session_id or not gen.isdigit():
            raise NotFoundError(
                "observation_id", f"no observation {spec.observation_id!r} in this session"
            )
        if int(gen) > session.generation or int(gen) < 1:
            raise NotFoundError(
                "observation_id", f"no observation {spec.observation_id!r} in this session"
            )
        if not spec.kind.needs_ref:
            return None
        refs = session.recent_refs.get(int(gen))
        if refs is None:
            return None  # too old to know its refs: refused as stale by _check_fresh
        info = refs.get(spec.ref)
        if info is None:
            raise NotFoundError(
                "ref", f"{spec.ref!r} is not a ref of observation {spec.observation_id}"
            )
        return info

    async def _check_fresh(
        self, session: Session, spec: ActionSpec, info: RefInfo | None
    ) -> tuple[str, str] | None:
        obs = session.latest
        if obs is None or obs.observation_id != spec.observation_id:
            latest = obs.observation_id if obs else "none"
            return (
                STALE_OBSERVATION,
                f"observation {spec.observation_id} is not the latest ({latest}); observe again",
            )
        if obs.lease_epoch != session.fence.epoch or obs.lease_epoch < session.fence.highest_epoch:
            return STALE_OBSERVATION, (
                f"observation {obs.observation_id} was taken under lease epoch {obs.lease_epoch}, "
                f"the lease has changed since (epoch {session.fence.highest_epoch}); observe again"
            )
        if session.backend.structure_version() != session.latest_structure:
            return (
                STALE_OBSERVATION,
                f"the page navigated since observation {obs.observation_id}; observe again",
            )
        if info is not None:
            problem = await session.backend.check_target(info)
            if problem is not None:
                return STALE_REF, f"{problem}; observe again"
        return None

    def _repeat(self, session: Session, spec: ActionSpec, fingerprint: str) -> ActionResult | None:
        """The recorded outcome of an earlier action with this idempotency key, if any."""
        intent = self._ledger.find_intent_by_key(session.session_id, spec.idempotency_key)
        if intent is None:
            return None
        if intent.body.get("params", {}).get("fingerprint") != fingerprint:
            return ActionResult(
                action_id=intent.action_id,
                outcome=Outcome.REFUSED,
                reason=IDEMPOTENCY_CONFLICT,
                message=f"idempotency key {spec.idempotency_key!r} was used by action "
                f"{intent.action_id} with other parameters",
                execution_started=False,
                evidence=Evidence.NONE,
                idempotency_key=spec.idempotency_key,
            )
        result = self._ledger.find_result_by_key(session.session_id, spec.idempotency_key)
        if result is None:  # an intent that never got a result: in flight or crashed
            return ActionResult(
                action_id=intent.action_id,
                outcome=Outcome.UNKNOWN,
                reason=ALLOW,
                message="this key's action has no recorded result; its outcome is unknown",
                execution_started=True,
                evidence=Evidence.NONE,
                idempotency_key=spec.idempotency_key,
            )
        body = result.body
        return ActionResult(
            action_id=result.action_id,
            outcome=Outcome(body["outcome"]),
            reason=str(body.get("reason", "")),
            message="recorded outcome of an earlier action with this key; nothing dispatched",
            execution_started=bool(body.get("execution_started")),
            evidence=Evidence(body.get("evidence", Evidence.NONE.value)),
            idempotency_key=spec.idempotency_key,
            decision_id=str(body.get("extra", {}).get("decision_id", "")),
        )

    async def _evidence(
        self, session: Session, spec: ActionSpec, obs: Observation
    ) -> tuple[Evidence, str]:
        expect = spec.expect
        if not expect:
            return Evidence.OBSERVED, "done; the page was re-observed"
        failures = []
        if expect.url_matches and not re.search(expect.url_matches, obs.url):
            failures.append(f"URL {obs.url} does not match {expect.url_matches!r}")
        if expect.text_visible and not await session.backend.text_visible(expect.text_visible):
            failures.append(f"text {expect.text_visible!r} is not visible")
        if failures:
            return Evidence.OBSERVED, "done, but the expectation did not hold: " + "; ".join(
                failures
            )
        return Evidence.VERIFIED, "done; the expectation holds on the re-observation"

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
                "policies": list(decision.policies) if decision else [],
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
            )
        )

    def _finish(
        self,
        session: Session,
        spec: ActionSpec,
        action_id: str,
        outcome: Outcome,
        reason: str,
        message: str,
        started: bool,
        evidence: Evidence,
        decision: Decision,
    ) -> ActResponse:
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
            {"decision_id": decision.decision_id},
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
            )
        )
