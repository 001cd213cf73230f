"""What a session's page does on its own: the documents it loads and the requests it sends.

``SessionWatch`` is the loop's listener of one session's surface (``Backend.listen``):

- **Every top-level document load is judged** before it leaves the browser, on the URL as
  the browser parsed it (invariant 13). Any other (a redirect off the site, a script, a refresh,
  a pop-up, a form the page submits by itself) is
  a check of its own with the sidecar, with ``document_load`` set so that only origins a
  grant names load: a GET as a navigate, anything else as a submit. The running action's
  own loads are the URLs it was allowed on (its page's, its URL's, its effects', fragment
  aside): its typed URL, its link, its form's post (only if the action was allowed to
  write), a reload. Any other load while it runs, of its own origin too (the answer to its
  form redirected elsewhere, a script's navigation, a form the page builds), is judged as
  above: a grant may name paths, and a policy may read the path or the whole URL.
  A refused load is aborted, written to the ledger (``navigation``), and the running
  action, if any, says so in its result. Every load the sidecar is asked about is written
  to the ledger, allowed or not. While the target waits for a reconcile, a GET load goes
  on as a read (logged as one) and a load that writes is refused (``RECONCILE_REQUIRED``).
- **A person at the wheel loads their own documents**: once a person's input went in
  (the console's ``HumanInput``), every load until the agent acts again is the person's,
  decided by ``CheckHumanInput`` with their token (allowed while they hold the lease at
  their epoch; grants and policies are the agents') and written under the person. When
  the person no longer holds the wheel, a load is judged as the agent's again.
- **Every side-effecting request belongs to the action running when the page made it**
  (from dispatch to the end of the settle after it): when the browser announced it, or,
  for one it does not announce (a form post), when its start was reported. The action
  waits for the requests announced while it ran, also those whose start is reported late.
  One that ends without a response makes its action UNKNOWN: at the action's result if
  it ended before it (or is still unanswered when the settle ends), and otherwise by a
  later result entry that amends the first (``extra.amends``), never by an edit. A
  response that arrives after the result is recorded (``request``). A request another
  action started is never held against the action that happens to be running when it
  fails.
- **A message an action sends on a WebSocket is that action's until the socket answers**
  (any frame received after it): if the socket closes or fails first, the message may have
  been taken with no word of it, and the action is UNKNOWN as for a lost request (amended,
  if its result is written). An unanswered message is not waited for (many are never
  answered), and one older than a minute is no longer held against its action.
- **A dedicated worker an action's input made is that action's** (the worker starts in
  no order with the input's report): what it sends while no action runs, for a minute, is
  still that action's, keyed as its own, and a loss amends it.
- For a grant that asks for it, the action's side-effecting requests carry an
  ``Idempotency-Key`` header derived from the action id (``<action_id>.<n>``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from dataclasses import dataclass, field

from handrail._vocabulary import Outcome, Reason, Verb
from handrail.authz import AsyncAuthzClient, AuthzError, InvalidArgumentError, parse_url
from handrail.executor._backend import DocumentLoad, LoadVerdict, SideRequest
from handrail.executor._outcomes import Outcomes
from handrail.executor._session import Session
from handrail.recorder import AsyncLedger, Entry, NavigationBody, RequestBody

__all__ = ["PERSON_LOAD_S", "ActionNetwork", "PersonInput", "SessionWatch", "page_origin"]

log = logging.getLogger(__name__)

_SAFE = frozenset({"GET", "HEAD", "OPTIONS"})
_KEEP_FINISHED = 64  # finished actions whose requests may still end
_KEEP_ANNOUNCED = 1024  # announced requests whose start is not reported yet
# How long a reported start waits for its announcement, which the browser sends on another
# channel and may deliver after it (none comes for a request an iframe makes before its
# out-of-process renderer is listened to: its first ones).
_ANNOUNCEMENT_LAG_S = 5.0
_WORKER_LINEAGE_S = 60.0  # how long what a worker an action made sends is still the action's
_FRAME_ANSWER_S = 60.0  # how long a WebSocket message may wait for its answer and be its action's to lose
PERSON_LOAD_S = 2.0  # how long after a person's input a load on its page's origin is its own


def page_origin(url: str) -> str | None:
    """The origin of a URL as a browser parses it; None when it does not parse."""
    try:
        return parse_url("url", url).origin
    except InvalidArgumentError:
        return None


@dataclass
class _Request:
    request: SideRequest
    action_id: str
    status: int = 0
    failure: str = ""
    ended: bool = False

    def describe(self) -> str:
        r = self.request
        if self.status:
            return f"{r.method} {r.url} answered {self.status}"
        if self.ended:
            return f"{r.method} {r.url} ended without a response ({self.failure})"
        return f"{r.method} {r.url} has no response yet"


@dataclass
class _Announced:
    """A request the browser announced, until its start is reported."""

    method: str
    url: str  # without its fragment, as the request goes out
    net: ActionNetwork | None  # the action running when the page made it
    dropped: bool = False  # it failed before its start was reported

    def describe(self) -> str:
        return f"{self.method} {self.url} was made by the page and has not gone out yet"


@dataclass
class _Frames:
    """Messages one action sent on one WebSocket, with no frame received on it since."""

    url: str
    tab_id: str
    net: ActionNetwork
    count: int
    at: float  # when the first was sent (monotonic)
    failure: str = ""  # how the socket ended before an answer

    def describe(self) -> str:
        sent = f"{self.count} WebSocket message(s) to {self.url or 'a socket whose URL was not heard'}"
        return f"{sent} lost the connection with no answer ({self.failure})" if self.failure else sent


def _unfragmented(url: str) -> str:
    return url.split("#", 1)[0]


@dataclass
class ActionNetwork:
    """What one action's page did on the network, from its dispatch to its result.

    Attributes:
        action_id: the action.
        urls: the URLs it was allowed on, fragment aside: a document of one of them loads
            as part of the action; any other is judged on its own.
        writes: the action was allowed to write (a submit or stronger): a form post to
            one of its URLs is part of it too.
        read_only: the action is a read let through while the target awaits a reconcile.
        idempotency_header: its grant asks for an ``Idempotency-Key`` on its requests.
        requests: the side-effecting requests it started.
        blocked: what the gate refused while it ran, one sentence each.
        result_seq: its result entry, once written (0 before).
        outcome: the outcome that result states.
    """

    action_id: str
    idempotency_key: str
    epoch: int
    urls: frozenset[str] = frozenset()
    writes: bool = False
    read_only: bool = False
    idempotency_header: bool = False
    requests: list[_Request] = field(default_factory=list)
    announced: dict[str, _Announced] = field(default_factory=dict)  # made, start not reported yet
    frames: list[_Frames] = field(default_factory=list)  # WebSocket messages it sent
    blocked: list[str] = field(default_factory=list)
    result_seq: int = 0
    outcome: Outcome | None = None
    decision_id: str = ""
    _quiet: asyncio.Event = field(default_factory=asyncio.Event)

    def lost(self) -> list[str]:
        """The requests that ended without a response, and the WebSocket messages whose
        socket ended before an answer."""
        lost = [r.describe() for r in self.requests if r.ended and not r.status]
        return lost + [f.describe() for f in self.frames if f.failure]

    def pending(self) -> list[str]:
        """The requests that have not ended: started, or made and not started yet."""
        started = [r.describe() for r in self.requests if not r.ended]
        return started + [a.describe() for a in self.announced.values()]

    async def quiet(self, timeout_s: float) -> None:
        """Wait (at most ``timeout_s``) until every request of the action has ended."""
        deadline = time.monotonic() + timeout_s
        while self.pending() and time.monotonic() < deadline:
            self._quiet.clear()
            try:
                await asyncio.wait_for(self._quiet.wait(), max(0.0, deadline - time.monotonic()))
            except TimeoutError:
                return


@dataclass
class PersonInput:
    """A person's latest input into the session (the console's ``HumanInput``).

    Attributes:
        person, token: who sent it, and their token (CheckHumanInput asks with it).
        epoch: the lease epoch of their takeover.
        action_id, decision_id: the input and the decision that allowed it.
        origin: the page's origin when it was sent.
        at: when its dispatch ended (monotonic seconds; 0 while it runs).
    """

    person: str
    token: str
    epoch: int
    action_id: str
    decision_id: str
    origin: str | None
    at: float = 0.0

    def owns(self, origin: str | None) -> bool:
        """A load on the input's page's origin, while it runs or within ``PERSON_LOAD_S``
        after it: the input's own consequence (a form it submitted, a link it followed)."""
        recent = self.at == 0.0 or time.monotonic() - self.at <= PERSON_LOAD_S
        return recent and origin is not None and origin == self.origin


