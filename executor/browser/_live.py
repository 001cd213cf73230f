"""The browser's live view and a person's input: a CDP screencast, and trusted input events.

``Screencast`` runs ``Page.startScreencast`` on the session's active tab through a
Playwright CDP session and fans its frames out to every viewer; a viewer that falls behind
gets the newest frame, never a queue of old ones. When the active tab changes, the cast
moves to it. A frame's metadata (``deviceWidth``, ``offsetTop``, ``pageScaleFactor``)
says how its pixels map to the page's CSS pixels (see ``executor._live``).

A person's input goes in as Playwright's mouse and keyboard input — trusted events, as a
real user's — at CSS pixels of the viewport.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from playwright.async_api import CDPSession, Page
from playwright.async_api import Error as PlaywrightError

from handrail.executor._backend import DispatchResult, DispatchStatus
from handrail.executor._errors import BackendError
from handrail.executor._live import HumanInput, ScreenBox, ScreenFrame
from handrail.executor._models import ActionKind
from handrail.executor.browser._tab import Tab
from handrail.executor.browser._world import run

log = logging.getLogger(__name__)

_MAX_SIDE = 4096
_RETARGET_S = 0.5  # how often a cast looks whether the active tab changed
_NAVIGATION_WAIT_S = 2.0  # how long a person's input waits for the navigation it started
_NEXT_TASK = "() => new Promise(r => setTimeout(r, 0))"
_NEXT_TASK_WAIT_S = 0.25
# Where a person's input lands (the element at the point; the focused one for keys): can
# it take the page somewhere? A link, a submit control, a frame (its page is not ours to
# read); for keys, anything in a form or a link.
_MAY_NAVIGATE = """([x, y]) => {
  const active = document.activeElement;
  const at = document.elementFromPoint(x, y);
  const link = (el) => !!(el && el.closest("a[href], area[href]"));
  const submits = (el) => {
    const c = el && el.closest("button, input");
    return !!(c && c.form && (c.type === "submit" || c.type === "image"));
  };
  const frame = (el) => !!(el && el.closest("iframe, frame, object, embed"));
  const keys = link(active) || frame(active) || !!(active && active.closest && active.closest("form"));
  return { point: link(at) || submits(at) || frame(at), keys };
}"""


class _Viewer:
    def __init__(self) -> None:
        self.latest: ScreenFrame | None = None
        self.ready = asyncio.Event()


class Screencast:
    """One screencast of a session's active tab, shared by its viewers.

    Args:
        active_page: the session's active tab now (called again to follow tab switches).
        viewport: the viewport size in CSS pixels.
    """

    def __init__(self, active_page: Callable[[], tuple[str, Page]], viewport: tuple[int, int]) -> None:
        self._active_page = active_page
        self._viewport = viewport
        self._viewers: set[_Viewer] = set()
        self._task: asyncio.Task[None] | None = None
        self._latest: ScreenFrame | None = None
        self._settings = (0, 0, 70)
        self._seq = 0

    async def frames(self, max_width: int, max_height: int, quality: int) -> AsyncIterator[ScreenFrame]:
        """The frames, newest first when the viewer lags, until the viewer stops."""
        viewer = _Viewer()
        if self._latest is not None:
            viewer.latest = self._latest
            viewer.ready.set()
        self._viewers.add(viewer)
        if self._task is None or self._task.done():
            self._settings = (max_width, max_height, quality or 70)
            self._task = asyncio.create_task(self._run())
        try:
            while True:
                await viewer.ready.wait()
                viewer.ready.clear()
                frame = viewer.latest
                if frame is not None:
                    yield frame
        finally:
            self._viewers.discard(viewer)
            if not self._viewers and self._task is not None:
                self._task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._task
                self._task = None

    def _publish(self, frame: ScreenFrame) -> None:
        self._latest = frame
        for viewer in self._viewers:
            viewer.latest = frame
            viewer.ready.set()

    async def _run(self) -> None:
        while True:
            try:
                tab_id, page = self._active_page()
            except BackendError:  # the active tab was closed: wait for the session to switch
                await asyncio.sleep(_RETARGET_S)
                continue
            try:
                await self._cast(tab_id, page)
            except PlaywrightError as exc:
                log.info("screencast of tab %s ended: %s", tab_id, exc.message.splitlines()[0])
                await asyncio.sleep(_RETARGET_S)

    async def _cast(self, tab_id: str, page: Page) -> None:
        """Cast ``page`` until the active tab is another one (then return)."""
        cdp: CDPSession = await page.context.new_cdp_session(page)
        width, height, quality = self._settings
        vw, vh = self._viewport

        def on_frame(params: dict[str, Any]) -> None:
            # Acknowledge at once, so that Chromium sends the next frame as soon as it paints.
            ack = asyncio.ensure_future(cdp.send("Page.screencastFrameAck", {"sessionId": params["sessionId"]}))
            ack.add_done_callback(_ignore)
            meta = params.get("metadata", {})
            data = base64.b64decode(params["data"])
            self._seq += 1
            stamp = meta.get("timestamp")
            self._publish(
                ScreenFrame(
                    image=data,
                    mime_type="image/jpeg",
                    image_width=_jpeg_size(data)[0],
                    image_height=_jpeg_size(data)[1],
                    surface_width=float(meta.get("deviceWidth") or vw),
                    surface_height=float(meta.get("deviceHeight") or vh),
                    offset_top=float(meta.get("offsetTop") or 0.0),
                    page_scale=float(meta.get("pageScaleFactor") or 1.0),
                    scroll_x=float(meta.get("scrollOffsetX") or 0.0),
                    scroll_y=float(meta.get("scrollOffsetY") or 0.0),
                    captured_at_ms=int(stamp * 1000) if stamp else int(time.time() * 1000),
                    url=page.url,
                    tab_id=tab_id,
                    seq=self._seq,
                )
            )

        cdp.on("Page.screencastFrame", on_frame)
        params: dict[str, Any] = {"format": "jpeg", "quality": quality, "everyNthFrame": 1}
        params["maxWidth"] = min(width or vw, _MAX_SIDE)
        params["maxHeight"] = min(height or vh, _MAX_SIDE)
        await cdp.send("Page.startScreencast", params)
        try:
            while not page.is_closed() and self._still_active(page):
                await asyncio.sleep(_RETARGET_S)
        finally:
            with contextlib.suppress(PlaywrightError):
                await cdp.send("Page.stopScreencast")
            with contextlib.suppress(PlaywrightError):
                await cdp.detach()

    def _still_active(self, page: Page) -> bool:
        try:
            return self._active_page()[1] is page
        except BackendError:
            return False


class LiveView:
    """A browser surface's part in the operator console (``executor._live.LiveSurface``), a
    mixin of ``BrowserSurface``: the live view and a person's input follow its active tab."""

    _cast: Screencast | None = None

    @property
    def active(self) -> Tab:
        raise NotImplementedError  # the surface's

    def _active_tab(self) -> tuple[str, Page]:
        tab = self.active
        return tab.tab_id, tab.page

    def _viewport(self) -> tuple[int, int]:
        size = self.active.page.viewport_size or {"width": 1280, "height": 800}
        return size["width"], size["height"]

    def live_frames(self, max_width: int, max_height: int, quality: int) -> AsyncIterator[ScreenFrame]:
        if self._cast is None:
            self._cast = Screencast(self._active_tab, self._viewport())
        return self._cast.frames(max_width, max_height, quality)

    async def human_input(self, spec: HumanInput, timeout_ms: int) -> DispatchResult:
        """The input; then, if it made the main frame ask for a navigation (a form it
        submitted, a link it followed), the wait until that commits or fails (bounded), as
        Playwright's own clicks wait: its result comes once its page has gone where it led
        (through the session's network gate, which judges the load as the person's)."""
        tab = self.active
        page = tab.page
        try:
            asked = await self._navigation_flag(page)
        except PlaywrightError as exc:  # the tab is going away: nothing was sent
            return DispatchResult(DispatchStatus.NOT_STARTED, f"the page cannot take input: {exc.message}")
        ends = tab.navigation_ends()
        asked.clear()
        may_navigate = await _may_navigate(page, spec)
        try:
            result = await asyncio.wait_for(human_input(page, spec, self._viewport()), timeout_ms / 1000)
            if result.status is DispatchStatus.DONE and may_navigate and not asked.is_set():
                # A form's submission is a task the page posts while handling the input,
                # so it asks for its navigation after the input is acknowledged: let the
                # page run one task more before deciding nothing was asked (after input
                # the page paints first: a frame, ~17 ms; hence only where a link, a
                # submit control or a form could take the input somewhere).
                # Bounded: a dialog the input opened holds every script until it is answered.
                try:
                    await asyncio.wait_for(run(page, _NEXT_TASK), _NEXT_TASK_WAIT_S)
                except PlaywrightError:  # the document went away under it: it navigated
                    asked.set()
                except TimeoutError:
                    pass
            if asked.is_set() and result.status is DispatchStatus.DONE:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(asyncio.shield(ends), min(timeout_ms / 1000, _NAVIGATION_WAIT_S))
            return result
        finally:
            ends.cancel()

    async def _navigation_flag(self, page: Page) -> asyncio.Event:
        """Set when the page's main frame asks for a navigation (CDP ``frameRequestedNavigation``,
        sent while the input that caused it is being handled)."""
        flags: dict[Page, asyncio.Event] = self.__dict__.setdefault("_navigation_flags", {})
        flag = flags.get(page)
        if flag is None:
            flag = flags[page] = asyncio.Event()
            cdp = await page.context.new_cdp_session(page)
            tree = await cdp.send("Page.getFrameTree")
            main = tree["frameTree"]["frame"]["id"]
            cdp.on("Page.frameRequestedNavigation", lambda p: flag.set() if p.get("frameId") == main else None)
            await cdp.send("Page.enable")
        return flag

    def current_url(self) -> str:
        return self.active.page.url

    async def locate(self, role: str, name: str) -> ScreenBox | None:
        return await locate(self.active.page, role, name)


