"""A browser session's surface: its context and tabs; observe, check, dispatch, expect.

Every action goes to the session's active tab by its page object, never to whichever tab
happens to be in front; every check is one or two round trips and never waits on
Playwright's 30-second default timeout. Clicks go through the executor's own guarded
pointer (``_pointer``) where its checks allow it.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import secrets
import time
from pathlib import Path
from typing import Any

from playwright.async_api import BrowserContext, ElementHandle, Page
from playwright.async_api import Error as PlaywrightError
from playwright.async_api import TimeoutError as PlaywrightTimeoutError

from handrail.executor._backend import (
    AuthzResource,
    DispatchResult,
    DispatchStatus,
    ObserveOptions,
    RawObservation,
    Refusal,
    SurfaceListener,
)
from handrail.executor._errors import BackendError, InvalidArgumentError
from handrail.executor._models import (
    DEFAULT_ACTION_TIMEOUT_MS,
    ActionKind,
    ActionSpec,
    DialogInfo,
    Element,
    Expectation,
    FrameInfo,
    Observation,
    Reason,
    TabInfo,
)
from handrail.executor._snapshot import RefInfo, document_of
from handrail.executor.browser._aria import main_document
from handrail.executor.browser._context import (
    CHECK_ARM_CONTEXT,
    CHECK_ELEMENT_CONTEXT,
    CHECK_PICKED_CONTEXT,
    READ_FOCUSED_CONTEXT,
    effects_of,
    shown_text,
)
from handrail.executor.browser._expect import expectation_holds, wait_for
from handrail.executor.browser._failures import first_line, refused_before_input, status_after_error
from handrail.executor.browser._gate import NetworkGate
from handrail.executor.browser._live import LiveView
from handrail.executor.browser._pagescript import DISARM
from handrail.executor.browser._pixels import ARMED_POINT_KINDS, at_point, check_point, drag_by_refs, named, scale_png
from handrail.executor.browser._pointer import (
    ARM_EXTRA_MS,
    ARM_MS,
    ARMED_KINDS,
    POINTER_KINDS,
    CheckArm,
    MaybeStartedError,
    NotStartedError,
    PartlyTypedError,
    armed,
    by_playwright,
    guarded_click,
    on_picked,
)
from handrail.executor.browser._reading import TabReader
from handrail.executor.browser._tab import Tab
from handrail.executor.browser._workers import counts_workers, made_between, workers_now
from handrail.executor.browser._world import run

_SETTLE_MS = 3_000
# The URL of the previous entry of the tab's history (same-origin entries only: the
# Navigation API shows no other); "" when unknown, and the gate judges the load instead.
_PREVIOUS_ENTRY = (
    "() => { const n = window.navigation; if (!n || !n.currentEntry) return '';"
    " const e = n.entries()[n.currentEntry.index - 1]; return e ? e.url : ''; }"
)
_TWO_FRAMES = "() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(0))))"
_CHECK_TIMEOUT_MS = 1_000
# The element check and context in a child frame, with the URL of the frame's document:
# an action there is judged on where it happens, not on the tab's URL. A document without
# one of its own (about:srcdoc, about:blank) is its origin's; an opaque one keeps its URL,
# which no grant names.
_CHECK_IN_FRAME = (
    "(el, since) => { const f = (" + CHECK_ELEMENT_CONTEXT + ")(el, since);"
    " const l = el.ownerDocument.location;"
    " f.documentUrl = /^https?:$/.test(l.protocol) || l.origin === 'null' ? l.href : l.origin + '/';"
    " return f; }"
)
# Actions that start no request of the page's own.
_NO_REQUESTS = frozenset({ActionKind.WAIT_FOR, ActionKind.TAB_SWITCH, ActionKind.TAB_CLOSE, ActionKind.HOVER})
_EXPECT_DEFAULT_MS = 2_000
VIEWPORT = {"width": 1280, "height": 800}


class _NavigatedError(Exception):
    """The page navigated while it was being observed."""


class BrowserSurface(LiveView):
    """A session's browser context: its tabs, the active one, checks and dispatch."""

    kind = "browser"

    def __init__(self, context: BrowserContext, upload_dir: Path | None, *, pointer_clicks: bool = True) -> None:
        self._context = context
        self._pointer_clicks = pointer_clicks
        self._upload_dir = upload_dir
        self._ids = itertools.count(1)
        self._tabs: dict[str, Tab] = {}
        self._active = ""
        # What the latest observation saw, to tell what changed since.
        self._seen_navigations = 0
        self._seen_dialogs = 0
        self._seen_clock = 0.0
        self._last_facts: dict[str, Any] = {}
        self._arm: CheckArm | None = None  # armed with the last check, for its dispatch
        self._pending: set[asyncio.Future[None]] = set()
        self._note = ""
        # The ref prefix of the main frame's document in the latest snapshot ("" for the
        # first document, "f2" … after a navigation; a child frame's refs have another).
        self._main_document = ""
        self.gate = NetworkGate(context, self._tab_id_of)
        self._reader = TabReader()
        context.on("page", self._on_page)

    def _tab_id_of(self, page: Page) -> str:
        return next((t.tab_id for t in self._tabs.values() if t.page is page), "")

    def _on_page(self, page: Page) -> None:
        # A pop-up whose first load the gate held back is loaded (or closed) by the gate. A
        # refused one is closing: it is never listed, so an agent never sees it come and go.
        popup = self.gate.adopt_popup(page)
        if popup == "close":
            return
        tab = self.adopt(page, activate=False)
        if not popup:
            self._pending_gate(tab)

    def _pending_gate(self, tab: Tab) -> None:
        task = asyncio.ensure_future(self.gate.gate(tab.page))
        self._pending.add(task)
        task.add_done_callback(self._disposed)

    def listen(self, listener: SurfaceListener) -> None:
        self.gate.listener = listener

    async def start(self, url: str, timeout_ms: int) -> None:
        """Load the start page in the first tab, through the gate like any other load."""
        tab = self.active
        try:
            await tab.page.goto(url, wait_until="domcontentloaded", timeout=timeout_ms)
        except PlaywrightError as exc:
            raise BackendError(f"could not open {url}: {first_line(exc)}") from exc

    def adopt(self, page: Page, *, activate: bool) -> Tab:
        for tab in self._tabs.values():
            if tab.page is page:
                if activate:
                    self._active = tab.tab_id
                return tab
        tab = Tab(f"t{next(self._ids)}", page)
        self._tabs[tab.tab_id] = tab
        self.gate.watch(page, tab.navigation_requested)

        def closed(_: Page) -> None:
            self._tabs.pop(tab.tab_id, None)
            if self._active == tab.tab_id:  # the page closed itself, or the agent closed it
                self._active = next(reversed(self._tabs), "")

        page.on("close", closed)
        if activate or not self._active:
            self._active = tab.tab_id
        return tab

    async def _ensure_tab(self) -> str:
        """Open a blank tab when the session has none left; answer what was done.

        A session whose last tab closed (the agent's TAB_CLOSE, or the page's own
        ``window.close()``) stays usable: it gets a fresh blank tab, which the next
        observation shows as its only, active tab.
        """
        if self._tabs and self._active in self._tabs:
            return ""
        if self._tabs:
            self._active = next(reversed(self._tabs))
            return f"tab {self._active} is active now"
        page = await self._context.new_page()
        tab = self.adopt(page, activate=True)
        await self.gate.gate(page)
        return f"no tab was left open: a blank tab {tab.tab_id} was opened"

    @property
    def active(self) -> Tab:
        tab = self._tabs.get(self._active)
        if tab is None:
            raise BackendError("the session's active tab was closed; switch to another tab")
        return tab

    # -- observe ----------------------------------------------------------------------

    async def observe(self, options: ObserveOptions) -> RawObservation:
        await self._ensure_tab()
        # A navigation can land while observing (a late redirect, an error page): the
        # page's context is then gone mid-read. Read again once it has loaded.
        for attempt in range(4):
            try:
                return await self._observe(options)
            except _NavigatedError as exc:
                if attempt == 3:
                    raise BackendError(f"could not observe the page: it keeps navigating ({exc})") from exc
                with contextlib.suppress(PlaywrightError):
                    await self.active.page.wait_for_load_state("domcontentloaded", timeout=_SETTLE_MS)
        raise AssertionError("unreachable")

    async def _observe(self, options: ObserveOptions) -> RawObservation:
        tab = self.active
        page = tab.page
        dialogs = tuple(DialogInfo(d.type, d.message) for d in tab.dialogs)
        elements: tuple[Element, ...] = ()
        try:
            if tab.dialogs:
                # A JS dialog blocks the page's scripts: no snapshot until it is handled.
                snapshot, mutations, clock, title = "", 0, self._seen_clock, ""
            else:
                viewport = (VIEWPORT["width"], VIEWPORT["height"]) if options.viewport_only else None
                reading = await self._reader.read(
                    page, tab.tab_id, depth=options.depth, viewport=viewport, document=tab.navigations
                )
                snapshot, elements = reading.snapshot, reading.elements
                mutations, clock, title = reading.mutations, reading.clock, reading.title
            png = b""
            scale = options.screenshot_scale or 1.0
            if options.screenshot and not tab.dialogs:
                png = await page.screenshot(type="png", scale="css", caret="initial")  # caret: _pixels
                if scale < 1.0:
                    png = scale_png(png, scale)
        except PlaywrightError as exc:
            if "context was destroyed" in exc.message or "navigat" in exc.message:
                raise _NavigatedError(exc.message) from exc
            raise BackendError(f"could not observe the page: {exc.message}") from exc
        self._seen_navigations = tab.navigations
        self._seen_dialogs = tab.dialogs_opened
        self._seen_clock = float(clock)
        document = main_document(elements)
        if document is not None:  # a dialog's empty snapshot says nothing about it
            self._main_document = document
        frames = tuple(
            FrameInfo(frame_id="" if f is page.main_frame else f"f{i}", name=f.name, url=f.url)
            for i, f in enumerate(page.frames)
        )
        tabs = []
        for t in list(self._tabs.values()):
            other_title = title if t is tab else ""
            if t is not tab and not t.dialogs:
                with contextlib.suppress(PlaywrightError):
                    other_title = await t.page.title()
            tabs.append(TabInfo(t.tab_id, t.page.url, other_title, t is tab))
        return RawObservation(
            url=page.url,
            title=title,
            snapshot=snapshot,
            screenshot_png=png,
            screenshot_scale=scale if png else 1.0,
            tabs=tuple(tabs),
            active_tab=tab.tab_id,
            frames=frames,
            dialogs=dialogs,
            viewport_width=VIEWPORT["width"],
            viewport_height=VIEWPORT["height"],
            mutation_counter=int(mutations),
            elements=elements,
        )

    # -- checks -----------------------------------------------------------------------

    async def check_fresh(self, cited: Observation, spec: ActionSpec, target: RefInfo | None) -> Refusal | None:
        self._last_facts = {}
        await self.release()
        # Arguments that only the surface can judge are judged now, before any intent.
        if spec.kind is ActionKind.UPLOAD:
            self._upload_paths(spec.files)
        if spec.kind in (ActionKind.TAB_SWITCH, ActionKind.TAB_CLOSE):
            self._require_tab(spec.tab_id)
        tab = self._tabs.get(cited.active_tab)
        if tab is None:
            return Refusal(Reason.STALE_OBSERVATION, f"tab {cited.active_tab} of the observation is closed")
        if tab.tab_id != self._active:
            return Refusal(Reason.STALE_OBSERVATION, f"the active tab is now {self._active}, not {tab.tab_id}")
        if tab.navigations != self._seen_navigations:
            return Refusal(Reason.STALE_OBSERVATION, f"the page navigated since observation {cited.observation_id}")
        if spec.kind in (ActionKind.DIALOG_ACCEPT, ActionKind.DIALOG_DISMISS):
            if not tab.dialogs:
                return Refusal(Reason.STALE_OBSERVATION, "no dialog is open")
            return None
        if tab.dialogs_opened != self._seen_dialogs or tab.dialogs:
            kind = tab.dialogs[-1].type if tab.dialogs else "a"
            return Refusal(Reason.STALE_OBSERVATION, f"a {kind} dialog opened; observe and handle it first")
        # The input guard is armed in the check's round trip, not the dispatch's (a point
        # action; a click by the executor's pointer); ``release`` disarms it if none comes.
        token = secrets.token_hex(8)
        if spec.bound_point is not None:  # a pixel action (executor/_points.py)
            arm = None
            if target is not None and spec.kind in ARMED_POINT_KINDS:
                arm = (token, (spec.timeout_ms or DEFAULT_ACTION_TIMEOUT_MS) + 2_000 + ARM_EXTRA_MS)
            refusal, self._last_facts = await check_point(tab.page, spec, target, self._seen_clock, named, arm)
            self._armed_with_check(spec, token)
            return refusal
        if target is None:
            return None
        if spec.to_ref:  # a drag by ref: its drop target first, as a click's ref is checked
            refusal = await self._check_element(tab.page, RefInfo(spec.to_ref, "drop target", "", ""))
            if refusal is not None:
                return refusal
        pointer = spec.kind in POINTER_KINDS and self._pointer_clicks and target.frame == self._main_document
        refusal = await self._check_element(tab.page, target, token if pointer else "")
        self._armed_with_check(spec, token)
        return refusal

    def _armed_with_check(self, spec: ActionSpec, token: str) -> None:
        answer = self._last_facts.get("armed")
        if isinstance(answer, dict) and not answer.get("problem"):
            self._arm = CheckArm(token, spec.ref, answer, time.monotonic())

    async def release(self) -> None:
        arm, self._arm = self._arm, None
        if arm is not None and "fallback" not in arm.answer:
            with contextlib.suppress(PlaywrightError, BackendError):  # a page gone: nothing is armed
                await run(self.active.page, DISARM, arm.token)

    async def _check_element(self, page: Page, info: RefInfo, arm_token: str = "") -> Refusal | None:
        # The ref still resolves (a lookup in the snapshot's ref map: the very element
        # object the observation named — the count pre-check), and the page script finds
        # it attached, unchanged since the observation — nor its ancestors, its labels or
        # its content, so its role and accessible name are the ones observed — visible,
        # enabled and not covered. With ``arm_token``, the guard is armed on it for the
        # executor's pointer in the same round trip.
        count, facts = 1, None
        if info.frame == self._main_document and arm_token:
            hold, picked = ARM_MS + ARM_EXTRA_MS, CHECK_ARM_CONTEXT
            count, facts = await on_picked(page, info.ref, picked, self._seen_clock, None, arm_token, hold, "pointer")
        elif info.frame == self._main_document:
            count, facts = await on_picked(page, info.ref, CHECK_PICKED_CONTEXT, self._seen_clock)
        if count == 1 and facts is None:  # a child frame's element, or one not handed over
            try:
                count, facts = await self._facts_by_handle(page, info)
            except PlaywrightError as exc:
                return Refusal(Reason.STALE_REF, f"ref {info.ref} could not be checked: {first_line(exc)}")
        if count != 1 or facts is None:
            return Refusal(Reason.STALE_REF, f"ref {info.ref} no longer resolves ({info.role} {info.name!r} is gone)")
        if facts.get("problem"):
            return Refusal(Reason.STALE_REF, f"{named(info)}: {facts['problem']}")
        self._last_facts = facts
        return None

    async def _facts_by_handle(self, page: Page, info: RefInfo) -> tuple[int, dict[str, Any] | None]:
        # In a frame (or where the hand-over to the page's world failed) the page script
        # runs on the element's handle: the ref resolved in Playwright's world, adopted
        # into the frame's. The count pre-check goes out with it: the handle is the slow
        # part, and it is wasted only when the ref is gone.
        ref = page.locator(f"aria-ref={info.ref}")
        counting = asyncio.ensure_future(ref.count())
        handling = asyncio.ensure_future(ref.element_handle(timeout=_CHECK_TIMEOUT_MS))
        try:
            count = await counting
            if count != 1:
                handling.cancel()
                await asyncio.gather(handling, return_exceptions=True)
                return count, None
            handle = await handling
            try:
                facts: dict[str, Any] = await handle.evaluate(_CHECK_IN_FRAME, self._seen_clock)
            finally:
                self._dispose_later(handle)
        except PlaywrightError:
            await asyncio.gather(counting, handling, return_exceptions=True)
            raise
        return count, facts

    def _dispose_later(self, handle: ElementHandle) -> None:
        # Releasing the handle needs no answer: it is sent, not awaited.
        task = asyncio.ensure_future(handle.dispose())
        self._pending.add(task)
        task.add_done_callback(self._disposed)

    def _disposed(self, task: asyncio.Future[None]) -> None:
        self._pending.discard(task)
        if not task.cancelled():
            task.exception()  # a page that went away meanwhile: nothing to release

    async def describe(self, spec: ActionSpec, target: RefInfo | None) -> AuthzResource:
        """The action as the sidecar judges it: by its effect, with its element's context."""
        kind, page = spec.kind, self.active.page
        facts: dict[str, Any] | None = self._last_facts.get("context") if target else None
        if target is None and kind in (ActionKind.PRESS, ActionKind.HOTKEY):
            with contextlib.suppress(PlaywrightError):  # the key goes to the focused element
                facts = await page.evaluate(READ_FOCUSED_CONTEXT)
        key = spec.key or (spec.keys[-1] if spec.keys else "")
        verb, effects = effects_of(kind, facts, key=key, text=spec.text)
        url, document_load = page.url, False
        if kind in (ActionKind.NAVIGATE, ActionKind.TAB_OPEN):
            url, document_load = spec.url, True
        elif kind is ActionKind.BACK:
            with contextlib.suppress(PlaywrightError):
                previous = await page.evaluate(_PREVIOUS_ENTRY)
                if previous:
                    url, document_load = str(previous), True
        elif kind is ActionKind.TAB_SWITCH and spec.tab_id in self._tabs:
            url = self._tabs[spec.tab_id].page.url
        elif target is not None and target.frame != self._main_document and facts is not None:
            url = str(self._last_facts.get("documentUrl") or url)  # in a child frame: the frame's
        context = facts or {}
        return AuthzResource(
            url=url,
            element_role=target.role if target else "",
            element_name=target.name if target else "",
            password_field=bool(self._last_facts.get("password")),
            verb=verb,
            dialog_title=str(context.get("dialog", "")),
            form_name=str(context.get("form", "")),
            heading=str(context.get("heading", "")),
            description=str(context.get("description", "")),
            visible_text=shown_text(context, target.name if target else ""),
            effects=effects,
            document_load=document_load,
        )

    # -- act --------------------------------------------------------------------------

    async def dispatch(self, spec: ActionSpec, timeout_ms: int) -> DispatchResult:
        self._note = ""  # what the action did besides its input, for the result's message
        tab = self.active
        page = tab.page
        navigations, made, attached = tab.navigations, tab.workers_made, self.gate.workers_attached(page)
        counted = await workers_now(page) if counts_workers(spec) else None  # no report will say
        try:
            via = await self._dispatch(spec, timeout_ms)
            # The guarded inputs ("pointer", "point") waited for a navigation they started;
            # when none committed there is no load to wait for.
            guarded_still = via in ("pointer", "point") and tab.navigations == navigations
            if spec.kind not in _NO_REQUESTS and not guarded_still:
                # Let a navigation or a form post the action started commit or fail.
                with contextlib.suppress(PlaywrightError):
                    await page.wait_for_load_state("domcontentloaded", timeout=min(timeout_ms, _SETTLE_MS))
            if spec.kind not in _NO_REQUESTS:
                if counted is not None:
                    tab.workers_made += made_between(counted, await workers_now(page))
                await self.gate.flush_workers(page, made=tab.workers_made - made, attached=attached)  # its workers
        except InvalidArgumentError as exc:  # judged in check_fresh; changed since: not sent
            return DispatchResult(DispatchStatus.NOT_STARTED, str(exc))
        except NotStartedError as exc:
            return DispatchResult(DispatchStatus.NOT_STARTED, str(exc), reason=exc.reason)
        except PartlyTypedError as exc:
            partly = DispatchStatus.PARTIAL
            return DispatchResult(partly, str(exc), typed_chars=exc.typed_chars, reason=Reason.STALE_REF)
        except MaybeStartedError as exc:
            return DispatchResult(DispatchStatus.MAYBE_STARTED, str(exc))
        except PlaywrightTimeoutError as exc:
            return DispatchResult(status_after_error(exc, spec.kind), first_line(exc))
        except PlaywrightError as exc:
            if "ERR_BLOCKED_BY_CLIENT" in (exc.message or "") or "ERR_ABORTED" in (exc.message or ""):
                # The gate refused a load the action led to (a redirect out of scope):
                # it never left the browser, the page stays where it was.
                return DispatchResult(DispatchStatus.PARTIAL, f"the browser was stopped: {first_line(exc)}")
            if refused_before_input(exc):  # Playwright refused the element: nothing was sent
                return DispatchResult(DispatchStatus.NOT_STARTED, first_line(exc))
            # A closed target or a crash mid-action: the page may have got the input.
            return DispatchResult(DispatchStatus.MAYBE_STARTED, first_line(exc))
        # Side-effecting requests the action started are the loop's to judge (it knows which
        # action each belongs to); a document that failed to load is judged here.
        if page.url.startswith("chrome-error:"):
            what = "the page ended on an error page"
            return DispatchResult(DispatchStatus.MAYBE_STARTED, f"{what}: the server may have processed it", via=via)
        return DispatchResult(DispatchStatus.DONE, self._note, via=via)

    async def _dispatch(self, spec: ActionSpec, timeout_ms: int) -> str:
        """Send the action to the page; answer how a pointer action went out."""
        tab = self.active
        page = tab.page
        kind = spec.kind
        locator = page.locator(f"aria-ref={spec.ref}") if spec.ref else None
        arm, self._arm = self._arm, None
        if arm is not None and not arm.usable(spec):  # held too long: armed anew below
            self._arm = arm
            await self.release()
            arm = None
        if spec.bound_point is not None:
            await at_point(page, tab, spec, self._seen_clock, timeout_ms, arm.token if arm else "")
            return "point"
        if kind is ActionKind.DRAG:  # by ref: from the centre of one element to the other's
            await drag_by_refs(page, tab, spec, self._seen_clock, timeout_ms)
            return "point"
        if kind is ActionKind.NAVIGATE:
            try:
                await page.goto(spec.url, wait_until="domcontentloaded", timeout=timeout_ms)
            except PlaywrightError as exc:
                if "interrupted by another navigation" not in (exc.message or ""):
                    raise
                # A load the page had started won (the error page of a post that lost its
                # response commits late): a GET, so it is sent once more.
                await page.goto(spec.url, wait_until="domcontentloaded", timeout=timeout_ms)
        elif kind is ActionKind.BACK:
            await page.go_back(wait_until="domcontentloaded", timeout=timeout_ms)
        elif kind is ActionKind.TAB_OPEN:
            new = await self._context.new_page()
            self.adopt(new, activate=True)
            await self.gate.gate(new)
            await new.goto(spec.url, wait_until="domcontentloaded", timeout=timeout_ms)
        elif kind is ActionKind.TAB_SWITCH:
            self._require_tab(spec.tab_id)
            self._active = spec.tab_id
            await self._tabs[spec.tab_id].page.bring_to_front()
        elif kind is ActionKind.TAB_CLOSE:
            closing = self._require_tab(spec.tab_id)
            await closing.page.close()
            self._tabs.pop(spec.tab_id, None)
            if self._active == spec.tab_id:
                self._active = next(reversed(self._tabs), "")
            self._note = await self._ensure_tab()
        elif kind in (ActionKind.DIALOG_ACCEPT, ActionKind.DIALOG_DISMISS):
            dialog = tab.dialogs.pop(0)
            if kind is ActionKind.DIALOG_ACCEPT:
                await dialog.accept(spec.text) if spec.text else await dialog.accept()
            else:
                await dialog.dismiss()
        elif kind is ActionKind.HOTKEY and locator is None:
            await page.keyboard.press("+".join(spec.keys))
        elif kind is ActionKind.PRESS and locator is None:
            await page.keyboard.press(spec.key)
        elif kind is ActionKind.SCROLL:
            if locator is not None:
                await locator.hover(timeout=timeout_ms)
            await page.mouse.wheel(spec.delta_x, spec.delta_y)
            # The wheel returns before the page has scrolled: let two frames pass.
            await page.evaluate(_TWO_FRAMES)
        elif kind is ActionKind.WAIT_FOR:
            await wait_for(page, spec.wait_for, timeout_ms)
        else:
            assert locator is not None  # validated: these kinds need a ref
            main = document_of(spec.ref) == self._main_document  # a child frame's: Playwright's
            if (
                kind in POINTER_KINDS
                and self._pointer_clicks
                and main
                and await guarded_click(
                    tab.page, tab, spec, self._seen_clock, timeout_ms, (arm.token, arm.answer) if arm else None
                )
            ):
                return "pointer"
            mode = ARMED_KINDS.get(kind)
            if mode is not None:
                async with armed(page, tab, spec.ref, self._seen_clock, mode, timeout_ms, by_handle=not main):
                    await by_playwright(locator, spec, timeout_ms, self._upload_paths)
            else:
                await by_playwright(locator, spec, timeout_ms, self._upload_paths)
        return "playwright" if kind in POINTER_KINDS else ""

    def _require_tab(self, tab_id: str) -> Tab:
        tab = self._tabs.get(tab_id)
        if tab is None:
            raise InvalidArgumentError("tab_id", f"no tab {tab_id!r} in this session")
        return tab

    def _upload_paths(self, files: tuple[str, ...]) -> list[str]:
        if self._upload_dir is None:
            raise InvalidArgumentError("files", "uploads are off: the executor has no --upload-dir")
        paths = []
        for i, name in enumerate(files):
            path = (self._upload_dir / name).resolve()
            if not path.is_relative_to(self._upload_dir) or not path.is_file():
                raise InvalidArgumentError(f"files[{i}]", f"{name!r} is not a file in the upload directory")
            paths.append(str(path))
        return paths

    async def settle(self, timeout_ms: int) -> None:
        # The re-observation reports what the page shows, settled or not.
        with contextlib.suppress(PlaywrightError, BackendError):
            await self.active.page.wait_for_load_state("domcontentloaded", timeout=timeout_ms)

    async def expectation_holds(self, expect: Expectation, cited_refs: dict[str, RefInfo]) -> tuple[bool, str]:
        return await expectation_holds(self.active.page, expect, cited_refs)

    async def close(self) -> None:
        await self.gate.close()
        with contextlib.suppress(PlaywrightError):  # already gone with the browser
            await self._context.close()