class SessionWatch:
    """The loop's listener of one session's surface (see the module docstring).

    Args:
        session: the session.
        authz: the sidecar client, authenticated as the executor.
        outcomes: the records of actions (amending a result, blocking the target).
        ledger: where document loads (awaited: a load is let out once its record is
            durable) and late requests (queued: a browser event cannot wait) are written.
    """

    def __init__(self, session: Session, authz: AsyncAuthzClient, outcomes: Outcomes, ledger: AsyncLedger) -> None:
        self._session = session
        self._authz = authz
        self._outcomes = outcomes
        self._ledger = ledger
        self.current: ActionNetwork | None = None
        self._requests: dict[str, _Request] = {}
        self._announced: dict[str, _Announced] = {}  # by the browser's request id
        # Starts reported before their announcement: (method, URL, when by the monotonic
        # clock, when by the wall clock), oldest first.
        self._unannounced: list[tuple[str, str, float, float]] = []
        self._actions: dict[str, ActionNetwork] = {}
        # Dedicated workers an action's input made, by their requests' key prefix: such a
        # worker works for the action, also once it has ended (for _WORKER_LINEAGE_S). With
        # its tab and when it was made: a worker's first requests may go out before the gate
        # listens to it (the browser lets it run once any client does), and are then reported
        # by routing alone, which tells a worker's request from its page's by nothing.
        self._workers: dict[str, tuple[ActionNetwork, str, float]] = {}
        # Unanswered WebSocket messages of actions, by socket (the browser's id, with the
        # key prefix of its worker or frame), oldest first.
        self._sockets: dict[str, list[_Frames]] = {}
        # A person at the wheel who sent input. Until the agent acts again, a document load
        # is theirs, decided by CheckHumanInput with their token.
        self.person: PersonInput | None = None

    # -- the act path's side ---------------------------------------------------------------

    def begin(
        self,
        action_id: str,
        idempotency_key: str,
        epoch: int,
        urls: list[str],
        *,
        writes: bool = False,
        read_only: bool = False,
        idempotency_header: bool = False,
        decision_id: str = "",
    ) -> ActionNetwork:
        """An action is about to be dispatched: what its page does from now on is its own.

        ``urls`` are the URLs it was allowed on (its page, its own URL, its effects').
        """
        self.person = None  # the agent acts again: the lease came back to it
        net = ActionNetwork(
            action_id,
            idempotency_key,
            epoch,
            frozenset(map(_unfragmented, urls)),
            writes and not read_only,
            read_only,
            idempotency_header,
            decision_id=decision_id,
        )
        self.current = net
        self._actions[action_id] = net
        while len(self._actions) > _KEEP_FINISHED:
            oldest = next(iter(self._actions))
            if self._actions[oldest] is net:
                break
            del self._actions[oldest]
        return net

    def finished(self, net: ActionNetwork, result_seq: int, outcome: Outcome) -> None:
        """The action's result is written: later ends of its requests amend or add to it."""
        net.result_seq, net.outcome = result_seq, outcome
        if self.current is net:
            self.current = None
        for request in net.requests:
            if request.ended:
                self._requests.pop(request.request.request_id, None)
        if outcome in (Outcome.DONE, Outcome.FAILED):  # a socket that ended while the result was written
            for frames in [f for f in net.frames if f.failure]:
                self._frames_late(net, frames)

    def abandon(self, net: ActionNetwork) -> None:
        """The action stopped without a result (a crash): it is no longer running."""
        if self.current is net:
            self.current = None

    def starting(self, url: str) -> ActionNetwork:
        """The session's start page was allowed: it loads (a redirect is judged on its own)."""
        net = ActionNetwork("", "", self._session.fence.epoch, frozenset([_unfragmented(url)]))
        self.current = net
        return net

    # -- SurfaceListener ---------------------------------------------------------------------

    async def judge_load(self, load: DocumentLoad) -> LoadVerdict:
        net = self.current
        origin = page_origin(load.url)
        if origin is None:
            return await self._record(load, "", False, Reason.OUT_OF_SCOPE, "a URL the sidecar cannot parse", net)
        safe = load.method.upper() in _SAFE
        waiting = self._outcomes.blocked(self._session.target)
        if waiting is not None and not safe:
            return await self._record(load, Verb.SUBMIT, False, Reason.RECONCILE_REQUIRED, waiting, net)
        if net is not None and (safe or net.writes) and _unfragmented(load.url) in net.urls:
            # A URL the running action was allowed on: its link, its form's post, its page
            # again. Elsewhere on its origin a grant's paths or a policy may say otherwise.
            return LoadVerdict(True)
        verb = Verb.NAVIGATE if safe else Verb.SUBMIT
        session = self._session
        p = self.person
        if p is not None:
            try:
                decision = await self._authz.check_human_input(
                    p.token, p.person, session.target, p.epoch, verb, url=load.url
                )
            except AuthzError as exc:
                return await self._record(
                    load, verb, False, Reason.AUTHZ_UNAVAILABLE, f"authz: {exc}", net, by=p.person
                )
            if decision.allow:
                allowed = (decision.reason, decision.message, net, decision.decision_id)
                return await self._record(load, verb, True, *allowed, by=p.person)
            if p.owns(origin):  # the input's own load, late: the wheel was handed back since
                why = f"a load of {p.person}'s input {p.action_id}, which the wheel's hand-back overtook"
                return await self._record(load, verb, True, Reason.ALLOW, why, net, p.decision_id, by=p.person)
            self.person = None  # the person no longer holds the wheel: the load is judged as the agent's
        try:
            decision = await self._authz.check(
                session.agent,
                session.target,
                session.fence.epoch,
                verb,
                url=load.url,
                action_id=net.action_id if net is not None else "",
                document_load=True,
            )
        except AuthzError as exc:
            return await self._record(load, verb, False, Reason.AUTHZ_UNAVAILABLE, f"authz: {exc}", net)
        read = waiting is not None
        return await self._record(
            load, verb, decision.allow, decision.reason, decision.message, net, decision.decision_id, read
        )

    async def _record(
        self,
        load: DocumentLoad,
        verb: str,
        allow: bool,
        reason: str,
        message: str,
        net: ActionNetwork | None,
        decision_id: str = "",
        read: bool = False,
        by: str = "",
    ) -> LoadVerdict:
        cause = load.cause if load.cause != "page" or net is None else "action"
        if not allow:
            what = f"{load.method} {load.url} ({cause}) was not loaded: {reason}: {message}"
            if net is not None:
                net.blocked.append(what)
            log.info("session %s: %s", self._session.session_id, what)
        await self._ledger.append(
            NavigationBody.KIND,
            session_id=self._session.session_id,
            action_id=net.action_id if net is not None else "",
            principal=by or self._session.agent,
            principal_kind="human" if by else "agent",
            epoch=self._session.fence.epoch,
            body=NavigationBody(
                url=load.url,
                method=load.method,
                tab_id=load.tab_id,
                cause=cause,
                verb=str(verb),
                allowed=allow,
                reason=str(reason),
                message=message,
                decision_id=decision_id,
                read=read and allow,
            ),
        )
        return LoadVerdict(allow, str(reason), message)

    def request_announced(self, key: str, method: str, url: str, made_at: float = 0.0) -> None:
        url = _unfragmented(url)
        now = time.monotonic()
        self._unannounced = [s for s in self._unannounced if now - s[2] <= _ANNOUNCEMENT_LAG_S]
        for i, (m, u, _, reported) in enumerate(self._unannounced):
            # Its start was reported first: it is tracked already. Not a request made after
            # that report: one whose announcement never comes (a worker's first, made before
            # the gate listened to it) must not hide the next one to the same URL.
            if (m, u) == (method, url) and (not made_at or made_at <= reported):
                del self._unannounced[i]
                return
        net = self._maker(key)
        announced = _Announced(method, url, net)
        self._announced[key] = announced
        if net is not None:
            net.announced[key] = announced
        while len(self._announced) > _KEEP_ANNOUNCED:
            oldest = next(iter(self._announced))
            self._dropped(self._announced.pop(oldest), oldest)

    def _maker(self, key: str) -> ActionNetwork | None:
        """The running action; with none, for a key of a worker an action made (lately),
        that action."""
        net = self.current
        if net is None and ":" in key:
            made, _, at = self._workers.get(key.partition(":")[0] + ":", (None, "", 0.0))
            net = made if time.monotonic() - at <= _WORKER_LINEAGE_S else None
        return net

    def frame_sent(self, socket: str, url: str, tab_id: str) -> None:
        net = self._maker(socket)
        if net is None or not net.action_id:
            return  # the page's own message
        now = time.monotonic()
        waiting = [f for f in self._sockets.pop(socket, []) if now - f.at <= _FRAME_ANSWER_S]
        if waiting and waiting[-1].net is net:
            waiting[-1].count += 1
        else:
            waiting.append(_Frames(url, tab_id, net, 1, now))
            net.frames.append(waiting[-1])
        self._sockets[socket] = waiting
        while len(self._sockets) > _KEEP_ANNOUNCED:
            del self._sockets[next(iter(self._sockets))]

    def frame_received(self, socket: str) -> None:
        self._sockets.pop(socket, None)  # an answer to what was sent before it

    def socket_closed(self, socket: str, failure: str) -> None:
        now = time.monotonic()
        for frames in self._sockets.pop(socket, []):
            if now - frames.at > _FRAME_ANSWER_S:
                continue
            frames.failure = failure
            if frames.net.result_seq:
                self._frames_late(frames.net, frames)

    def _frames_late(self, net: ActionNetwork, frames: _Frames) -> None:
        body = RequestBody("WEBSOCKET", frames.url, frames.tab_id, "websocket", 0, frames.failure, "")
        self._late(net, body, frames.describe())

    def worker_made(self, prefix: str, tab_id: str) -> None:
        if self.current is not None and self.current.action_id:
            self._workers[prefix] = (self.current, tab_id, time.monotonic())
            while len(self._workers) > _KEEP_FINISHED:
                del self._workers[next(iter(self._workers))]

    def announced_dropped(self, key: str) -> None:
        announced = self._announced.get(key)
        if announced is not None:
            announced.dropped = True  # kept: a start reported after all is still its action's
            self._dropped(announced, key)

    def request_refused(self, request: SideRequest) -> None:
        known, net = self._announcer(request)
        if not known:  # its announcement is still to come: it will find it reported
            reported = (request.method, _unfragmented(request.url), time.monotonic(), time.time())
            self._unannounced.append(reported)
            del self._unannounced[:-_KEEP_ANNOUNCED]
        elif net is not None and not net.pending():
            net._quiet.set()

    def _dropped(self, announced: _Announced, key: str) -> None:
        net = announced.net
        if net is not None and net.announced.pop(key, None) is not None and not net.pending():
            net._quiet.set()

    def _announcer(self, request: SideRequest) -> tuple[bool, ActionNetwork | None]:
        """Whether the browser announced ``request``, and the action running when it did."""
        url = _unfragmented(request.url)
        same = [k for k, a in self._announced.items() if a.method == request.method and a.url == url]
        if not same:
            return False, None
        # The oldest still in flight; one that failed before its start only if none is.
        key = next((k for k in same if not self._announced[k].dropped), same[0])
        announced = self._announced.pop(key)
        if announced.net is not None:
            announced.net.announced.pop(key, None)
        return True, announced.net

    def request_started(self, request: SideRequest) -> dict[str, str]:
        known, net = self._announcer(request)
        if not known:
            net = self.current
            if request.resource_type != "document":  # documents are never announced
                net = net or self._new_workers_action(request.tab_id)
                reported = (request.method, _unfragmented(request.url), time.monotonic(), time.time())
                self._unannounced.append(reported)
                del self._unannounced[:-_KEEP_ANNOUNCED]
        tracked = _Request(request, net.action_id if net is not None else "")
        self._requests[request.request_id] = tracked
        if net is None:
            return {}
        net.requests.append(tracked)
        if net.idempotency_header:
            return {"Idempotency-Key": f"{net.action_id}.{len(net.requests)}"}
        return {}

    def _new_workers_action(self, tab_id: str) -> ActionNetwork | None:
        """The action whose input made the tab's newest worker, when that started lately: an
        unannounced request of the tab while no action runs may be that worker's first."""
        for net, tab, started in reversed(self._workers.values()):
            if tab == tab_id:
                return net if time.monotonic() - started <= _ANNOUNCEMENT_LAG_S else None
        return None

    def request_ended(self, request_id: str, status: int, failure: str) -> None:
        tracked = self._requests.get(request_id)
        if tracked is None or tracked.ended:
            return
        tracked.ended, tracked.status, tracked.failure = True, status, "" if status else failure
        net = self._actions.get(tracked.action_id)
        if net is None:
            self._requests.pop(request_id, None)
            return
        if not net.pending():
            net._quiet.set()
        if not net.result_seq:
            return  # the act path reads it when it writes the result
        self._requests.pop(request_id, None)
        r = tracked.request
        body = RequestBody(r.method, r.url, r.tab_id, r.resource_type, tracked.status, tracked.failure, "")
        self._late(net, body, tracked.describe())

    def _late(self, net: ActionNetwork, body: RequestBody, what: str) -> None:
        """A request (or WebSocket message) of an action whose result is written ended:
        record it (``body``, whose message is made here from ``what``), amend if lost."""
        lost = not body.status
        message = f"after the action's result: {what}" + ("; the action may have had its effect" if lost else "")
        self._ledger.post(
            self._ledger.ledger.append,
            RequestBody.KIND,
            session_id=self._session.session_id,
            action_id=net.action_id,
            idempotency_key=net.idempotency_key,
            principal=self._session.agent,
            epoch=net.epoch,
            body=dataclasses.replace(body, message=message),
        )
        if lost and not net.read_only and net.outcome in (Outcome.DONE, Outcome.FAILED):
            net.outcome = Outcome.UNKNOWN
            amended = self._outcomes.amend_unknown(
                self._session,
                net.action_id,
                net.idempotency_key,
                net.epoch,
                net.result_seq,
                f"{what} after the result was written: the outcome is unknown; observe and reconcile",
                net.decision_id,
            )
            amended.add_done_callback(lambda done: _amended(net, done))


def _amended(net: ActionNetwork, done: asyncio.Future[Entry]) -> None:
    """The amend of ``net``'s result is written: it is the action's latest result now."""
    if not done.cancelled() and done.exception() is None:
        net.result_seq = done.result().seq
