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
import re
from collections.abc import AsyncIterator
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
)
from handrail.executor._errors import BackendError, InvalidArgumentError
from handrail.executor._live import Box, HumanInput, ScreenFrame
from handrail.executor._models import (
    ActionKind,
    ActionSpec,
    DialogInfo,
    Expectation,
    FrameInfo,
    Observation,
    Reason,
    TabInfo,
    WaitFor,
)
from handrail.executor._snapshot import RefInfo, document_of
from handrail.executor.browser._aria import main_document, viewport_filter
from handrail.executor.browser._live import Screencast, human_input, locate
from handrail.executor.browser._pagescript import CHECK_ELEMENT, CHECK_PICKED, READ_CLOCK
from handrail.executor.browser._pointer import (
    POINTER_KINDS,
    MaybeStartedError,
    NotStartedError,
    guarded_click,
    on_picked,
)
from handrail.executor.browser._tab import Tab

_SETTLE_MS = 3_000
_TWO_FRAMES = "() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(0))))"
_CHECK_TIMEOUT_MS = 1_000
# Actions that start no request of the page's own.
_NO_REQUESTS = frozenset({ActionKind.WAIT_FOR, ActionKind.TAB_SWITCH, ActionKind.TAB_CLOSE, ActionKind.HOVER})
_EXPECT_DEFAULT_MS = 2_000
VIEWPORT = {"width": 1280, "height": 800}
_VIEWPORT_SIZE = (VIEWPORT["width"], VIEWPORT["height"])


class _NavigatedError(Exception):
    """The page navigated while it was being observed."""


