"""Lease upkeep: the control lease of every target the executor drives.

The executor acquires a target's lease for the agent of a session that opens on it,
renews it while the session is open and releases it when that agent's last session on
the target closes. A lease change is written to the ledger once per target (with no
session id: every session's timeline of the target shows it) and told to the sessions'
Attach streams. It keeps, per target, a ``LeaseFence`` (``_session``): the highest epoch it has
seen, the epoch its agent holds, and whether a person holds the newest lease. Lease
changes reach the fences two ways: pushed by the sidecar's ``Watch`` stream while it is
up (so a session learns of them early), and by asking the sidecar right before each
dispatch, whatever the stream says. Whatever the sidecar cannot confirm counts as lost
(fail-closed).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass

from handrail._vocabulary import Reason
from handrail.authz import (
    RESYNC_SEQ,
    AsyncAuthzClient,
    AuthzError,
    AuthzUnavailableError,
    Decision,
    LeaseInfo,
    PermissionDeniedError,
    WatchEventInfo,
)
from handrail.executor._models import Observation
from handrail.executor._session import Session, Sessions
from handrail.recorder import AsyncLedger, LedgerError

log = logging.getLogger(__name__)

LEASE_TTL_MS = 30_000
# A refusal for one of these says the agent does not hold the lease (any more).
_LOST = (Reason.STALE_EPOCH, Reason.HELD_BY_HUMAN, Reason.NO_LEASE)


@dataclass(frozen=True)
class LeaseNews:
    """A lease change told to a session's Attach streams."""

    epoch: int
    human_holds: bool
    message: str


