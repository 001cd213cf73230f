"""A session's browser network: every top-level document judged before it loads, every
side-effecting request reported.

Two interceptors, because neither alone sees everything:

- **Per tab, CDP ``Fetch``** for ``Document`` requests, at the request stage: it pauses
  the main frame's document requests *and every hop of their HTTP redirects* (Playwright's
  routing lets redirects through unseen). Each is held until the loop's listener judges
  it; a refused one fails with ``BlockedByClient``, so nothing leaves the browser and the
  page stays where it was. Child frames' documents go on (they are subresources).
- **Per context, Playwright routing**, which is in place before a new tab runs: a pop-up's
  first document (``window.open``, ``target=_blank``) arrives here before the tab exists.
  It is judged; a refused one is aborted and its tab closed. An allowed GET is aborted too
  and loaded again once the tab's own gate is in place, so that its redirects are judged
  like any other; an allowed POST is fetched without following redirects, and a redirect
  answer is judged on its target and turned into a client-side one (which the tab's gate
  then judges). Routing also reports side-effecting requests (not GET, HEAD or OPTIONS:
  fetch, XHR, form posts, beacons) as they start, adding the headers the listener asks
  for (``Idempotency-Key``), and the tab's events report how they end.

Routing reports a request when Playwright's driver hands it over, which can be well after
the page made it (a busy machine: hundreds of milliseconds). So each tab's CDP session for
page scripts (``_world``) also listens to the tab's ``Network`` events and *announces*
every side-effecting fetch, XHR or beacon the moment the renderer makes it. The renderer
sends those events before its answer to a later script, so when an input's report comes
back, every request its handlers made has been announced: the running action waits for
them, and a request is the action's that was running when it was announced, not when
routing got to it. A cross-site iframe runs in a renderer of its own, which the tab's
session does not hear: each such frame's target gets a session that announces its requests.
A dedicated worker too (the tab's or such a frame's), through its parent's session in the
protocol's non-flat mode; as it runs in no order with the page, an input waits for each of
the tab's workers to run one task of its own (``flush_workers``) before it returns.

With no listener yet, every document load is refused (fail closed).
"""

from __future__ import annotations

import asyncio
import contextlib
import html
import itertools
import json
import logging
from collections import deque
from collections.abc import Callable
from typing import Any, Literal
from urllib.parse import urljoin, urlsplit

from playwright.async_api import BrowserContext, CDPSession, Frame, Page, Request, Route
from playwright.async_api import Error as PlaywrightError

from handrail.executor._backend import DocumentLoad, LoadVerdict, SideRequest, SurfaceListener
from handrail.executor.browser._pagescript import WORKER_SCRIPT
from handrail.executor.browser._sockets import SocketUrls
from handrail.executor.browser._workers import Worker
from handrail.executor.browser._workerstart import WorkerScripts
from handrail.executor.browser._world import session_of

log = logging.getLogger(__name__)

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
# Announced by their routing only: documents (a form post is a navigation, which the
# input's own wait follows) and CORS preflights (answered by the driver, never sent).
_UNANNOUNCED = frozenset({"Document", "Preflight"})
# Network.enable for its events only: no request bodies in them, none kept for later.
_EVENTS_ONLY = {"maxPostDataSize": 0, "maxResourceBufferSize": 0}
WORKER_FLUSH_S = 0.5  # how long an input waits for the tab's workers to run what it handed them
# A WebSocket's events, from the tab's, a frame's or a worker's session: its URL, each
# message out and in, and its end.
_SOCKET_EVENTS = (
    "Network.webSocketCreated",
    "Network.webSocketFrameSent",
    "Network.webSocketFrameReceived",
    "Network.webSocketClosed",
    "Network.webSocketFrameError",
)
_NO_LISTENER = LoadVerdict(False, "AUTHZ_UNAVAILABLE", "the session's gate has no listener yet")


