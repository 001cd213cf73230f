"""The guarded loop: observe -> check -> act -> re-observe, for every write action.

``GuardedExecutor`` is the core the gRPC servicer wraps, and a façade over the parts of
the loop, each one concept:

- ``Sessions`` (``_session``): the open sessions, and one lease fence per target;
- ``LeaseKeeper`` (``_lease``): lease upkeep — acquire, renew, watch, fence;
- ``Observer`` (``_observe``): observations, with the id and epoch actions cite;
- ``ActPath`` (``_act``): a write through every gate — check (cheapest first, each
  refusal with its own reason code), decide (the authz sidecar), intent (durable in the
  ledger), fence (the lease epoch is still the newest one seen), dispatch, result;
- ``Outcomes`` (``_outcomes``): the records of actions — idempotent replay and conflict,
  results, and the UNKNOWN actions that block every further write on their target until
  they are reconciled against the real state.

Nothing is dispatched unless every gate passed. Reads (observing, bounded waits) go on
without the sidecar, and without the ledger: every ledger call runs on the ledger's own
thread (``AsyncLedger``), awaited only by the call that needs it, so a ledger that stalls
stalls those calls alone, not the other sessions, the lease upkeep or the health check.
What stays atomic across those awaits is said in ``_outcomes``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from handrail._vocabulary import Reason, Verb, Verdict
from handrail.authz import AsyncAuthzClient, AuthzError, AuthzUnavailableError, Decision
from handrail.executor._act import SETTLE_TIMEOUT_MS, ActPath
from handrail.executor._backend import Backend, ObserveOptions
from handrail.executor._console import ConsoleDesk
from handrail.executor._errors import (
    BackendError,
    ExecutorError,
    InvalidArgumentError,
    LeaseHeldError,
    PermissionDeniedError,
    ScopeRefusedError,
)
from handrail.executor._faults import FaultPoint, NoFault
from handrail.executor._lease import LEASE_TTL_MS, LeaseKeeper
from handrail.executor._models import (
    DEFAULT_ACTION_TIMEOUT_MS,
    ActionResult,
    ActionSpec,
    ActResponse,
    BackendKind,
    BatchResult,
    DesktopTarget,
    Observation,
    SessionInfo,
)
from handrail.executor._observe import FULL, Observer
from handrail.executor._outcomes import Outcomes, UnknownAction
from handrail.executor._session import Session, Sessions, token_digest
from handrail.executor._watch import SessionWatch
from handrail.recorder import AsyncLedger, Ledger, NavigationBody, SessionCloseBody, SessionOpenBody

__all__ = [
    "DEFAULT_ACTION_TIMEOUT_MS",
    "DEFAULT_SESSION_TTL_MS",
    "LEASE_TTL_MS",
    "MAX_SESSION_TTL_MS",
    "MIN_SESSION_TTL_MS",
    "SETTLE_TIMEOUT_MS",
    "BackendFactory",
    "GuardedExecutor",
    "OpenSpec",
    "UnknownAction",
]

log = logging.getLogger(__name__)

#: A session's TTL when its agent names none, and the bounds of what it may name (ms).
DEFAULT_SESSION_TTL_MS = 600_000
MIN_SESSION_TTL_MS = 1_000
MAX_SESSION_TTL_MS = 86_400_000

_START_TIMEOUT_MS = 15_000


@dataclass(frozen=True)
class OpenSpec:
    """What a backend factory needs to open a session's surface."""

    backend: BackendKind
    target: str = ""  # the lease target the session controls
    start_url: str = ""
    desktop: DesktopTarget | None = None
    session_ttl_ms: int = 0  # 0: DEFAULT_SESSION_TTL_MS


BackendFactory = Callable[[OpenSpec], Awaitable[Backend]]