class LeaseKeeper:
    """Acquires, renews, watches and fences the leases of the executor's sessions.

    Args:
        authz: the sidecar client, authenticated as this executor.
        ledger: where lease changes seen on a driven target are recorded.
        sessions: the registry of open sessions (whose targets the watch records).
        ttl_ms: the lease TTL asked for on behalf of each session's agent.
    """

    def __init__(self, authz: AsyncAuthzClient, ledger: AsyncLedger, sessions: Sessions, *, ttl_ms: int) -> None:
        self._authz = authz
        self._ledger = ledger
        self._sessions = sessions
        self._ttl_ms = ttl_ms
        # The sidecar's Watch stream: while it is up, lease changes are pushed to the
        # fences at once; while it is down, each write asks for the lease instead.
        self._watch_live = False
        self._watcher: asyncio.Task[None] | None = None
        # Called with every lease change pushed for a target with an open session (after
        # its fence saw it): the console's requests for a person follow the lease here.
        self.listeners: list[Callable[[str, LeaseInfo], None]] = []

    # -- the watch ------------------------------------------------------------------------

    def start(self) -> None:
        """Start watching the sidecar's lease changes (reconnecting until ``close``)."""
        self._watcher = asyncio.create_task(self._watch_forever())

    async def close(self) -> None:
        if self._watcher is not None:
            self._watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watcher

    def watching(self, target: str) -> bool:
        """Whether lease changes of ``target`` are being pushed to its fence now."""
        return self._watch_live

    async def _watch_forever(self) -> None:
        delay = 0.2
        # The first stream starts from now. After a lost stream, the next resumes from the
        # last event (on any replica); if none came yet, 0 would be "from now" again and drop
        # what changed while no stream was up (a takeover the fence then never hears of, once
        # the live stream makes it stop asking): RESYNC_SEQ asks for each lease as it is now.
        since = 0
        while True:
            try:
                async for event in self._authz.watch((), since, on_established=self._watch_up):
                    delay = 0.2
                    since = event.seq if since == RESYNC_SEQ else max(since, event.seq)
                    try:
                        self._on_event(event)
                    except Exception:  # a bug in a listener: it must not end the watch of every target
                        log.exception("a lease change of %s could not be handled", event.target)
            except AuthzError as exc:
                log.info("watch on the sidecar ended: %s", exc)
            finally:
                self._watch_live = False
            since = since or RESYNC_SEQ
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)

    def _watch_up(self) -> None:
        self._watch_live = True

    def _on_event(self, event: WatchEventInfo) -> None:
        """A lease change: fence it at once, and record it for the targets we drive."""
        lease = event.lease
        if event.kind != "lease" or lease is None:
            return
        open_here = [s for s in self._sessions.all() if s.target == event.target]
        if not open_here:
            return
        fence = open_here[0].fence  # one fence per target: held epochs end here
        fence.saw_lease(lease.epoch, lease.holder_kind)
        for listener in self.listeners:
            listener(event.target, lease)
        if event.change in ("renew", "resync"):
            return
        kind = {"human": "human", "agent": "agent"}.get(lease.holder_kind, "system")
        # Once per target, under no session: each session's timeline of the target reads it.
        # Queued, not awaited: the watch goes on while the ledger writes it (it lands in the
        # chain where it was queued), and a ledger that cannot take it (its database gone,
        # stalled) costs that record, logged, not the watch: before, the error ended the
        # watch task, and no lease change was told or recorded again.
        try:
            self._ledger.post(
                self._ledger.ledger.lease_change,
                event.target,
                event.change,
                lease.holder or "-",
                kind,  # type: ignore[arg-type]
                lease.epoch,
                detail={"holder_kind": lease.holder_kind, "next_holder": lease.next_holder},
            )
        except LedgerError as exc:
            log.warning(
                "the %s of %s at epoch %d is not in the ledger: %s", event.change, event.target, lease.epoch, exc
            )
        news = LeaseNews(lease.epoch, lease.holder_kind == "human", f"{event.change}: {lease.holder or 'free'}")
        for session in open_here:
            session.tell(news)

    # -- a session's lease ------------------------------------------------------------------

    async def acquire(self, session: Session) -> Reason | None:
        """Take the target's lease for the session's agent, if the sidecar gives it.

        Returns:
            None when the agent holds it now; else why not: OUT_OF_SCOPE (no live grant),
            HELD_BY_HUMAN, NO_LEASE (another agent holds it, or it is reserved for one),
            AUTHZ_UNAVAILABLE.
        """
        fence = session.fence
        try:
            lease = await self._authz.acquire(session.target, holder=session.agent, ttl_ms=self._ttl_ms)
        except AuthzError as exc:
            log.info("lease for %s not acquired: %s", session.target, exc)
            if isinstance(exc, AuthzUnavailableError):
                return Reason.AUTHZ_UNAVAILABLE
            try:
                current = await self._authz.get_lease(session.target)
            except AuthzError:
                return Reason.AUTHZ_UNAVAILABLE
            fence.saw_lease(current.epoch, current.holder_kind)
            if isinstance(exc, PermissionDeniedError):
                return Reason.OUT_OF_SCOPE
            return Reason.HELD_BY_HUMAN if current.holder_kind == "human" else Reason.NO_LEASE
        fence.hold(lease.epoch)
        return None

    def keep(self, session: Session) -> None:
        """Renew the session's lease, a third of its TTL at a time, while the session is open."""
        session.renewer = asyncio.create_task(self._renew_forever(session))

    async def _renew_forever(self, session: Session) -> None:
        fence = session.fence
        while not session.closed:
            await asyncio.sleep(self._ttl_ms / 3000)
            held = fence.held_epoch
            if held is None:
                continue
            try:
                lease = await self._authz.renew(session.target, held, holder=session.agent, ttl_ms=self._ttl_ms)
                fence.saw(lease.epoch)
            except AuthzUnavailableError:
                continue  # the lease may lapse; writes are refused meanwhile
            except AuthzError as exc:
                log.info("lease on %s lost: %s", session.target, exc)
                fence.lose()

    async def release(self, session: Session, still_open: list[Session]) -> None:
        """Stop renewing; give the lease back unless another open session of the same agent
        rides on it."""
        if session.renewer is not None:
            session.renewer.cancel()
        same = [s for s in still_open if s.target == session.target and s.agent == session.agent]
        if session.fence.held_epoch is not None and not same:
            with contextlib.suppress(AuthzError):
                await self._authz.release(session.target, session.fence.held_epoch, holder=session.agent)
            session.fence.lose()

    # -- the fence --------------------------------------------------------------------------

    def saw_decision(self, session: Session, decision: Decision) -> None:
        """What a decision says of the lease: its epoch, a person holding it, or its loss."""
        session.fence.saw(decision.lease_epoch)
        session.fence.human_holds = decision.reason == Reason.HELD_BY_HUMAN
        if not decision.allow and decision.reason in _LOST:
            session.fence.lose()

    async def fenced(self, session: Session, cited: Observation) -> tuple[Reason, str] | None:
        """The fence, right before dispatch: why not to dispatch an action that cites
        ``cited``, or None when its lease stands.

        A lease change seen since the decision wins over it (STALE_EPOCH). The sidecar is
        asked every time, live Watch or not: a stream is only as current as its replica,
        and a takeover made through another replica reaches it later (its NOTIFY, its
        listener), or not before keepalive finds a stopped replica (about 2 s), in which
        time the decision would be dispatched under a person. If the sidecar cannot say,
        the lease counts as lost (fail-closed) and the refusal is AUTHZ_UNAVAILABLE, naming
        it. Left: a change committed between this read and the dispatch.
        """
        fence = session.fence
        try:
            lease = await self._authz.get_lease(session.target)
        except AuthzError as exc:
            fence.lose()
            return (
                Reason.AUTHZ_UNAVAILABLE,
                f"the lease of {session.target} could not be confirmed: {exc}; not dispatched",
            )
        fence.saw_lease(lease.epoch, lease.holder_kind)  # a person's: said as such
        if lease.holder_kind != "agent" or lease.holder != session.agent:
            fence.lose()
        elif lease.epoch == cited.lease_epoch == fence.highest_epoch and fence.held_epoch is None:
            # Taken as lost while the sidecar could not be asked (an outage): it says the
            # agent holds it still, at the cited epoch, so no one else has since (every
            # other holder bumps the epoch). Held again, and renewed again.
            fence.hold(lease.epoch)
        if cited.lease_epoch < fence.highest_epoch or fence.held_epoch != cited.lease_epoch:
            now = (
                f"{lease.holder_kind or 'no one'} {lease.holder}".strip() if lease.epoch >= fence.highest_epoch else ""
            )
            held = f", held by {now}" if now else ""
            return Reason.STALE_EPOCH, (
                f"lease epoch {cited.lease_epoch} was superseded (epoch {fence.highest_epoch}{held}); not dispatched"
            )
        return None

    async def human_holds_now(self, session: Session) -> bool:
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
