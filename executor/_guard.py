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
without the sidecar.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from handrail._vocabulary import Verdict
from handrail.authz import AsyncAuthzClient
from handrail.executor._act import DEFAULT_ACTION_TIMEOUT_MS, SETTLE_TIMEOUT_MS, ActPath
from handrail.executor._backend import Backend, ObserveOptions
from handrail.executor._console import ConsoleDesk
from handrail.executor._errors import InvalidArgumentError
from handrail.executor._faults import FaultPoint, NoFault
from handrail.executor._lease import LEASE_TTL_MS, LeaseKeeper
from handrail.executor._models import (
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
from handrail.recorder import Ledger, SessionOpenBody

__all__ = [
    "DEFAULT_ACTION_TIMEOUT_MS",
    "LEASE_TTL_MS",
    "SETTLE_TIMEOUT_MS",
    "BackendFactory",
    "GuardedExecutor",
    "OpenSpec",
    "UnknownAction",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class OpenSpec:
    """What a backend factory needs to open a session's surface."""

    backend: BackendKind
    target: str = ""  # the lease target the session controls
    start_url: str = ""
    desktop: DesktopTarget | None = None


BackendFactory = Callable[[OpenSpec], Awaitable[Backend]]


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
        fault: FaultPoint | None = None,
    ) -> None:
        self._authz = authz
        self._ledger = ledger
        self._open_backend = open_backend
        self.sessions = Sessions()
        self._leases = LeaseKeeper(authz, ledger, self.sessions, ttl_ms=lease_ttl_ms)
        self._outcomes = Outcomes(ledger)
        self._observer = Observer(self._leases)
        self._acts = ActPath(authz, self._leases, self._outcomes, self._observer, fault or NoFault())
        self.console = ConsoleDesk(authz, ledger, self.sessions, self._leases, self._outcomes)

    async def start(self) -> None:
        """Recover the ledger (intents without results become UNKNOWN), then watch leases."""
        self._outcomes.recover()
        self._leases.start()

    async def close(self) -> None:
        await self._leases.close()
        for session in self.sessions.all():
            await self.close_session(session)

    @property
    def watching_leases(self) -> bool:
        """Whether the sidecar's Watch stream is up: lease changes reach the fences at once."""
        return self._leases.watching("")

    def unknown_actions(self, target: str) -> list[UnknownAction]:
        """The actions whose outcome is unknown on ``target``, blocking its writes."""
        return self._outcomes.unknown_actions(target)

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
        await self._leases.acquire(session)
        self._ledger.append(
            "session_open",
            session_id=session.session_id,
            principal=principal,
            epoch=session.fence.epoch,
            body=SessionOpenBody(target=target, backend=spec.backend.value, start_url=spec.start_url),
        )
        self._leases.keep(session)
        return SessionInfo(session.session_id, target, principal, session.fence.epoch)

    async def close_session(self, session: Session) -> None:
        session.closed = True
        self.sessions.remove(session.session_id)
        await self._leases.release(session, self.sessions.all())
        await session.backend.close()
        self._ledger.append("session_close", session_id=session.session_id, principal=session.agent)

    # -- the loop -------------------------------------------------------------------------

    async def observe(self, session: Session, options: ObserveOptions = FULL, *, diff: bool = False) -> Observation:
        return await self._observer.observe(session, options, diff=diff)

    async def act(self, session: Session, spec: ActionSpec) -> ActResponse:
        return await self._acts.act(session, spec)

    async def act_batch(self, session: Session, specs: list[ActionSpec]) -> BatchResult:
        return await self._acts.act_batch(session, specs)

    async def reconcile(self, session: Session, action_id: str, verdict: Verdict, evidence: str) -> ActionResult:
        """Record what the real state shows of an UNKNOWN action on the session's target."""
        return self._outcomes.reconcile(session, action_id, verdict, evidence)
