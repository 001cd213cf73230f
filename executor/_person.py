"""An agent asks for a person: the request, and the wait for the hand-back.

An agent that meets what only a person can do (a second factor, a CAPTCHA, new terms)
asks for a person with a reason. The request shows in the console; a person takes it by
taking the target over (the epoch goes up; the agent's writes are refused
``HELD_BY_HUMAN``) and ends it by handing the target back. The agent may wait, bounded, for
that hand-back: lease changes pushed by the sidecar's watch move the request on at once
(without the watch, the lease is asked for every half second). After the hand-back the
agent's old refs are stale — the epoch moved twice — and it observes again.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time

from handrail.authz import AsyncAuthzClient, AuthzError, LeaseInfo
from handrail.executor._errors import InvalidArgumentError, NotFoundError
from handrail.executor._lease import LeaseKeeper
from handrail.executor._live import PersonRequest, PersonStatus
from handrail.executor._session import Session, Sessions
from handrail.recorder import AsyncLedger

__all__ = ["MAX_REASON", "MAX_WAIT_MS", "PersonDesk"]

MAX_REASON = 1024
MAX_WAIT_MS = 10 * 60_000
_POLL_S = 0.5


def _now_ms() -> int:
    return int(time.time() * 1000)


class PersonDesk:
    """The requests for a person of every session, and the waits on them.

    Args:
        authz: the sidecar client (the executor's own token), to read leases.
        ledger: where each request is recorded (``person_request`` entries).
        sessions: the open sessions.
        leases: pushes lease changes to :meth:`saw_lease`.
    """

    def __init__(self, authz: AsyncAuthzClient, ledger: AsyncLedger, sessions: Sessions, leases: LeaseKeeper) -> None:
        self._authz = authz
        self._ledger = ledger
        self._sessions = sessions
        self._leases = leases
        self._requests: dict[str, PersonRequest] = {}  # by request id
        self._latest: dict[str, str] = {}  # session id -> its newest request id
        self._changed: dict[str, asyncio.Event] = {}  # target -> set on each lease change
        leases.listeners.append(self.saw_lease)

    def latest(self, session_id: str) -> PersonRequest | None:
        """The session's newest request for a person, if it made one."""
        request_id = self._latest.get(session_id)
        return self._requests.get(request_id) if request_id else None

    def saw_lease(self, target: str, lease: LeaseInfo) -> None:
        """A lease change of ``target``: move its open requests on, wake their waiters."""
        for request in self._requests.values():
            if request.target == target:
                _advance(request, lease)
        event = self._changed.pop(target, None)
        if event is not None:
            event.set()

    async def ask(self, session: Session, reason: str, wait_ms: int, request_id: str = "") -> PersonRequest:
        """Ask for a person (or, with ``request_id``, go on waiting on an earlier request)."""
        if not 0 <= wait_ms <= MAX_WAIT_MS:
            raise InvalidArgumentError("wait_ms", f"must be within 0..{MAX_WAIT_MS}")
        if request_id:
            request = self._requests.get(request_id)
            if request is None or request.session_id != session.session_id:
                raise NotFoundError("request_id", f"no request {request_id!r} of this session")
        else:
            request = await self._open(session, reason)
        await self._refresh(request)
        deadline = time.monotonic() + wait_ms / 1000
        while request.status is not PersonStatus.HANDED_BACK:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            event = self._changed.setdefault(request.target, asyncio.Event())
            watched = self._leases.watching(request.target)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), left if watched else min(left, _POLL_S))
            if not watched:
                await self._refresh(request)
        request.lease_epoch = session.fence.highest_epoch
        return request

    async def _open(self, session: Session, reason: str) -> PersonRequest:
        reason = reason.strip()
        if not reason:
            raise InvalidArgumentError("reason", "say what the person must do")
        if len(reason) > MAX_REASON:
            raise InvalidArgumentError("reason", f"is {len(reason)} characters long, at most {MAX_REASON} allowed")
        request = PersonRequest(
            request_id="p_" + secrets.token_hex(6),
            session_id=session.session_id,
            target=session.target,
            agent=session.agent,
            reason=reason,
            asked_at_ms=_now_ms(),
            lease_epoch=session.fence.highest_epoch,
        )
        await self._ledger.append(
            "person_request",
            session_id=session.session_id,
            principal=session.agent,
            epoch=session.fence.epoch,
            body={"request_id": request.request_id, "target": session.target, "reason": reason},
        )
        self._requests[request.request_id] = request
        self._latest[session.session_id] = request.request_id
        self._forget_old()
        return request

    def _forget_old(self) -> None:
        """Drop the requests of closed sessions, and ended ones a newer request replaced."""
        open_ids = {s.session_id for s in self._sessions.all()}
        for old in list(self._requests.values()):
            newest = self._latest.get(old.session_id) == old.request_id
            if old.session_id not in open_ids or (old.ended_at_ms and not newest):
                del self._requests[old.request_id]
                if newest:
                    del self._latest[old.session_id]

    async def _refresh(self, request: PersonRequest) -> None:
        try:
            lease = await self._authz.get_lease(request.target)
        except AuthzError:
            return  # the sidecar cannot say: the request stays as it was
        _advance(request, lease)


def _advance(request: PersonRequest, lease: LeaseInfo) -> None:
    """Move ``request`` on by what ``lease`` says: taken by a person, or handed back."""
    request.lease_epoch = max(request.lease_epoch, lease.epoch)
    human = lease.holder_kind == "human"
    if request.status is PersonStatus.WAITING and human:
        request.status = PersonStatus.WITH_PERSON
        request.taken_by, request.taken_at_epoch = lease.holder, lease.epoch
    elif request.status is PersonStatus.WITH_PERSON:
        if human:
            request.taken_by = lease.holder  # another person may have taken it from the first
        elif lease.epoch > request.taken_at_epoch:
            request.status = PersonStatus.HANDED_BACK
            request.ended_at_ms = _now_ms()
