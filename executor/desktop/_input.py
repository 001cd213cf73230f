"""The input the desktop backend sends to its bound window: pointer, keys, typed text.

pyautogui drives the pointer and named keys (see ``_gui``); XTest with borrowed keycodes
types text (``_x11.Keyboard``), re-checking the keyboard focus after every character and
stopping at the first mismatch, saying how many characters reached the target. Each
method sends one bounded action and answers with a ``DispatchResult``; the checks before
it are the surface's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable

from Xlib import error as xerror

from handrail._patterns import PatternError, compile_regex
from handrail.executor._backend import DispatchResult, DispatchStatus, Refusal
from handrail.executor._models import ActionKind, ActionSpec, Observation, Reason, WaitFor
from handrail.executor.desktop._gui import gui_keymap, key_name, load_pyautogui, pointer_left
from handrail.executor.desktop._x11 import X11, Keyboard, untypable

MAX_SCROLL_NOTCHES = 100
log = logging.getLogger(__name__)

_POLL_S = 0.03
_DRAG_STEPS = 8
_RESTORE_KEYMAP_AFTER_S = 0.3  # let the client read the last borrowed key before it is unmapped


def root_point(cited: Observation, x: int, y: int) -> tuple[int, int]:
    """A point of the cited screenshot in root coordinates (scaled back by its scale)."""
    assert cited.desktop is not None
    scale = cited.screenshot_scale or 1.0
    return cited.desktop.target.x + round(x / scale), cited.desktop.target.y + round(y / scale)


class DesktopInput:
    """Sends input to one window of one display.

    Args:
        x: the backend's X connection.
        window_id: the bound window.
        interrupted: why input must stop now (a person at the desk), or None; asked
            before every typed character.
    """

    def __init__(self, x: X11, window_id: int, interrupted: Callable[[], Refusal | None]) -> None:
        self._x = x
        self.window_id = window_id
        self.display = x.name
        self._interrupted = interrupted
        self._keyboard = Keyboard(x)
        self._loop = asyncio.get_running_loop()
        self._restore: asyncio.TimerHandle | None = None

    def keyboard_focus_refusal(self) -> Refusal | None:
        """FOCUS_MISMATCH unless the X input focus is the target or inside it."""
        focus = self._x.input_focus()
        if self._x.is_inside(focus, self.window_id):
            return None
        owner = self._owner(focus)
        return Refusal(
            Reason.FOCUS_MISMATCH,
            f"the keyboard focus is in {self._x.describe(owner)}, not in the target 0x{self.window_id:x}",
        )

    def _owner(self, wid: int) -> int:
        """The managed window that contains ``wid`` (for messages), else ``wid`` itself."""
        for client in self._x.stacking():
            if self._x.is_inside(wid, client):
                return client
        return wid

    async def pointer(self, cited: Observation, spec: ActionSpec) -> DispatchResult:
        gui = load_pyautogui(self.display)
        rx, ry = root_point(cited, spec.x, spec.y)
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
                tx, ty = root_point(cited, spec.to_x, spec.to_y)
                gui.moveTo(rx, ry)
                gui.mouseDown(button=button)
                for step in range(1, _DRAG_STEPS + 1):
                    await asyncio.sleep(0.01)
                    gui.moveTo(rx + (tx - rx) * step // _DRAG_STEPS, ry + (ty - ry) * step // _DRAG_STEPS)
                gui.mouseUp(button=button)
                what = f"dragged {button} from ({rx}, {ry}) to ({tx}, {ty})"
        finally:
            pointer_left[self.display] = self._x.pointer()
        return DispatchResult(DispatchStatus.DONE, what)

    async def press(self, keys: list[str]) -> DispatchResult:
        if len(keys) == 1 and len(keys[0]) == 1:
            return await self.type(keys[0], 0, 1_000, label="pressed")
        gui = load_pyautogui(self.display)
        keymap = gui_keymap()
        names = [key_name(k) for k in keys]
        for key, name in zip(keys, names, strict=True):
            if len(name) != 1 and keymap.get(name) is None:
                return DispatchResult(DispatchStatus.NOT_STARTED, f"unknown key {key!r}")
        if len(names) == 1:
            gui.press(names[0])
        else:
            gui.hotkey(*names, interval=0.0)
        return DispatchResult(DispatchStatus.DONE, f"pressed {'+'.join(names)}")

    async def type(self, text: str, delay_ms: int, timeout_ms: int, *, label: str = "typed") -> DispatchResult:
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
                    stop = self._interrupted()
                    if stop is None and time.monotonic() > deadline:
                        return self._stopped(text, typed, sent_any, None, f"the {timeout_ms} ms timeout passed")
                    if stop is None and not sent_any:
                        stop = self.keyboard_focus_refusal()
                    if stop is not None:
                        return self._stopped(text, typed, sent_any, stop.reason, stop.message)
                    kb.send(ch)
                    sent_any = True
                    focus = x.input_focus()  # a round trip: the key events are routed by now
                    if not x.is_inside(focus, self.window_id):
                        refusal = self.keyboard_focus_refusal() or Refusal(Reason.FOCUS_MISMATCH, "the focus moved")
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

    async def activate(self, timeout_ms: int) -> DispatchResult:
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
            f"the active window is still {x.describe(x.active_window())}",
        )

    async def wait_for(self, wait: WaitFor, timeout_ms: int) -> DispatchResult:
        if wait.text or wait.role or wait.url_matches or not wait.window_title:
            return DispatchResult(DispatchStatus.NOT_STARTED, "a desktop session waits only for a window_title")
        try:
            compile_regex(wait.window_title)
        except PatternError as exc:
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

    def close(self) -> None:
        """Give borrowed keycodes back now, if the X server is still there."""
        if self._restore is not None:
            self._restore.cancel()
            self._restore = None
        with contextlib.suppress(xerror.XError, xerror.ConnectionClosedError, OSError):
            self._keyboard.restore()