def _ignore(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()  # a frame acknowledged after the page closed: nothing to do


def _jpeg_size(data: bytes) -> tuple[int, int]:
    """Width and height of a baseline or progressive JPEG, from its SOF marker."""
    i = 2
    while i + 9 < len(data):
        if data[i] != 0xFF:
            i += 1
            continue
        marker = data[i + 1]
        if marker in (0xC0, 0xC1, 0xC2):
            return int.from_bytes(data[i + 7 : i + 9], "big"), int.from_bytes(data[i + 5 : i + 7], "big")
        i += 2 + int.from_bytes(data[i + 2 : i + 4], "big")
    return 0, 0


async def human_input(page: Page, spec: HumanInput, viewport: tuple[int, int]) -> DispatchResult:
    """Send a person's input to ``page`` as trusted mouse or keyboard events."""
    kind = spec.kind
    button: Any = spec.button or "left"
    width, height = viewport
    if kind in (ActionKind.CLICK, ActionKind.DOUBLE_CLICK, ActionKind.MOVE, ActionKind.SCROLL) and not (
        0 <= spec.x < width and 0 <= spec.y < height
    ):
        return DispatchResult(
            DispatchStatus.NOT_STARTED, f"the point ({spec.x:g}, {spec.y:g}) is outside the {width}x{height} viewport"
        )
    try:
        if kind is ActionKind.CLICK:
            await page.mouse.click(spec.x, spec.y, button=button)
            what = f"clicked {button} at ({spec.x:.0f}, {spec.y:.0f})"
        elif kind is ActionKind.DOUBLE_CLICK:
            await page.mouse.dblclick(spec.x, spec.y, button=button)
            what = f"double-clicked at ({spec.x:.0f}, {spec.y:.0f})"
        elif kind is ActionKind.MOVE:
            await page.mouse.move(spec.x, spec.y)
            what = f"moved the pointer to ({spec.x:.0f}, {spec.y:.0f})"
        elif kind is ActionKind.SCROLL:
            await page.mouse.move(spec.x, spec.y)
            await page.mouse.wheel(spec.delta_x, spec.delta_y)
            what = f"scrolled {spec.delta_x},{spec.delta_y} at ({spec.x:.0f}, {spec.y:.0f})"
        elif kind is ActionKind.TYPE:
            await page.keyboard.type(spec.text)
            what = f"typed {len(spec.text)} characters"
        elif kind is ActionKind.PRESS:
            await page.keyboard.press(spec.key)
            what = f"pressed {spec.key}"
        else:
            return DispatchResult(DispatchStatus.NOT_STARTED, f"a person's input cannot be {kind.value}")
    except PlaywrightError as exc:
        message = exc.message.splitlines()[0] if exc.message else type(exc).__name__
        if "Unknown key" in message:
            return DispatchResult(DispatchStatus.NOT_STARTED, message)
        return DispatchResult(DispatchStatus.MAYBE_STARTED, message)
    return DispatchResult(DispatchStatus.DONE, what, typed_chars=len(spec.text))


async def _may_navigate(page: Page, spec: HumanInput) -> bool:
    """Whether the input may take the page somewhere: a click on a link, a submit control
    or a frame; keys into a form or a link. True when the page cannot say."""
    if spec.kind in (ActionKind.CLICK, ActionKind.DOUBLE_CLICK):
        which = "point"
    elif spec.kind in (ActionKind.TYPE, ActionKind.PRESS):
        which = "keys"
    else:
        return False
    try:
        answer = await asyncio.wait_for(run(page, _MAY_NAVIGATE, [spec.x, spec.y]), _NEXT_TASK_WAIT_S)
    except (PlaywrightError, TimeoutError):
        return True
    return not isinstance(answer, dict) or bool(answer.get(which, True))


async def locate(page: Page, role: str, name: str) -> ScreenBox | None:
    """The box of the one visible element with ``role`` and exact accessible ``name``."""
    found = page.get_by_role(role, name=name, exact=True)  # type: ignore[arg-type]
    try:
        if await found.count() != 1:
            return None
        box = await found.bounding_box(timeout=2_000)
    except PlaywrightError:
        return None
    if box is None:
        return None
    return ScreenBox(box["x"], box["y"], box["width"], box["height"])