class NetworkGate:
    """The document gate and the request reporter of one browser context.

    Args:
        context: the session's browser context.
        tab_of: the tab id of a page of the session (``""`` when it has none yet).
    """

    def __init__(self, context: BrowserContext, tab_of: Callable[[Page], str]) -> None:
        self._context = context
        self._tab_of = tab_of
        # Per tab: called when its page asks for a navigation of its main frame in the tab
        # itself, as the renderer announces it (before its answer to any later page script).
        self._navigation_requested: dict[Page, Callable[[], None]] = {}
        self.listener: SurfaceListener | None = None
        self._gated: dict[Page, CDPSession] = {}
        self._gating: dict[Page, asyncio.Future[None]] = {}
        self._main_frames: dict[Page, str] = {}
        self._chains: dict[str, tuple[str, str]] = {}  # network id -> (method, URL) that started it
        # URLs of requests answered by a redirect whose next hop the gate refused: their
        # failure is the gate's doing, not a lost response.
        self._redirected: set[str] = set()
        self._ids = itertools.count(1)
        self._requests: dict[Request, str] = {}
        self._tasks: set[asyncio.Future[Any]] = set()
        # New tabs whose first load was aborted here, in order: the URL to load once the
        # tab's gate is in place, or None to close the tab (its load was refused).
        self._popups: deque[tuple[str | None, str]] = deque()
        # Per out-of-process child frame's target (a cross-site iframe: a payment widget):
        # the CDP session that announces its requests, with the tab it is in.
        self._frame_targets: dict[str, tuple[Page, Frame, CDPSession]] = {}
        self._workers: dict[str, Worker] = {}  # dedicated workers, by their session
        self._worker_scripts = WorkerScripts()
        self._sockets = SocketUrls()  # the URL of each WebSocket, by its key
        self._attached: dict[Page, int] = {}  # per tab: how many workers have attached
        self._attaching: dict[Page, asyncio.Event] = {}  # per tab: set at each attach

    async def install(self) -> None:
        await self._context.route("**/*", self._route)

    # -- tabs ------------------------------------------------------------------------

    def adopt_popup(self, page: Page) -> Literal["", "load", "close"]:
        """A new tab appeared: if its first load was aborted here, load it (``"load"``) or,
        the load refused, close it (``"close"``: the tab is never one of the session's);
        ``""`` when it is no such tab."""
        # Such a tab shows the error page of its failed first load when it is reported.
        if not self._popups or not (page.url == "" or page.url.startswith("chrome-error:")):
            return ""
        url, referer = self._popups.popleft()
        self._spawn(self._reopen(page, url, referer))
        return "close" if url is None else "load"

    async def _reopen(self, page: Page, url: str | None, referer: str) -> None:
        with contextlib.suppress(PlaywrightError):
            if url is None:
                await page.close()
                return
            await self.gate(page)
            await page.goto(url, referer=referer or None, wait_until="commit", timeout=15_000)

    async def gate(self, page: Page) -> None:
        """Hold this tab's main-frame documents (and their redirects) until judged."""
        if page in self._gated:
            return
        pending = self._gating.get(page)
        if pending is None:
            pending = self._gating[page] = asyncio.ensure_future(self._install_gate(page))
        await asyncio.shield(pending)

    async def _install_gate(self, page: Page) -> None:
        try:
            await self._open_gate(page)
        except PlaywrightError:  # the tab closed meanwhile: nothing to hold
            return

    async def _open_gate(self, page: Page) -> None:
        cdp = await self._context.new_cdp_session(page)
        tree = await cdp.send("Page.getFrameTree")
        self._main_frames[page] = tree["frameTree"]["frame"]["id"]
        cdp.on("Fetch.requestPaused", lambda event: self._spawn(self._paused(page, cdp, event)))
        pattern = {"urlPattern": "*", "resourceType": "Document", "requestStage": "Request"}
        await cdp.send("Fetch.enable", {"patterns": [pattern]})
        await self._announce(page)
        self._gated[page] = cdp
        page.on("close", self._forget)

    async def _announce(self, page: Page) -> None:
        """Announce the tab's side-effecting requests and requested navigations as the page
        makes them."""
        world = await session_of(page)
        self._sockets.watch(page)
        self._listen_to(world, "", page)
        world.on("Page.frameRequestedNavigation", lambda event: self._on_requested(page, event))
        await world.send("Network.enable", _EVENTS_ONLY)
        await world.send("Page.enable")
        # A cross-site iframe runs in a renderer of its own, whose requests the tab's
        # session does not see: each such frame's target gets a session that announces them.
        page.on("framenavigated", lambda frame: self._spawn(self._announce_frame(page, frame)))
        page.on("framedetached", lambda frame: self._let_go(lambda _p, f: f is frame))
        for frame in page.frames[1:]:
            self._spawn(self._announce_frame(page, frame))
        try:
            await self._attach_workers(page, world)
        except PlaywrightError as exc:
            if page.is_closed():
                raise
            log.warning("the requests of this tab's workers will not be announced: %s", exc)

    async def _attach_workers(self, page: Page, cdp: CDPSession) -> None:
        """Announce the requests of the dedicated workers of ``cdp``'s target (the tab, or
        a cross-site frame of it). A worker (a page that hands its order to a Worker) is a
        target of its own; Playwright's API gives no session for one, so ``cdp`` attaches to
        each in the protocol's non-flat mode, where the worker's messages come as its events."""
        cdp.on("Target.attachedToTarget", lambda event: self._worker_attached(page, cdp, event))
        cdp.on("Target.receivedMessageFromTarget", self._from_worker)
        cdp.on("Target.detachedFromTarget", lambda event: self._worker_gone(str(event.get("sessionId", ""))))
        auto = {"autoAttach": True, "waitForDebuggerOnStart": True, "flatten": False, "filter": [{"type": "worker"}]}
        await cdp.send("Target.setAutoAttach", auto)

    def _listen_to(self, cdp: CDPSession, prefix: str, page: Page) -> None:
        cdp.on("Network.requestWillBeSent", lambda event: self._on_will_send(event, prefix))
        cdp.on("Network.loadingFailed", lambda event: self._on_loading_failed(event, prefix))
        for method in _SOCKET_EVENTS:
            cdp.on(method, lambda event, m=method: self._on_socket(m, event, prefix, page))

    async def _announce_frame(self, page: Page, frame: Frame) -> None:
        """Announce the requests of ``frame`` when it runs out of process (a target not yet
        announcing; its earlier target, after a cross-site navigation, is let go)."""
        if frame.parent_frame is None or frame.is_detached():
            return
        try:
            cdp = await self._context.new_cdp_session(frame)
        except PlaywrightError:
            return  # in its parent's process: the tab's session announces its requests
        try:
            target = str((await cdp.send("Target.getTargetInfo"))["targetInfo"]["targetId"])
            if target in self._frame_targets or page.is_closed() or frame.is_detached():
                await cdp.detach()
                return
            self._let_go(lambda _p, f: f is frame)
            self._frame_targets[target] = (page, frame, cdp)
            self._listen_to(cdp, target + ":", page)
            await cdp.send("Network.enable", _EVENTS_ONLY)
            await self._attach_workers(page, cdp)  # the widget's own workers
        except PlaywrightError:  # the frame went away meanwhile
            return

    def _worker_attached(self, page: Page, via: CDPSession, event: dict[str, Any]) -> None:
        worker = Worker(page, via, str(event.get("sessionId", "")))
        self._workers[worker.session] = worker
        self._attached[page] = self._attached.get(page, 0) + 1
        worker.ordinal = self._attached[page]
        self._attaching.pop(page, asyncio.Event()).set()
        self._spawn(self._announce_worker(worker, bool(event.get("waitingForDebugger"))))

    async def _announce_worker(self, worker: Worker, paused: bool) -> None:
        """Announce the requests of a worker that attached, then let it run."""
        try:
            with contextlib.suppress(PlaywrightError):  # the worker (or its tab) is gone
                await worker.send("Network.enable", _EVENTS_ONLY)
                if paused:
                    await worker.send("Runtime.runIfWaitingForDebugger", {})
        finally:
            worker.running.set()

    async def _disarm_worker(self, worker: Worker) -> None:
        """Take WebTransport away from a worker whose script has loaded, and guard its
        sockets (``WORKER_SCRIPT``; see NO_UNROUTED_CONNECTIONS)."""
        with contextlib.suppress(PlaywrightError):  # the worker (or its tab) is gone
            await worker.send("Runtime.evaluate", {"expression": WORKER_SCRIPT, "silent": True})

    def workers_attached(self, page: Page) -> int:
        """How many dedicated workers of ``page`` have attached so far."""
        return self._attached.get(page, 0)

    def _from_worker(self, event: dict[str, Any]) -> None:
        worker = self._workers.get(str(event.get("sessionId", "")))
        if worker is None:
            return
        try:
            message = json.loads(event["message"])
        except (KeyError, TypeError, ValueError):
            return
        if not isinstance(message, dict):
            return
        if "id" in message:
            worker.answered(message)
            return
        method, params = message.get("method"), message.get("params")
        if method == "Inspector.workerScriptLoaded":  # its global scope is there from now on
            self._spawn(self._disarm_worker(worker))
        if not isinstance(params, dict):
            return
        if method == "Network.requestWillBeSent":
            self._on_will_send(params, worker.session + ":")
        elif method == "Network.loadingFailed":
            self._on_loading_failed(params, worker.session + ":")
        elif method in _SOCKET_EVENTS:
            self._on_socket(method, params, worker.session + ":", worker.page)

    def _worker_gone(self, session: str) -> None:
        worker = self._workers.pop(session, None)
        if worker is not None:
            worker.gone()

    async def flush_workers(
        self, page: Page, *, made: int = 0, attached: int = 0, timeout_s: float = WORKER_FLUSH_S
    ) -> None:
        """Return once each of the tab's workers has run the tasks it had when called (up to
        ``timeout_s``): the requests an input handed to a worker are announced by then.

        A worker's messages come on its own thread, in no order with the page's: an input's
        report says nothing of what the page's ``postMessage`` will make a worker do. A
        script sent to the worker that answers after one task of its own answers after the
        tasks queued before it, and the worker's events come before its answer.

        ``made``: workers the input made (its report says), which attach a moment after it,
        each beyond the ``attached`` count taken before the input; they are waited for first,
        and told to the listener as the running action's (``worker_made``).
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while made and self._attached.get(page, 0) - attached < made and not page.is_closed():
            event = self._attaching.setdefault(page, asyncio.Event())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), max(0.0, deadline - loop.time()))
            if loop.time() >= deadline:  # those that did attach still run what they were handed
                log.debug("%d worker(s) the input made did not attach in %g s", made, timeout_s)
                deadline = loop.time() + timeout_s
                break
        workers = [w for w in self._workers.values() if w.page is page]
        if made and self.listener is not None:
            for worker in workers:
                if worker.ordinal > attached:  # made by this input: the running action's
                    self.listener.worker_made(worker.session + ":", self._tab_of(page))
        if workers:
            with contextlib.suppress(TimeoutError):
                flushed = asyncio.gather(*(w.next_task() for w in workers))
                await asyncio.wait_for(flushed, max(0.0, deadline - loop.time()))

    def _let_go(self, which: Callable[[Page, Frame], bool]) -> None:
        """Stop announcing the out-of-process frames ``which`` picks (by tab and frame)."""
        for target, (page, frame, cdp) in list(self._frame_targets.items()):
            if which(page, frame):
                del self._frame_targets[target]
                for worker in [w for w in self._workers.values() if w.via is cdp]:
                    self._worker_gone(worker.session)
                self._spawn(_detach(cdp))

    def _on_requested(self, page: Page, event: dict[str, Any]) -> None:
        if event.get("frameId") == self._main_frames.get(page) and event.get("disposition") == "currentTab":
            self._navigation_requested.get(page, lambda: None)()

    def _on_will_send(self, event: dict[str, Any], prefix: str) -> None:
        if self.listener is None or "redirectResponse" in event or event.get("type") in _UNANNOUNCED:
            return
        request = event.get("request") or {}
        method = str(request.get("method", "GET")).upper()
        if method not in SAFE_METHODS:
            made_at = event.get("wallTime")
            made = float(made_at) if isinstance(made_at, (int, float)) else 0.0
            self.listener.request_announced(prefix + str(event["requestId"]), method, str(request.get("url", "")), made)

    def _on_socket(self, method: str, event: dict[str, Any], prefix: str, page: Page) -> None:
        """A WebSocket's event: made (its URL kept), a message sent or received, its end."""
        if self.listener is None or "requestId" not in event:
            return
        socket = prefix + str(event["requestId"])
        if method == "Network.webSocketCreated":
            self._sockets.made(socket, page, str(event.get("url", "")))
        elif method == "Network.webSocketFrameSent":
            self.listener.frame_sent(socket, self._sockets.url(socket, page), self._tab_of(page))
        elif method == "Network.webSocketFrameReceived":
            self.listener.frame_received(socket)
        else:  # closed, or a frame error (the browser then closes it)
            self._sockets.closed(socket)
            failure = str(event.get("errorMessage") or "the connection closed")
            self.listener.socket_closed(socket, failure)

    def _on_loading_failed(self, event: dict[str, Any], prefix: str) -> None:
        if self.listener is not None:
            self.listener.announced_dropped(prefix + str(event["requestId"]))

    def _forget(self, page: Page) -> None:
        self._gated.pop(page, None)
        self._gating.pop(page, None)
        self._main_frames.pop(page, None)
        self._navigation_requested.pop(page, None)
        self._attached.pop(page, None)
        self._attaching.pop(page, asyncio.Event()).set()
        self._sockets.forget(page)
        self._let_go(lambda owner, _f: owner is page)
        for worker in [w for w in self._workers.values() if w.page is page]:
            self._worker_gone(worker.session)

    async def _paused(self, page: Page, cdp: CDPSession, event: dict[str, Any]) -> None:
        request_id = event["requestId"]
        verdict = LoadVerdict(True)
        try:
            if event.get("frameId") == self._main_frames.get(page):
                request = event["request"]
                network_id = str(event.get("networkId", ""))
                method = str(request.get("method", "GET")).upper()
                redirect = bool(event.get("redirectedRequestId"))
                url = str(request["url"])
                chain, first = self._chains.get(network_id, (method, url)) if redirect else (method, url)
                if not redirect:
                    self._chains[network_id] = (method, url)
                    if len(self._chains) > 256:
                        self._chains.pop(next(iter(self._chains)))
                load = DocumentLoad(url, method, self._tab_of(page), "redirect" if redirect else "page", chain)
                verdict = await self._judge(load)
                if redirect and not verdict.allow:
                    self._redirected.add(first)
        except Exception:  # a listener that failed: fail closed, never let the load out unjudged
            log.exception("judging a document load failed: refused")
            verdict = LoadVerdict(False, "AUTHZ_UNAVAILABLE", "the load could not be judged")
        with contextlib.suppress(PlaywrightError):
            if verdict.allow:
                await cdp.send("Fetch.continueRequest", {"requestId": request_id})
            else:
                # Aborted, not failed: an aborted navigation commits no error page, so the
                # tab stays on the document it showed.
                await cdp.send("Fetch.failRequest", {"requestId": request_id, "errorReason": "Aborted"})

    async def _judge(self, load: DocumentLoad) -> LoadVerdict:
        if self.listener is None:
            return _NO_LISTENER
        return await self.listener.judge_load(load)

    # -- the context's routing ---------------------------------------------------------

    async def _route(self, route: Route) -> None:
        request = route.request
        try:
            if await self._worker_scripts.answer(route):  # a worker's script, guarded
                return
            if request.is_navigation_request():
                page = _page_of(request)
                if page is None or (page not in self._gated and page.main_frame is request.frame):
                    await self._ungated_load(route, request, page)
                    return
            method = request.method.upper()
            if method not in SAFE_METHODS:
                page = _page_of(request)
                if page is None or _origin(request.url) != _origin(page.url):
                    # To another origin than the tab's page: judged as a load is, before
                    # it leaves (a beacon, a ping, a fetch, a form posted into a frame).
                    tab = self._tab_of(page) if page is not None else ""
                    verdict = await self._judge(DocumentLoad(request.url, method, tab, "request"))
                    if not verdict.allow:
                        if self.listener is not None:
                            self.listener.request_refused(
                                SideRequest("", method, request.url, tab, request.resource_type)
                            )
                        await route.abort("blockedbyclient")
                        return
                await route.continue_(headers=await self._started(request))
                return
            await route.continue_()
        except PlaywrightError:  # the page went away meanwhile
            return

    async def _started(self, request: Request) -> dict[str, str] | None:
        """Report a side-effecting request; the headers to send it with (None: as they are)."""
        request_id = f"r{next(self._ids)}"
        self._requests[request] = request_id
        page = _page_of(request)
        tab = self._tab_of(page) if page is not None else ""
        if self.listener is None:
            return None
        side = SideRequest(request_id, request.method.upper(), request.url, tab, request.resource_type)
        extra = self.listener.request_started(side)
        if not extra:
            return None
        return {**(await request.all_headers()), **extra}

    async def _ungated_load(self, route: Route, request: Request, page: Page | None) -> None:
        """A document for a tab whose gate is not in place yet (a pop-up's first load)."""
        method = request.method.upper()
        referer = request.headers.get("referer", "")
        verdict = await self._judge(DocumentLoad(request.url, method, "", "popup"))
        if not verdict.allow:
            await self._abort_first_load(route, "blockedbyclient", page, (None, referer))
            return
        if method in SAFE_METHODS:
            # Loaded again once the tab's gate holds its redirects too. (Failed, not
            # aborted: Playwright reports a new tab only once its first document commits,
            # and a failed load commits an error page.)
            await self._abort_first_load(route, "failed", page, (request.url, referer))
            if page is not None:
                self._spawn(self._reopen(page, request.url, referer))
            return
        headers = await self._started(request)
        try:
            response = await route.fetch(max_redirects=0, headers=headers)
        except PlaywrightError as exc:
            self._ended(request, 0, str(exc).splitlines()[0])
            await route.abort("connectionfailed")
            return
        self._ended(request, response.status, "")
        location = response.headers.get("location", "")
        if 300 <= response.status < 400 and location:
            target = urljoin(request.url, location)
            onward = await self._judge(DocumentLoad(target, "GET", "", "redirect", method))
            if not onward.allow:
                await route.abort("blockedbyclient")
                return
            refresh = f'<meta http-equiv="refresh" content="0;url={html.escape(target, quote=True)}">'
            await route.fulfill(status=200, content_type="text/html", body=refresh)
            return
        await route.fulfill(response=response)

    async def _abort_first_load(
        self, route: Route, error: str, page: Page | None, then: tuple[str | None, str]
    ) -> None:
        """Abort a tab's first load; a tab that does not exist yet is told what comes next
        (a refused pop-up that exists already is closed).

        The entry is queued before the abort goes out: the new tab may be reported while
        the abort's answer is on its way, and ``adopt_popup`` must find it there.
        """
        if page is not None:
            await route.abort(error)
            if then[0] is None and await page.opener() is not None:
                self._spawn(page.close())  # a refused pop-up Playwright already knew of
            return
        self._popups.append(then)
        try:
            await route.abort(error)
        except PlaywrightError:
            with contextlib.suppress(ValueError):
                self._popups.remove(then)  # no tab will come for it
            raise

    # -- how requests end ---------------------------------------------------------------

    def watch(self, page: Page, navigation_requested: Callable[[], None] = lambda: None) -> None:
        """Report how the side-effecting requests of ``page`` end, and tell
        ``navigation_requested`` when it asks for a navigation of its main frame."""
        self._navigation_requested[page] = navigation_requested
        page.on("response", self._on_response)
        page.on("requestfinished", self._on_finished)
        page.on("requestfailed", self._on_failed)

    def _on_response(self, response: Any) -> None:
        self._ended(response.request, int(response.status), "")

    def _on_finished(self, request: Request) -> None:
        if request in self._requests:  # answered (its response event may not come: a redirect)
            self._spawn(self._finished(request))

    async def _finished(self, request: Request) -> None:
        response = await request.response()
        self._ended(request, response.status if response is not None else 1, "")

    def _on_failed(self, request: Request) -> None:
        failure = request.failure or "failed"
        if request.url in self._redirected and request in self._requests:
            self._redirected.discard(request.url)
            self._ended(request, 300, "")  # answered by a redirect the gate did not follow
            return
        origin = request.redirected_from
        if origin is not None and request not in self._requests:
            # A hop of a redirect: the request that started it was answered (by the
            # redirect), unless the hop itself was sent and lost.
            while origin.redirected_from is not None and origin not in self._requests:
                origin = origin.redirected_from
            ours = "ERR_ABORTED" in failure or "ERR_BLOCKED_BY_CLIENT" in failure
            self._ended(origin, 300 if ours else 0, "" if ours else failure)
            return
        self._ended(request, 0, failure)

    def _ended(self, request: Request, status: int, failure: str) -> None:
        request_id = self._requests.pop(request, None)
        if request_id is not None and self.listener is not None:
            self.listener.request_ended(request_id, status, failure)

    # -- housekeeping -------------------------------------------------------------------

    def _spawn(self, work: Any) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Future[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.warning("network gate task failed: %r", task.exception())

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


async def _detach(cdp: CDPSession) -> None:
    with contextlib.suppress(PlaywrightError):  # its target is gone already
        await cdp.detach()


def _origin(url: str) -> tuple[str, str, int | None]:
    """A URL's origin as Chromium serializes URLs (scheme, host, port); its whole text for
    one that has none (``data:``, ``about:``), which no other URL's origin equals."""
    try:
        parts = urlsplit(url)
        if parts.scheme in ("http", "https", "ws", "wss") and parts.hostname:
            return (parts.scheme, parts.hostname, parts.port or (443 if parts.scheme in ("https", "wss") else 80))
    except ValueError:
        pass
    return ("", url, None)


def _page_of(request: Request) -> Page | None:
    """The page a request belongs to; None for a new tab's first document (no frame yet)."""
    try:
        return request.frame.page
    except PlaywrightError:
        return None