class BrowserSurface:
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
        self._pending: set[asyncio.Future[None]] = set()
        # The ref prefix of the main frame's document in the latest snapshot ("" for the
        # first document, "f2" … after a navigation; a child frame's refs have another).
        self._main_document = ""
        self._cast: Screencast | None = None
        context.on("page", self._on_page)

    def _on_page(self, page: Page) -> None:
        self.adopt(page, activate=False)

    def adopt(self, page: Page, *, activate: bool) -> Tab:
        for tab in self._tabs.values():
            if tab.page is page:
                if activate:
                    self._active = tab.tab_id
                return tab
        tab = Tab(f"t{next(self._ids)}", page)
        self._tabs[tab.tab_id] = tab

        def closed(_: Page) -> None:
            self._tabs.pop(tab.tab_id, None)

        page.on("close", closed)
        if activate or not self._active:
            self._active = tab.tab_id
        return tab

    @property
    def active(self) -> Tab:
        tab = self._tabs.get(self._active)
        if tab is None:
            raise BackendError("the session's active tab was closed; switch to another tab")
        return tab

    # -- observe ----------------------------------------------------------------------

    async def observe(self, options: ObserveOptions) -> RawObservation:
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
        try:
            if tab.dialogs:
                # A JS dialog blocks the page's scripts: no snapshot until it is handled.
                snapshot, mutations, clock, title = "", 0, self._seen_clock, ""
            else:
                # Both go out at once; the page runs them in order, so the clock is read
                # before the snapshot is taken (a change in between counts as a change).
                (mutations, clock, title), snapshot = await asyncio.gather(
                    page.evaluate(READ_CLOCK),
                    page.aria_snapshot(
                        mode="ai", depth=options.depth or None, boxes=options.viewport_only or None, timeout=5_000
                    ),
                )
                if options.viewport_only:
                    snapshot = viewport_filter(snapshot, VIEWPORT["width"], VIEWPORT["height"])
            png = b""
            scale = options.screenshot_scale or 1.0
            if options.screenshot and not tab.dialogs:
                png = await page.screenshot(type="png", scale="css")
                if scale < 1.0:
                    png = _scale_png(png, scale)
        except PlaywrightError as exc:
            if "context was destroyed" in exc.message or "navigat" in exc.message:
                raise _NavigatedError(exc.message) from exc
            raise BackendError(f"could not observe the page: {exc.message}") from exc
        self._seen_navigations = tab.navigations
        self._seen_dialogs = tab.dialogs_opened
        self._seen_clock = float(clock)
        document = main_document(snapshot)
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
        )

    # -- checks -----------------------------------------------------------------------

    async def check_fresh(self, cited: Observation, spec: ActionSpec, target: RefInfo | None) -> Refusal | None:
        self._last_facts = {}
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
        if target is None:
            return None
        return await self._check_element(tab.page, target)

    async def _check_element(self, page: Page, info: RefInfo) -> Refusal | None:
        # The ref still resolves (a lookup in the snapshot's ref map: the very element
        # object the observation named — the count pre-check), and the page script finds
        # it attached, unchanged since the observation — nor its ancestors, its labels or
        # its content, so its role and accessible name are the ones observed — visible,
        # enabled and not covered.
        count, facts = 1, None
        if info.frame == self._main_document:
            count, facts = await on_picked(page, info.ref, CHECK_PICKED, self._seen_clock)
        if count == 1 and facts is None:  # a child frame's element, or one not handed over
            try:
                count, facts = await self._facts_by_handle(page, info)
            except PlaywrightError as exc:
                return Refusal(Reason.STALE_REF, f"ref {info.ref} could not be checked: {_first_line(exc)}")
        if count != 1 or facts is None:
            return Refusal(Reason.STALE_REF, f"ref {info.ref} no longer resolves ({info.role} {info.name!r} is gone)")
        if facts.get("problem"):
            return Refusal(Reason.STALE_REF, f"{info.role} {info.name!r} ({info.ref}): {facts['problem']}")
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
                facts: dict[str, Any] = await handle.evaluate(CHECK_ELEMENT, self._seen_clock)
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
        url = spec.url if spec.kind in (ActionKind.NAVIGATE, ActionKind.TAB_OPEN) else self.active.page.url
        if spec.kind is ActionKind.TAB_SWITCH and spec.tab_id in self._tabs:
            url = self._tabs[spec.tab_id].page.url
        return AuthzResource(
            url=url,
            element_role=target.role if target else "",
            element_name=target.name if target else "",
            password_field=bool(self._last_facts.get("password")),
        )

    # -- act --------------------------------------------------------------------------

    async def dispatch(self, spec: ActionSpec, timeout_ms: int) -> DispatchResult:
        tab = self.active
        page = tab.page
        seen = list(tab.failed_requests)
        try:
            via = await self._dispatch(spec, timeout_ms)
            if spec.kind not in _NO_REQUESTS:
                # Let a navigation or a form post the action started commit or fail.
                with contextlib.suppress(PlaywrightError):
                    await page.wait_for_load_state("domcontentloaded", timeout=min(timeout_ms, _SETTLE_MS))
        except InvalidArgumentError as exc:  # judged in check_fresh; changed since: not sent
            return DispatchResult(DispatchStatus.NOT_STARTED, str(exc))
        except NotStartedError as exc:
            return DispatchResult(DispatchStatus.NOT_STARTED, str(exc), reason=exc.reason)
        except MaybeStartedError as exc:
            return DispatchResult(DispatchStatus.MAYBE_STARTED, str(exc))
        except PlaywrightTimeoutError as exc:
            return DispatchResult(_status_after_error(exc, spec.kind), _first_line(exc))
        except PlaywrightError as exc:
            # A closed target or a crash mid-action: the page may have got the input.
            return DispatchResult(DispatchStatus.MAYBE_STARTED, _first_line(exc))
        failed = [r for r in tab.failed_requests if r not in seen]
        lost = [r for r in failed if r.method != "GET" or r.resource_type == "document"]
        if lost or page.url.startswith("chrome-error:"):
            what = (
                f"{lost[0].method} {lost[0].url} failed ({lost[0].failure})"
                if lost
                else "the page ended on an error page"
            )
            return DispatchResult(DispatchStatus.MAYBE_STARTED, f"{what}: the server may have processed it", via=via)
        return DispatchResult(DispatchStatus.DONE, via=via)

    async def _dispatch(self, spec: ActionSpec, timeout_ms: int) -> str:
        """Send the action to the page; answer how a pointer action went out."""
        tab = self.active
        page = tab.page
        kind = spec.kind
        locator = page.locator(f"aria-ref={spec.ref}") if spec.ref else None
        button: Any = spec.button or "left"
        if kind is ActionKind.NAVIGATE:
            await page.goto(spec.url, wait_until="domcontentloaded", timeout=timeout_ms)
        elif kind is ActionKind.BACK:
            await page.go_back(wait_until="domcontentloaded", timeout=timeout_ms)
        elif kind is ActionKind.TAB_OPEN:
            new = await self._context.new_page()
            self.adopt(new, activate=True)
            await new.goto(spec.url, wait_until="domcontentloaded", timeout=timeout_ms)
        elif kind is ActionKind.TAB_SWITCH:
            self._require_tab(spec.tab_id)
            self._active = spec.tab_id
            await self._tabs[spec.tab_id].page.bring_to_front()
        elif kind is ActionKind.TAB_CLOSE:
            closing = self._require_tab(spec.tab_id)
            await closing.page.close()
            if self._active == spec.tab_id:
                self._active = next(reversed(self._tabs), "") if self._tabs else ""
        elif kind in (ActionKind.DIALOG_ACCEPT, ActionKind.DIALOG_DISMISS):
            dialog = tab.dialogs.pop(0)
            if kind is ActionKind.DIALOG_ACCEPT:
                await dialog.accept(spec.text) if spec.text else await dialog.accept()
            else:
                await dialog.dismiss()
        elif kind is ActionKind.HOTKEY:
            combo = "+".join(spec.keys)
            if locator is not None:
                await locator.press(combo, timeout=timeout_ms)
            else:
                await page.keyboard.press(combo)
        elif kind is ActionKind.PRESS:
            if locator is not None:
                await locator.press(spec.key, timeout=timeout_ms)
            else:
                await page.keyboard.press(spec.key)
        elif kind is ActionKind.SCROLL:
            if locator is not None:
                await locator.hover(timeout=timeout_ms)
            await page.mouse.wheel(spec.delta_x, spec.delta_y)
            # The wheel returns before the page has scrolled: let two frames pass.
            await page.evaluate(_TWO_FRAMES)
        elif kind is ActionKind.WAIT_FOR:
            await self._wait_for(page, spec.wait_for, timeout_ms)
        else:
            assert locator is not None  # validated: these kinds need a ref
            if (
                kind in POINTER_KINDS
                and self._pointer_clicks
                and document_of(spec.ref) == self._main_document  # a child frame's: Playwright's
                and await guarded_click(tab.page, tab, spec, self._seen_clock, timeout_ms)
            ):
                return "pointer"
            if kind is ActionKind.CLICK:
                await locator.click(timeout=timeout_ms, button=button, click_count=spec.click_count or 1)
            elif kind is ActionKind.DOUBLE_CLICK:
                await locator.dblclick(timeout=timeout_ms, button=button)
            elif kind is ActionKind.HOVER:
                await locator.hover(timeout=timeout_ms)
            elif kind is ActionKind.FILL:
                await locator.fill(spec.text, timeout=timeout_ms)
            elif kind is ActionKind.TYPE:
                await locator.press_sequentially(spec.text, delay=spec.key_delay_ms, timeout=timeout_ms)
            elif kind is ActionKind.SELECT:
                await locator.select_option(list(spec.values), timeout=timeout_ms)
            elif kind is ActionKind.CHECK:
                await locator.check(timeout=timeout_ms)
            elif kind is ActionKind.UNCHECK:
                await locator.uncheck(timeout=timeout_ms)
            elif kind is ActionKind.UPLOAD:
                await locator.set_input_files(self._upload_paths(spec.files), timeout=timeout_ms)
            else:
                raise InvalidArgumentError("kind", f"{kind.value} is not a browser action")
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

    async def _wait_for(self, page: Page, wait: WaitFor, timeout_ms: int) -> None:
        state: Any = "hidden" if wait.gone else "visible"
        if wait.url_matches:
            await page.wait_for_url(re.compile(wait.url_matches), timeout=timeout_ms)
        if wait.text:
            await page.get_by_text(wait.text).first.wait_for(state=state, timeout=timeout_ms)
        if wait.role:
            loc = page.get_by_role(wait.role, name=wait.name or None, exact=True)  # type: ignore[arg-type]
            await loc.first.wait_for(state=state, timeout=timeout_ms)

    async def settle(self, timeout_ms: int) -> None:
        # The re-observation reports what the page shows, settled or not.
        with contextlib.suppress(PlaywrightError, BackendError):
            await self.active.page.wait_for_load_state("domcontentloaded", timeout=timeout_ms)

    async def expectation_holds(self, expect: Expectation, cited_refs: dict[str, RefInfo]) -> tuple[bool, str]:
        page = self.active.page
        budget = expect.within_ms or _EXPECT_DEFAULT_MS
        state: Any = "hidden" if expect.gone else "visible"
        failures: list[str] = []

        async def wait(what: str, coro: Any) -> None:
            try:
                await coro
            except PlaywrightError:
                failures.append(what)

        if expect.url_matches:
            await wait(
                f"URL {page.url} does not match {expect.url_matches!r}",
                page.wait_for_url(re.compile(expect.url_matches), timeout=budget),
            )
        if expect.text_visible:
            await wait(
                f"text {expect.text_visible!r} is {'still' if expect.gone else 'not'} visible",
                page.get_by_text(expect.text_visible).first.wait_for(state=state, timeout=budget),
            )
        if expect.role:
            loc = page.get_by_role(expect.role, name=expect.name or None, exact=True)  # type: ignore[arg-type]
            await wait(
                f"{expect.role} {expect.name!r} is {'still' if expect.gone else 'not'} visible",
                loc.first.wait_for(state=state, timeout=budget),
            )
        if expect.field_ref:
            info = cited_refs.get(expect.field_ref)
            if info is None:
                failures.append(f"field {expect.field_ref} is not a ref of the cited observation")
            else:
                field = page.get_by_role(info.role, name=info.name, exact=True)  # type: ignore[arg-type]
                try:
                    value = await field.first.input_value(timeout=budget)
                except PlaywrightError as exc:
                    value = f"<unreadable: {_first_line(exc)}>"
                if value != expect.field_value:
                    failures.append(f"field {info.name!r} holds {value!r}, not {expect.field_value!r}")
        return (not failures), "; ".join(failures)

    # -- the operator console: live view, a person's input (``executor._live``) --------------

    def live_frames(self, max_width: int, max_height: int, quality: int) -> AsyncIterator[ScreenFrame]:
        if self._cast is None:
            self._cast = Screencast(lambda: (self.active.tab_id, self.active.page), _VIEWPORT_SIZE)
        return self._cast.frames(max_width, max_height, quality)

    async def human_input(self, spec: HumanInput, timeout_ms: int) -> DispatchResult:
        return await asyncio.wait_for(human_input(self.active.page, spec, _VIEWPORT_SIZE), timeout_ms / 1000)

    def current_url(self) -> str:
        return self.active.page.url

    async def locate(self, role: str, name: str) -> Box | None:
        return await locate(self.active.page, role, name)

    async def close(self) -> None:
        with contextlib.suppress(PlaywrightError):  # already gone with the browser
            await self._context.close()


