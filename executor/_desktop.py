"""The X11 desktop backend: a session bound to one window, input refused when it is not there.

A session is bound at open time to exactly one managed window (by id, pid, WM_CLASS and/or
title pattern, all given selectors together). Before every write the backend checks, in a
handful of X round trips and without a screenshot, that the window manager's active window
is the target, that the keyboard focus is inside it (for keys), that the target's client
area and the screen size are what the cited observation saw, and that the point of a
pointer action lies in the client area with no other window on top of it there. Typing
re-checks the keyboard focus after every character and stops at the first mismatch,
saying how many characters reached the target.

Coordinates: ``x, y`` (and ``to_x, to_y``) are pixels of the cited observation's target
screenshot, whose origin is the target's client-area origin, divided by its
``screenshot_scale`` to get client pixels: root = (target.x + x / scale, target.y + y / scale).
Without a screenshot the scale is 1 and they are plain client coordinates.

Only this module (with ``_x11`` and ``_xinput``) imports ``pyautogui``, ``mss`` and
``Xlib``. pyautogui drives the pointer and named keys (``PAUSE = 0``; its fail-safe is
off because the executor bounds every point to the target's client area itself, and a
person taking the mouse is detected as foreign input instead); XTest with borrowed
keycodes types text (see ``_x11.Keyboard``); mss takes the screenshots; XRecord watches
for input the executor did not send (``_xinput``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import importlib
import io
import logging
import os
import re
import threading
import time
import warnings
from typing import Any

from Xlib import error as xerror

from handrail.executor._backend import (
    AuthzResource,
    DispatchResult,
    DispatchStatus,
    HumanActivityCallback,
    ObserveOptions,
    RawObservation,
    Refusal,
)
from handrail.executor._errors import BackendError
from handrail.executor._models import (
    ActionKind,
    ActionSpec,
    DesktopState,
    DesktopTarget,
    Expectation,
    Observation,
    Reason,
    WaitFor,
    WindowInfo,
)
from handrail.executor._snapshot import RefInfo
from handrail.executor._x11 import X11, Keyboard, Rect, WindowGoneError, untypable
from handrail.executor._xinput import InputWatcher, own_clients

log = logging.getLogger(__name__)

KEY_KINDS = frozenset({ActionKind.TYPE, ActionKind.PRESS, ActionKind.HOTKEY})
POINTER_KINDS = frozenset(
    {ActionKind.CLICK, ActionKind.DOUBLE_CLICK, ActionKind.MOVE, ActionKind.DRAG, ActionKind.SCROLL}
)
MAX_SCROLL_NOTCHES = 100
_EXPECT_DEFAULT_MS = 2_000
_POLL_S = 0.03
_DRAG_STEPS = 8
_RESTORE_KEYMAP_AFTER_S = 0.3  # let the client read the last borrowed key before it is unmapped
_HUMAN_REPORT_EVERY_S = 1.0
_SETTLE_MS = 25
_KEY_ALIASES = {
    "control": "ctrl",
    "escape": "esc",
    "meta": "win",
    "super": "win",
    "arrowleft": "left",
    "arrowright": "right",
    "arrowup": "up",
    "arrowdown": "down",
    "return": "enter",
}

# display -> the root point where this process's input last left the pointer
_pointer_left: dict[str, tuple[int, int]] = {}
_pyautogui: Any = None
_pyautogui_display = ""


def _load_pyautogui(display: str) -> Any:
    """Import pyautogui bound to ``display`` (it opens its X connection at import)."""
    global _pyautogui, _pyautogui_display
    if _pyautogui is not None:
        if display != _pyautogui_display:
            raise BackendError(
                f"this executor drives display {_pyautogui_display}; pyautogui cannot also drive {display} "
                "(run one executor per display)"
            )
        return _pyautogui
    previous = os.environ.get("DISPLAY")
    os.environ["DISPLAY"] = display  # pyautogui opens $DISPLAY at import
    with warnings.catch_warnings():
        # pyscreeze leaves the pipes of its `which scrot` probes open at import.
        warnings.simplefilter("ignore", ResourceWarning)
        import pyautogui
        import pyscreeze

        proc = getattr(pyscreeze, "whichProc", None)
        for pipe in (getattr(proc, "stdout", None), getattr(proc, "stderr", None)):
            if pipe is not None:
                pipe.close()
    if previous is None:
        del os.environ["DISPLAY"]
    else:
        os.environ["DISPLAY"] = previous
    pyautogui.PAUSE = 0
    pyautogui.FAILSAFE = False
    pyautogui.MINIMUM_DURATION = 0
    x11 = importlib.import_module("pyautogui._pyautogui_x11")  # its X connection and key table
    own_clients.setdefault(display, set()).add(int(x11._display.display.info.resource_id_base))
    _pyautogui, _pyautogui_display = pyautogui, display
    return pyautogui


def _describe_window(x: X11, wid: int) -> str:
    if wid in (0, 1):
        return "no window" if wid == 0 else "the root window"
    try:
        info = x.info(wid)
    except (WindowGoneError, xerror.XError):
        return f"window 0x{wid:x}"
    return f"window 0x{wid:x} ({info.wm_class or 'no class'} {info.title!r}, pid {info.pid or '?'})"


def _key_name(key: str) -> str:
    low = key.strip().lower()
    return _KEY_ALIASES.get(low, low)


class _Screenshots:
    """mss on one worker thread (an mss instance belongs to the thread that made it)."""

    def __init__(self, display: str) -> None:
        self._display = display
        self._pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="handrail-mss")
        self._local = threading.local()

    def _grab(self, rect: Rect, scale: float) -> bytes:
        import mss
        from PIL import Image

        sct = getattr(self._local, "sct", None)
        if sct is None:
            factory = getattr(mss, "MSS", None) or mss.mss
            sct = self._local.sct = factory(display=self._display)
        shot = sct.grab({"left": rect.x, "top": rect.y, "width": rect.width, "height": rect.height})
        image = Image.frombytes("RGB", shot.size, shot.rgb)
        if scale < 1.0:
            size = (max(1, round(rect.width * scale)), max(1, round(rect.height * scale)))
            image = image.resize(size, Image.Resampling.BILINEAR)
        out = io.BytesIO()
        image.save(out, "PNG", compress_level=1)
        return out.getvalue()

    async def grab(self, rect: Rect, scale: float) -> bytes:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, self._grab, rect, scale)

    def _close(self) -> None:
        sct = getattr(self._local, "sct", None)
        if sct is not None:
            sct.close()

    def close(self) -> None:
        self._pool.submit(self._close).result(5)
        self._pool.shutdown(wait=True)


class DesktopSurface:
    """One session's target window on an X display: observe, check, act.

    Made by ``open_desktop``; the guarded loop calls it through the ``Backend`` protocol.
    """

    kind = "desktop"

    def __init__(
        self,
        x: X11,
        window_id: int,
        *,
        on_human_activity: HumanActivityCallback | None = None,
    ) -> None:
        self._x = x
        self.window_id = window_id
        self.display = x.name
        self._keyboard = Keyboard(x)
        self._screenshots = _Screenshots(x.name)
        self._on_human_activity = on_human_activity
        self._loop = asyncio.get_running_loop()
        self._tasks: set[asyncio.Task[None]] = set()
        self._cited: Observation | None = None
        self._frame = x.toplevel(window_id)
        self._class = x.wm_class(window_id)
        self._human: tuple[str, float] | None = None
        self._human_reported_at = 0.0
        self._restore: asyncio.TimerHandle | None = None
        self.watcher: InputWatcher | None = None
        self.human_reports: list[str] = []
        self._closed = False
        _pointer_left[self.display] = x.pointer()

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
            raise BackendError(f"the target window 0x{self.window_id:x} is gone: {exc}") from exc
        active = next((w for w in stacking if w.window_id == active_id), None)
        if active is None and active_id:
            try:
                active = x.info(active_id)
            except WindowGoneError:
                active = None
        # What the agent sees now is what it acts on: a person's earlier input is past.
        self._human = None
        _pointer_left[self.display] = pointer
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
        refusal = self._check(cited, spec)
        if refusal is None:
            self._cited = cited
        return refusal

    def _check(self, cited: Observation, spec: ActionSpec) -> Refusal | None:
        human = self._human_refusal()
        if human is not None:
            return human
        seen = cited.desktop
        if seen is None:
            return Refusal(Reason.TARGET_CHANGED, f"observation {cited.observation_id} has no desktop state")
        x = self._x
        try:
            if spec.kind is not ActionKind.ACTIVATE:
                active = x.active_window()
                if active != self.window_id:
                    return Refusal(
                        Reason.FOCUS_MISMATCH,
                        f"the active window is {_describe_window(x, active)}, not the target 0x{self.window_id:x}",
                    )
            if spec.kind in KEY_KINDS:
                refusal = self._keyboard_focus_refusal()
                if refusal is not None:
                    return refusal
            rect = x.client_rect(self.window_id)
            was = Rect(seen.target.x, seen.target.y, seen.target.width, seen.target.height)
            if rect != was:
                return Refusal(Reason.TARGET_CHANGED, self._geometry_change(was, rect))
            screen = x.screen_size()
            if screen != (seen.screen_width, seen.screen_height):
                return Refusal(
                    Reason.TARGET_CHANGED,
                    f"the screen is {screen[0]}x{screen[1]}, not {seen.screen_width}x{seen.screen_height} as observed",
                )
            pointer = x.pointer()
            left = _pointer_left.get(self.display)
            if left is not None and pointer != left:
                self._foreign(f"moved the pointer to ({pointer[0]}, {pointer[1]})")
                return self._human_refusal()
            if spec.kind in POINTER_KINDS:
                points = [(spec.x, spec.y)]
                if spec.kind is ActionKind.DRAG:
                    points.append((spec.to_x, spec.to_y))
                for px, py in points:
                    refusal = self._point_refusal(cited, rect, px, py)
                    if refusal is not None:
                        return refusal
        except WindowGoneError:
            return Refusal(Reason.TARGET_CHANGED, f"the target window 0x{self.window_id:x} was closed")
        return None

    def _keyboard_focus_refusal(self) -> Refusal | None:
        focus = self._x.input_focus()
        if self._x.is_inside(focus, self.window_id):
            return None
        owner = self._owner(focus)
        return Refusal(
            Reason.FOCUS_MISMATCH,
            f"the keyboard focus is in {_describe_window(self._x, owner)}, not in the target 0x{self.window_id:x}",
        )

    def _owner(self, wid: int) -> int:
        """The managed window that contains ``wid`` (for messages), else ``wid`` itself."""
        for client in self._x.stacking():
            if self._x.is_inside(wid, client):
                return client
        return wid

    @staticmethod
    def _geometry_change(was: Rect, now: Rect) -> str:
        parts = []
        if (was.x, was.y) != (now.x, now.y):
            parts.append(f"moved from {was.x},{was.y} to {now.x},{now.y}")
        if (was.width, was.height) != (now.width, now.height):
            parts.append(f"was resized from {was.width}x{was.height} to {now.width}x{now.height}")
        return "the target window " + " and ".join(parts) + " since the observation"

    def root_point(self, cited: Observation, x: int, y: int) -> tuple[int, int]:
        """A point of the cited screenshot in root coordinates (scaled back by its scale)."""
        assert cited.desktop is not None
        scale = cited.screenshot_scale or 1.0
        return cited.desktop.target.x + round(x / scale), cited.desktop.target.y + round(y / scale)

    def _point_refusal(self, cited: Observation, rect: Rect, px: int, py: int) -> Refusal | None:
        rx, ry = self.root_point(cited, px, py)
        if not rect.contains(rx, ry):
            return Refusal(
                Reason.TARGET_CHANGED,
                f"the point ({px}, {py}) is ({rx - rect.x}, {ry - rect.y}) in client pixels, "
                f"outside the target's {rect.width}x{rect.height} client area",
            )
        top = self._x.toplevel_at(rx, ry)
        if top != self._frame:
            self._frame = self._x.toplevel(self.window_id)  # the window manager may have reframed it
            if top != self._frame:
                return Refusal(
                    Reason.FOCUS_MISMATCH,
                    f"{self._describe_toplevel(top)} covers the point ({px}, {py}) of the target",
                )
        return None

    def _describe_toplevel(self, top: int) -> str:
        for client in self._x.stacking():
            try:
                if self._x.toplevel(client) == top:
                    return _describe_window(self._x, client)
            except WindowGoneError:
                continue
        return f"an unmanaged window 0x{top:x} (a menu, tooltip or notification)"

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
            return await self._wait_for(spec.wait_for, timeout_ms)
        cited = self._cited
        if cited is None or cited.observation_id != spec.observation_id:
            return DispatchResult(DispatchStatus.NOT_STARTED, "the action's observation was not checked")
        # The authz round trip took time: check again, just before the input goes out.
        refusal = self._check(cited, spec)
        if refusal is not None:
            return DispatchResult(DispatchStatus.NOT_STARTED, refusal.message, reason=refusal.reason)
        try:
            if kind is ActionKind.ACTIVATE:
                return await self._activate(timeout_ms)
            if kind is ActionKind.TYPE:
                return await self._type(spec.text, spec.key_delay_ms, timeout_ms)
            if kind is ActionKind.PRESS:
                return await self._press([spec.key] if len(spec.key) == 1 else spec.key.split("+"))
            if kind is ActionKind.HOTKEY:
                return await self._press(list(spec.keys))
            if kind in POINTER_KINDS:
                return await self._pointer(cited, spec)
        except (xerror.XError, xerror.ConnectionClosedError, OSError) as exc:
            return DispatchResult(DispatchStatus.MAYBE_STARTED, f"the X server failed mid-action: {exc}")
        return DispatchResult(DispatchStatus.NOT_STARTED, f"{kind.value} is not a desktop action")

    async def _pointer(self, cited: Observation, spec: ActionSpec) -> DispatchResult:
        gui = _load_pyautogui(self.display)
        rx, ry = self.root_point(cited, spec.x, spec.y)
        button = spec.button or "left"
        kind = spec.kind
        if kind is ActionKind.SCROLL and max(abs(spec.delta_x), abs(spec.delta_y)) > MAX_SCROLL_NOTCHES:
            return DispatchResult(
                DispatchStatus.NOT_STARTED, f"scroll by at most {MAX_SCROLL_NOTCHES} wheel notches at a time"
            )
        try:
            if kind in (ActionKind.CLICK, ActionKind.DOUBLE_CLICK):
                count = 2 if kind is ActionKind.DOUBLE_CLICK else max(1, spec.click_count)
                gui.click(rx, ry, clicks=count, interval=0.0, button=button)
                what = f"{'double-' if count == 2 else ''}clicked {button} at ({rx}, {ry})"
                if count > 2:
                    what = f"clicked {button} {count} times at ({rx}, {ry})"
            elif kind is ActionKind.MOVE:
                gui.moveTo(rx, ry)
                what = f"moved the pointer to ({rx}, {ry})"
            elif kind is ActionKind.SCROLL:
                gui.moveTo(rx, ry)
                if spec.delta_y:
                    gui.scroll(-spec.delta_y, x=rx, y=ry)  # positive delta_y scrolls down
                if spec.delta_x:
                    gui.hscroll(spec.delta_x, x=rx, y=ry)
                what = f"scrolled {spec.delta_x},{spec.delta_y} notches at ({rx}, {ry})"
            else:
                tx, ty = self.root_point(cited, spec.to_x, spec.to_y)
                gui.moveTo(rx, ry)
                gui.mouseDown(button=button)
                for step in range(1, _DRAG_STEPS + 1):
                    await asyncio.sleep(0.01)
                    gui.moveTo(rx + (tx - rx) * step // _DRAG_STEPS, ry + (ty - ry) * step // _DRAG_STEPS)
                gui.mouseUp(button=button)
                what = f"dragged {button} from ({rx}, {ry}) to ({tx}, {ty})"
        finally:
            _pointer_left[self.display] = self._x.pointer()
        return DispatchResult(DispatchStatus.DONE, what)

    async def _press(self, keys: list[str]) -> DispatchResult:
        if len(keys) == 1 and len(keys[0]) == 1:
            return await self._type(keys[0], 0, 1_000, label="pressed")
        gui = _load_pyautogui(self.display)
        keymap = importlib.import_module("pyautogui._pyautogui_x11").keyboardMapping
        names = [_key_name(k) for k in keys]
        for key, name in zip(keys, names, strict=True):
            if len(name) != 1 and keymap.get(name) is None:
                return DispatchResult(DispatchStatus.NOT_STARTED, f"unknown key {key!r}")
        if len(names) == 1:
            gui.press(names[0])
        else:
            gui.hotkey(*names, interval=0.0)
        return DispatchResult(DispatchStatus.DONE, f"pressed {'+'.join(names)}")

    async def _type(self, text: str, delay_ms: int, timeout_ms: int, *, label: str = "typed") -> DispatchResult:
        bad = untypable(text)
        if bad:
            return DispatchResult(DispatchStatus.NOT_STARTED, f"cannot type the control character U+{ord(bad):04X}")
        x, kb = self._x, self._keyboard
        if self._restore is not None:
            self._restore.cancel()
            self._restore = None
        deadline = time.monotonic() + timeout_ms / 1000
        typed = 0
        sent_any = False
        try:
            for segment in self._segments(text):
                if kb.borrowed and kb.missing(set(segment)):
                    await asyncio.sleep(_RESTORE_KEYMAP_AFTER_S)  # the client reads the earlier keys first
                    kb.restore()
                kb.prepare(set(segment))
                for ch in segment:
                    stop = self._human_refusal()
                    if stop is None and time.monotonic() > deadline:
                        return self._stopped(text, typed, sent_any, None, f"the {timeout_ms} ms timeout passed")
                    if stop is None and not sent_any:
                        stop = self._keyboard_focus_refusal()
                    if stop is not None:
                        return self._stopped(text, typed, sent_any, stop.reason, stop.message)
                    kb.send(ch)
                    sent_any = True
                    focus = x.input_focus()  # a round trip: the key events are routed by now
                    if not x.is_inside(focus, self.window_id):
                        refusal = self._keyboard_focus_refusal() or Refusal(Reason.FOCUS_MISMATCH, "the focus moved")
                        return self._stopped(text, typed, sent_any, refusal.reason, refusal.message, uncertain=ch)
                    typed += 1
                    if delay_ms:
                        await asyncio.sleep(delay_ms / 1000)
                    elif typed % 32 == 0:
                        await asyncio.sleep(0)
        finally:
            if kb.borrowed:
                self._restore = self._loop.call_later(_RESTORE_KEYMAP_AFTER_S, self._restore_keymap)
        return DispatchResult(DispatchStatus.DONE, f"{label} {typed} characters", typed_chars=typed)

    def _restore_keymap(self) -> None:
        self._restore = None
        try:
            self._keyboard.restore()
        except (xerror.XError, xerror.ConnectionClosedError, OSError) as exc:
            log.warning("could not restore the keymap on %s: %s", self.display, exc)

    def _segments(self, text: str) -> list[str]:
        """Split ``text`` so that each part needs no more borrowed keycodes than there are."""
        spare = self._keyboard.spare_count
        missing = self._keyboard.missing(set(text))
        if len(missing) <= spare:
            return [text]
        parts: list[str] = []
        current = ""
        borrowed: set[str] = set()
        for ch in text:
            if ch in missing and ch not in borrowed and len(borrowed) == spare:
                parts.append(current)
                current, borrowed = "", set()
            if ch in missing:
                borrowed.add(ch)
            current += ch
        parts.append(current)
        return parts

    def _stopped(
        self, text: str, typed: int, sent_any: bool, reason: Reason | None, why: str, *, uncertain: str = ""
    ) -> DispatchResult:
        """Typing stopped by a check (``reason``) or by its timeout (None)."""
        message = f"typing stopped after {typed} of {len(text)} characters: {why}"
        if uncertain:
            message += f"; the character after them ({uncertain!r}) may have reached either window"
        if not sent_any:
            return DispatchResult(DispatchStatus.NOT_STARTED, message, reason=reason)
        return DispatchResult(DispatchStatus.PARTIAL, message, typed_chars=typed, reason=reason)

    async def _activate(self, timeout_ms: int) -> DispatchResult:
        x = self._x
        x.request_activate(self.window_id)
        deadline = time.monotonic() + min(timeout_ms, 3_000) / 1000
        while time.monotonic() < deadline:
            if x.active_window() == self.window_id and x.is_inside(x.input_focus(), self.window_id):
                return DispatchResult(DispatchStatus.DONE, f"activated window 0x{self.window_id:x}")
            await asyncio.sleep(0.01)
        return DispatchResult(
            DispatchStatus.DONE,
            f"asked the window manager to activate 0x{self.window_id:x}; "
            f"the active window is still {_describe_window(x, x.active_window())}",
        )

    async def _wait_for(self, wait: WaitFor, timeout_ms: int) -> DispatchResult:
        if wait.text or wait.role or wait.url_matches or not wait.window_title:
            return DispatchResult(DispatchStatus.NOT_STARTED, "a desktop session waits only for a window_title")
        try:
            re.compile(wait.window_title)
        except re.error as exc:
            return DispatchResult(DispatchStatus.NOT_STARTED, f"window_title is not a regular expression: {exc}")
        deadline = time.monotonic() + timeout_ms / 1000
        while True:
            found = self._x.find_windows(wait.window_title)
            if bool(found) != wait.gone:
                return DispatchResult(DispatchStatus.DONE, "the wait condition holds")
            if time.monotonic() >= deadline:
                what = "went away" if wait.gone else "appeared"
                return DispatchResult(
                    DispatchStatus.NOT_STARTED,
                    f"no change within {timeout_ms} ms: no window titled /{wait.window_title}/ {what}",
                )
            await asyncio.sleep(_POLL_S)

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

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self.watcher is not None:
            await asyncio.to_thread(self.watcher.stop)
        if self._restore is not None:
            self._restore.cancel()
            self._restore = None
        with contextlib.suppress(xerror.XError, xerror.ConnectionClosedError, OSError):
            self._keyboard.restore()
        own_clients.get(self.display, set()).discard(self._x.client_id_base)
        self._screenshots.close()
        self._x.close()


def bind_window(x: X11, target: DesktopTarget) -> int:
    """The one managed window every given selector of ``target`` matches.

    Raises:
        BackendError: no window or several match; the message lists the candidates.
    """
    candidates = x.stacking()
    if not candidates:
        raise BackendError(f"display {x.name} has no managed windows")
    wanted = []
    if target.window_id:
        wanted.append(f"window id 0x{target.window_id:x}")
    if target.pid:
        wanted.append(f"pid {target.pid}")
    if target.wm_class:
        wanted.append(f"WM_CLASS {target.wm_class!r}")
    if target.title_pattern:
        wanted.append(f"title /{target.title_pattern}/")
    try:
        pattern = re.compile(target.title_pattern) if target.title_pattern else None
    except re.error as exc:
        raise BackendError(f"title_pattern is not a regular expression: {exc}") from exc
    matches = []
    for wid in candidates:
        try:
            if target.window_id and wid != target.window_id:
                continue
            if target.pid and x.pid(wid) != target.pid:
                continue
            if target.wm_class and target.wm_class.lower() not in {c.lower() for c in x.wm_class(wid)}:
                continue
            if pattern is not None and not pattern.search(x.title(wid)):
                continue
        except WindowGoneError:
            continue
        matches.append(wid)
    if len(matches) == 1:
        return matches[0]
    listed = "; ".join(_describe_window(x, w) for w in (matches or candidates))
    if not matches:
        raise BackendError(f"no window on {x.name} matches {' and '.join(wanted)}; windows: {listed}")
    raise BackendError(f"{len(matches)} windows on {x.name} match {' and '.join(wanted)}: {listed}; narrow it down")


async def open_desktop(
    target: DesktopTarget,
    on_human_activity: HumanActivityCallback | None = None,
) -> DesktopSurface:
    """Open a desktop surface bound to ``target``'s window.

    Args:
        target: the display (default ``$DISPLAY``) and the selectors of the window.
        on_human_activity: awaited with a description whenever input the executor did not
            send is seen on the display while the session is open.

    Raises:
        BackendError: no display, no EWMH window manager, or not exactly one matching window.
    """
    display = target.display or os.environ.get("DISPLAY", "")
    if not display:
        raise BackendError("no X display: set $DISPLAY for the executor or name desktop.display")
    x = X11(display)
    try:
        if not x.wm_name():
            raise BackendError(
                f"display {display} has no EWMH window manager (no _NET_SUPPORTING_WM_CHECK); "
                "the focus check needs _NET_ACTIVE_WINDOW: start one, e.g. openbox"
            )
        wid = bind_window(x, target)
        _load_pyautogui(display)
        own_clients.setdefault(display, set()).add(x.client_id_base)
        surface = DesktopSurface(x, wid, on_human_activity=on_human_activity)
    except BaseException:
        x.close()
        raise
    try:
        surface.start_watching()
    except (RuntimeError, xerror.XError, xerror.DisplayError) as exc:
        log.warning("cannot watch for foreign input on %s: %s", display, exc)
    return surface
