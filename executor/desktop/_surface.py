"""The X11 desktop backend's surface: a session bound to one window, input refused when it is not there.

A session is bound at open time (``_open``) to exactly one managed window, and stays bound
to it until that window is destroyed (``_binding``): then every write is refused
``TARGET_GONE`` and observing raises ``TargetGoneError``. Before every write the checks of
``_checks`` run twice: early, before the authz round trip (``check_fresh``), and again
inside the server grab that the input is sent under (``_input``), so that what was
checked is what the server routes the input by.

Coordinates: ``x, y`` (and ``to_x, to_y``) are pixels of the cited observation's target
screenshot, whose origin is the target's client-area origin, divided by its
``screenshot_scale`` to get client pixels: root = (target.x + x / scale, target.y + y / scale).
Without a screenshot the scale is 1 and they are plain client coordinates.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator

from Xlib import error as xerror

from handrail.executor._backend import (
    AuthzResource,
    DispatchResult,
    DispatchStatus,
    HumanActivityCallback,
    ObserveOptions,
    RawObservation,
    Refusal,
    SurfaceListener,
)
from handrail.executor._errors import TargetGoneError
from handrail.executor._live import HumanInput, ScreenBox, ScreenFrame
from handrail.executor._models import (
    ActionKind,
    ActionSpec,
    DesktopState,
    Expectation,
    Observation,
    Reason,
    WindowInfo,
)
from handrail.executor._snapshot import RefInfo
from handrail.executor.desktop._binding import Binding
from handrail.executor.desktop._checks import POINTER_KINDS, Checker, Planned
from handrail.executor.desktop._input import DesktopInput, root_point
from handrail.executor.desktop._live import DesktopLive
from handrail.executor.desktop._screenshots import Screenshots
from handrail.executor.desktop._x11 import X11, Rect, WindowGoneError
from handrail.executor.desktop._xinput import InputWatcher, own_clients, pointer_left

log = logging.getLogger(__name__)
_EXPECT_DEFAULT_MS = 2_000
_POLL_S = 0.03
_HUMAN_REPORT_EVERY_S = 1.0
_SETTLE_MS = 25


class DesktopSurface:
    """One session's target window on an X display: observe, check, act.

    Made by ``open_desktop``; the guarded loop calls it through the ``Backend`` protocol.
    """

    kind = "desktop"

    def __init__(
        self,
        x: X11,
        binding: Binding,
        *,
        on_human_activity: HumanActivityCallback | None = None,
    ) -> None:
        self._x = x
        self.binding = binding
        self.window_id = binding.window_id
        self.display = x.name
        self._screenshots = Screenshots(x.name)
        self._on_human_activity = on_human_activity
        self._loop = asyncio.get_running_loop()
        self._tasks: set[asyncio.Task[None]] = set()
        self._cited: Observation | None = None
        self._class = x.wm_class(self.window_id)
        self._human: tuple[str, float] | None = None
        self._human_reported_at = 0.0
        self.watcher: InputWatcher | None = None
        self.human_reports: list[str] = []
        self._closed = False
        self._checker = Checker(x, binding, self._human_refusal, self._foreign, lambda: self.watcher)
        self._input = DesktopInput(x, binding, self._checker, self._human_refusal)
        self._live = DesktopLive(x, self.window_id, self._screenshots, self._input, self._checker)
        pointer_left[self.display] = x.pointer()
        binding.watch(self._loop)

    def start_watching(self) -> None:
        """Watch for foreign input (XRecord); without RECORD, rely on the pointer check."""
        if not self._x.has_record:
            log.warning("X display %s has no RECORD extension: only pointer moves reveal a person", self.display)
            return
        watcher = InputWatcher(self.display, self._foreign_from_thread)
        watcher.start()
        self.watcher = watcher

    # -- a person at the desk -----------------------------------------------------------

    def _foreign_from_thread(self, what: str) -> None:
        if not self._closed:
            self._loop.call_soon_threadsafe(self._foreign, what)

    def _foreign(self, what: str) -> None:
        """Someone else used the keyboard or pointer: refuse writes, tell the sidecar."""
        if self._closed:
            return
        now = time.time()
        self._human = (what, now)
        if time.monotonic() - self._human_reported_at < _HUMAN_REPORT_EVERY_S:
            return
        self._human_reported_at = time.monotonic()
        stamp = time.strftime("%H:%M:%S", time.localtime(now))
        message = f"a person {what} on {self.display} at {stamp}"
        self.human_reports.append(message)
        log.info("%s (session window 0x%x)", message, self.window_id)
        if self._on_human_activity is not None:
            task = self._loop.create_task(self._report(message))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _report(self, message: str) -> None:
        assert self._on_human_activity is not None
        try:
            await self._on_human_activity(message)
        except Exception:  # a callback's failure must not take the session down
            log.exception("reporting human activity failed")

    def _human_refusal(self) -> Refusal | None:
        if self._human is None:
            return None
        what, at = self._human
        stamp = time.strftime("%H:%M:%S", time.localtime(at))
        return Refusal(
            Reason.HELD_BY_HUMAN,
            f"a person {what} on {self.display} at {stamp}; the agent waits until they are done",
        )

    # -- observe ------------------------------------------------------------------------

    async def observe(self, options: ObserveOptions) -> RawObservation:
        x = self._x
        x.sync()  # every event sent so far is read: a destroyed target is known now
        self.binding.observed()
        gone = self._checker.gone()
        if gone is not None:
            raise TargetGoneError(gone.message)
        try:
            width, height = x.screen_size()
            target = x.info(self.window_id)
            extents = x.frame_extents(self.window_id)
            stacking: list[WindowInfo] = []
            for wid in x.stacking():
                if wid == self.window_id:
                    stacking.append(target)
                    continue
                try:
                    stacking.append(x.info(wid))
                except WindowGoneError:
                    continue
            active_id = x.active_window()
            pointer = x.pointer()
        except WindowGoneError as exc:
            gone = self._checker.gone()
            raise TargetGoneError(gone.message if gone else f"the target window is gone: {exc}") from exc
        active = next((w for w in stacking if w.window_id == active_id), None)
        if active is None and active_id:
            try:
                active = x.info(active_id)
            except WindowGoneError:
                active = None
        # What the agent sees now is what it acts on: a person's earlier input is past.
        self._human = None
        pointer_left[self.display] = pointer
        png = b""
        scale = 1.0
        if options.screenshot:
            scale = options.screenshot_scale if 0 < options.screenshot_scale <= 1 else 1.0
            visible = self._visible(Rect(target.x, target.y, target.width, target.height), width, height)
            if visible is not None:
                png = await self._screenshots.grab(visible, scale)
        state = DesktopState(
            screen_width=width,
            screen_height=height,
            target=target,
            active=active,
            stacking=tuple(stacking),
            screenshot_of_target=True,
            screenshot_x=target.x,
            screenshot_y=target.y,
        )
        return RawObservation(
            title=target.title,
            snapshot=self._summary(state, extents),
            screenshot_png=png,
            screenshot_scale=scale,
            desktop=state,
        )

    @staticmethod
    def _visible(rect: Rect, width: int, height: int) -> Rect | None:
        """The on-screen part of the client area (screenshots of the target start at its origin)."""
        if rect.x < 0 or rect.y < 0:
            return None  # origin off-screen: the PNG could not start at the client origin
        w, h = min(rect.width, width - rect.x), min(rect.height, height - rect.y)
        if w <= 0 or h <= 0:
            return None
        return Rect(rect.x, rect.y, w, h)

    def _summary(self, state: DesktopState, extents: tuple[int, int, int, int]) -> str:
        """The window list as text, for agents that read rather than look."""

        def line(w: WindowInfo) -> str:
            marks = []
            if w.window_id == self.window_id:
                marks.append("target")
            if state.active is not None and w.window_id == state.active.window_id:
                marks.append("active")
            tag = f" [{', '.join(marks)}]" if marks else ""
            return (
                f"- window 0x{w.window_id:x} {w.wm_class or '?'} {w.title!r} pid {w.pid or '?'} "
                f"at {w.x},{w.y} size {w.width}x{w.height}{tag}"
            )

        left, right, top, bottom = extents
        out = [
            f"screen {state.screen_width}x{state.screen_height} on {self.display}",
            f"target 0x{state.target.window_id:x}: client area at {state.target.x},{state.target.y} "
            f"size {state.target.width}x{state.target.height}, frame extents l{left} r{right} t{top} b{bottom}",
            "windows, bottom to top:",
        ]
        out += [line(w) for w in state.stacking]
        return "\n".join(out)

    # -- checks -------------------------------------------------------------------------

    async def check_fresh(self, cited: Observation, spec: ActionSpec, target: RefInfo | None) -> Refusal | None:
        # The early check: the points, and no key or button (its grab probes need the
        # events the action will send; they run again under the server grab in dispatch).
        refusal = self._checker.check(cited, spec, self._planned(cited, spec))
        if refusal is None:
            self._cited = cited
        return refusal

    @staticmethod
    def _planned(cited: Observation, spec: ActionSpec) -> Planned:
        if spec.kind not in POINTER_KINDS:
            return Planned()
        points = [root_point(cited, spec.x, spec.y)]
        if spec.kind is ActionKind.DRAG:
            points.append(root_point(cited, spec.to_x, spec.to_y))
        return Planned(points=tuple(points))

    async def describe(self, spec: ActionSpec, target: RefInfo | None) -> AuthzResource:
        try:
            title = self._x.title(self.window_id)
        except WindowGoneError:
            title = ""
        return AuthzResource(window_class=self._class[1], window_title=title)

    # -- act ----------------------------------------------------------------------------

    async def dispatch(self, spec: ActionSpec, timeout_ms: int) -> DispatchResult:
        kind = spec.kind
        if kind is ActionKind.WAIT_FOR:
            return await self._input.wait_for(spec.wait_for, timeout_ms)
        cited = self._cited
        if cited is None or cited.observation_id != spec.observation_id:
            return DispatchResult(DispatchStatus.NOT_STARTED, "the action's observation was not checked")
        # Every kind of input is checked again, under the server grab it is sent in.
        try:
            if kind is ActionKind.ACTIVATE:
                refusal = self._checker.check(cited, spec, Planned())
                if refusal is not None:
                    return DispatchResult(DispatchStatus.NOT_STARTED, refusal.message, reason=refusal.reason)
                return await self._input.activate(timeout_ms)
            if kind is ActionKind.TYPE:
                return await self._input.type(cited, spec, spec.text, spec.key_delay_ms, timeout_ms)
            if kind is ActionKind.PRESS:
                keys = [spec.key] if len(spec.key) == 1 else spec.key.split("+")
                return await self._input.press(cited, spec, keys)
            if kind is ActionKind.HOTKEY:
                return await self._input.press(cited, spec, list(spec.keys))
            if kind in POINTER_KINDS:
                return await self._input.pointer(cited, spec)
        except (xerror.XError, xerror.ConnectionClosedError, OSError) as exc:
            return DispatchResult(DispatchStatus.MAYBE_STARTED, f"the X server failed mid-action: {exc}")
        return DispatchResult(DispatchStatus.NOT_STARTED, f"{kind.value} is not a desktop action")

    async def release(self) -> None:
        return None  # the checks arm nothing: they run again under the grab (``_input``)

    async def settle(self, timeout_ms: int) -> None:
        # XSync makes the server route every event sent; the pause gives the application
        # time to handle them and redraw before the re-observation's screenshot.
        self._x.sync()
        await asyncio.sleep(min(timeout_ms, _SETTLE_MS) / 1000)

    async def expectation_holds(self, expect: Expectation, cited_refs: dict[str, RefInfo]) -> tuple[bool, str]:
        if expect.url_matches or expect.role or expect.field_ref:
            return False, "a desktop expectation checks only text_visible, against the target window's title"
        deadline = time.monotonic() + (expect.within_ms or _EXPECT_DEFAULT_MS) / 1000
        while True:
            try:
                title = self._x.title(self.window_id)
            except WindowGoneError:
                return expect.gone, "the target window was closed"
            if (expect.text_visible in title) != expect.gone:
                return True, ""
            if time.monotonic() >= deadline:
                verb = "still shows" if expect.gone else "does not show"
                return False, f"the target's title {title!r} {verb} {expect.text_visible!r}"
            await asyncio.sleep(_POLL_S)

    # -- the operator console: live view, a person's input (``executor._live``) --------------

    def live_frames(self, max_width: int, max_height: int, quality: int) -> AsyncIterator[ScreenFrame]:
        return self._live.frames(max_width, max_height)

    async def human_input(self, spec: HumanInput, timeout_ms: int) -> DispatchResult:
        try:
            return await self._live.human_input(spec, timeout_ms)
        except (xerror.XError, xerror.ConnectionClosedError, OSError) as exc:
            return DispatchResult(DispatchStatus.MAYBE_STARTED, f"the X server failed mid-input: {exc}")

    def current_url(self) -> str:
        return ""

    async def locate(self, role: str, name: str) -> ScreenBox | None:
        return None  # a desktop window has no roles and names to look up

    def listen(self, listener: SurfaceListener) -> None:
        """A desktop has no network of its own to report."""

    async def start(self, url: str, timeout_ms: int) -> None:
        """A desktop session has no start page."""

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.binding.stop_watching()
        if self.watcher is not None:
            await asyncio.to_thread(self.watcher.stop)
        self._input.close()
        own_clients.get(self.display, set()).discard(self._x.client_id_base)
        self._screenshots.close()
        self._x.close()