class GuardedExecutor:
    """Sessions on backends, each write passing every gate of the loop.

    Args:
        authz: the sidecar client, authenticated as this executor.
        ledger: the action ledger (intent before dispatch, result after). A ``Ledger`` is
            wrapped in an ``AsyncLedger`` (its calls on a thread of their own); either way
            :meth:`close` drains and stops that thread, and the ledger's opener closes it.
        open_backend: makes a backend surface for a new session.
        lease_ttl_ms: the lease TTL asked for on behalf of each session's agent.
        fault: an injected fault (crash matrix, scenarios); None in normal operation.
    """

    def __init__(
        self,
        authz: AsyncAuthzClient,
        ledger: Ledger | AsyncLedger,
        open_backend: BackendFactory,
        *,
        lease_ttl_ms: int = LEASE_TTL_MS,
        fault: FaultPoint | None = None,
    ) -> None:
        self._authz = authz
        self._ledger = ledger if isinstance(ledger, AsyncLedger) else AsyncLedger(ledger)
        ledger = self._ledger
        self._open_backend = open_backend
        self.sessions = Sessions()
        self._leases = LeaseKeeper(authz, ledger, self.sessions, ttl_ms=lease_ttl_ms)
        self._outcomes = Outcomes(ledger)
        self._observer = Observer(self._leases)
        self._watches: dict[str, SessionWatch] = {}
        self._acts = ActPath(authz, self._leases, self._outcomes, self._observer, fault or NoFault(), self._watches)
        self.console = ConsoleDesk(authz, ledger, self.sessions, self._leases, self._outcomes, self._watches)
        self._reaper: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Recover the ledger (intents without results become UNKNOWN), then watch leases
        and close the sessions whose agents are gone."""
        await self._outcomes.recover()
        self._leases.start()
        self._reaper = asyncio.create_task(self._reap_forever())

    async def close(self) -> None:
        if self._reaper is not None:
            self._reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reaper
        await self._acts.drain()  # an act whose caller went away still writes its result
        await self._leases.close()
        for session in self.sessions.all():
            await self.close_session(session, reason="shutdown")
        await self._ledger.aclose()  # every record queued so far written, then the thread ends

    async def _reap_forever(self) -> None:
        while True:
            await asyncio.sleep(0.25)
            await self.reap()

    async def reap(self) -> list[str]:
        """Close every session with no call within its TTL (and no Attach stream open);
        return their ids."""
        now = time.monotonic()
        gone = [s for s in self.sessions.all() if not s.closed and s.idle_for(now) * 1000 > s.ttl_ms]
        for session in gone:
            log.info(
                "session %s of %s: no call within %d ms, closing it", session.session_id, session.agent, session.ttl_ms
            )
            try:
                await self.close_session(session, reason="ttl")
            except Exception:  # one session's surface failing to close must not stop the reaper
                log.exception("closing idle session %s failed", session.session_id)
        return [s.session_id for s in gone]

    @property
    def watching_leases(self) -> bool:
        """Whether the sidecar's Watch stream is up: lease changes reach the fences at once."""
        return self._leases.watching("")

    def unknown_actions(self, target: str) -> list[UnknownAction]:
        """The actions whose outcome is unknown on ``target``, blocking its writes."""
        return self._outcomes.unknown_actions(target)

    # -- sessions -----------------------------------------------------------------------

    async def authenticate(self, token: str) -> str:
        """The agent principal a bearer token belongs to, as the sidecar says.

        Raises:
            PermissionDeniedError: the token is another role's.
            AuthzError: the sidecar refused the token (UNAUTHENTICATED) or did not answer.
        """
        principal, role = await self._authz.who_am_i(token=token)
        if role != "agent":
            raise PermissionDeniedError(f"{principal} is a {role}, not an agent: only agents open sessions")
        return principal

    async def session_for(self, session_id: str, token: str) -> tuple[Session, asyncio.Task[None]]:
        """The open session ``session_id`` of the token's agent, and the check of the token.

        The token is checked with the sidecar on every call (the returned task: await it
        before answering), so a revoked or expired agent is refused (UNAUTHENTICATED) on
        its very next call; the check runs beside the call's own work, which costs no
        latency (a write is refused by the sidecar's own check of the agent anyway). While
        the sidecar cannot answer, the token that opened the session still reads it.
        Another agent's session is NOT_FOUND, exactly like an unknown one; an unknown
        token is UNAUTHENTICATED first.
        """
        auth = asyncio.create_task(self._check_token(token))
        try:
            session = self.sessions.get(session_id, token)
        except ExecutorError:
            await auth
            raise
        return session, auth

    async def _check_token(self, token: str) -> None:
        # Let the call's own first step go first: an Observe's snapshot request is on its
        # way to the browser before this call's gRPC send takes the event loop.
        await asyncio.sleep(0)
        with contextlib.suppress(AuthzUnavailableError):
            await self._authz.who_am_i(token=token)

    async def open_session(self, *, token: str, agent: str, target: str, spec: OpenSpec) -> SessionInfo:
        """Open a session for the token's agent, holding the target's lease if it can, and
        load its start page if it names one.

        The start page is a document load like any other: judged by the sidecar (a
        navigate, on a granted origin) before it leaves the browser. Refused, the session
        is closed again and ``ScopeRefusedError`` says why.

        Raises:
            PermissionDeniedError: the token is not an agent's.
            InvalidArgumentError: ``agent`` names someone else.
            LeaseHeldError: another agent holds the target's lease.
            ScopeRefusedError: the sidecar refused the start page (OUT_OF_SCOPE ...).
        """
        principal = await self.authenticate(token)
        if agent and agent != principal:
            raise InvalidArgumentError("agent", f"the token belongs to {principal!r}, not {agent!r}")
        ttl_ms = spec.session_ttl_ms or DEFAULT_SESSION_TTL_MS
        if not MIN_SESSION_TTL_MS <= ttl_ms <= MAX_SESSION_TTL_MS:
            raise InvalidArgumentError(
                "session_ttl_ms", f"must be within {MIN_SESSION_TTL_MS}..{MAX_SESSION_TTL_MS} (0 means the default)"
            )
        await self._refuse_if_held_by_another(target, principal)
        backend = await self._open_backend(spec)
        session = Session(
            session_id=Sessions.new_id(),
            target=target,
            agent=principal,
            token_hash=token_digest(token),
            backend=backend,
            fence=self.sessions.fence(target).view(principal),
            ttl_ms=ttl_ms,
        )
        session.attached += 1  # opening is a call in progress: no TTL runs out meanwhile
        try:
            return await self._open(session, spec, target, principal, ttl_ms)
        finally:
            session.attached -= 1
            session.touch()

    async def _open(self, session: Session, spec: OpenSpec, target: str, principal: str, ttl_ms: int) -> SessionInfo:
        backend = session.backend
        self.sessions.add(session)
        why = await self._leases.acquire(session)
        if why is Reason.NO_LEASE:
            await self._refuse_if_held_by_another(target, principal, session)
        await self._ledger.append(
            "session_open",
            session_id=session.session_id,
            principal=principal,
            epoch=session.fence.epoch,
            body=SessionOpenBody(target=target, backend=spec.backend.value, start_url=spec.start_url),
        )
        self._leases.keep(session)
        watch = SessionWatch(session, self._authz, self._outcomes, self._ledger)
        self._watches[session.session_id] = watch
        backend.listen(watch)
        if spec.start_url and spec.start_url != "about:blank":  # the blank tab is there already
            await self._start(session, watch, spec.start_url, why)
        held = session.fence.held_epoch
        return SessionInfo(
            session.session_id, target, principal, held or 0, "" if held is not None else (why or ""), ttl_ms
        )

    async def _start(self, session: Session, watch: SessionWatch, url: str, no_lease: str | None) -> None:
        """Judge the start page, then load it; close the session if either fails.

        A session that holds no lease (``no_lease`` says why) opens on its blank tab: its
        start page is not loaded (nothing loads unjudged, and no check passes without the
        lease), which the ledger records; it observes, and navigates once it holds the lease.
        """
        if session.fence.held_epoch is None:
            await self._record_start(session, url, Decision(False, str(no_lease or Reason.NO_LEASE), "no lease held"))
            return
        try:
            decision = await self._authz.check(
                session.agent, session.target, session.fence.epoch, Verb.NAVIGATE, url=url, document_load=True
            )
        except AuthzError:
            await self.close_session(session, reason="start_unjudged")
            raise
        await self._record_start(session, url, decision)
        if not decision.allow:
            await self.close_session(session, reason="start_refused")
            raise ScopeRefusedError(decision.reason, f"start_url {url}: {decision.message}")
        start = watch.starting(url)
        try:
            await session.backend.start(url, _START_TIMEOUT_MS)
        except BackendError:
            await self.close_session(session, reason="start_failed")
            raise
        finally:
            watch.abandon(start)

    async def _record_start(self, session: Session, url: str, decision: Decision) -> None:
        await self._ledger.append(
            NavigationBody.KIND,
            session_id=session.session_id,
            principal=session.agent,
            epoch=session.fence.epoch,
            body=NavigationBody(
                url=url,
                method="GET",
                tab_id="",
                cause="start",
                verb=Verb.NAVIGATE.value,
                allowed=decision.allow,
                reason=decision.reason,
                message=decision.message,
                decision_id=decision.decision_id,
            ),
        )

    async def _refuse_if_held_by_another(self, target: str, agent: str, opened: Session | None = None) -> None:
        """LeaseHeldError when another agent holds ``target``'s lease now (closing ``opened``)."""
        try:
            lease = await self._authz.get_lease(target)
        except AuthzError:
            return  # reads may go on without the sidecar; writes are refused anyway
        if lease.holder_kind == "agent" and lease.holder != agent:
            if opened is not None:
                self.sessions.remove(opened.session_id)
                opened.closed = True
                await opened.backend.close()
            raise LeaseHeldError(f"another agent holds the lease on {target!r}; try again when it is free")

    async def close_session(self, session: Session, reason: str = "") -> None:
        """Close a session: its lease goes back, its surface closes, the ledger says so
        (``reason``: why, when its agent did not ask)."""
        session.closed = True
        self.sessions.remove(session.session_id)
        self._watches.pop(session.session_id, None)
        await self._leases.release(session, self.sessions.all())
        await session.backend.close()
        try:
            await self._ledger.append(
                "session_close",
                session_id=session.session_id,
                principal=session.agent,
                body=SessionCloseBody(reason),
            )
        finally:
            session.tell(None)  # ends the session's Attach streams, recorded or not

    # -- the loop -------------------------------------------------------------------------

    async def observe(self, session: Session, options: ObserveOptions = FULL, *, diff: bool = False) -> Observation:
        return await self._observer.observe(session, options, diff=diff)

    async def act(self, session: Session, spec: ActionSpec) -> ActResponse:
        return await self._acts.act(session, spec)

    async def act_batch(self, session: Session, specs: list[ActionSpec]) -> BatchResult:
        return await self._acts.act_batch(session, specs)

    async def reconcile(self, session: Session, action_id: str, verdict: Verdict, evidence: str) -> ActionResult:
        """Record what the real state shows of an UNKNOWN action on the session's target."""
        return await self._outcomes.reconcile(session, action_id, verdict, evidence)