def _scale_png(png: bytes, scale: float) -> bytes:
    import io

    from PIL import Image

    with Image.open(io.BytesIO(png)) as img:
        size = (max(1, round(img.width * scale)), max(1, round(img.height * scale)))
        out = io.BytesIO()
        img.resize(size, Image.Resampling.LANCZOS).save(out, format="PNG")
    return out.getvalue()


def _first_line(exc: PlaywrightError) -> str:
    return exc.message.splitlines()[0] if exc.message else type(exc).__name__


def _status_after_error(exc: PlaywrightError, kind: ActionKind) -> DispatchStatus:
    """Whether a timed-out action may have reached the page.

    Playwright logs "performing <action> action" once it starts to dispatch input; a
    timeout before that line (element hidden, covered, disabled) means nothing was sent.
    A navigation that timed out may have reached the server; a wait sends nothing.
    """
    if kind is ActionKind.WAIT_FOR:
        return DispatchStatus.NOT_STARTED
    if kind in (ActionKind.NAVIGATE, ActionKind.BACK, ActionKind.TAB_OPEN):
        return DispatchStatus.MAYBE_STARTED
    log = exc.message or ""
    if "performing" in log or "action done" in log:
        return DispatchStatus.MAYBE_STARTED
    return DispatchStatus.NOT_STARTED
