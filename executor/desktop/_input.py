"""The input the desktop backend sends to its bound window: pointer, keys, typed text.

Every piece of input goes out as one step with its check: the backend's connection grabs
the server, runs every check (``_checks``), sends the XTest events, and lets go. While
the server is grabbed it runs no other client's requests, so no window can be mapped,
moved, focused or grabbed between the check and the input, and the server routes the
events by exactly the state that was checked. The grab lasts a fraction of a millisecond
(``X11.grab_seconds`` keeps the figures; ``docs/desktop.md`` gives them).

Typing goes one character at a time, each its own grabbed check-and-send, and between
two characters the application is given time to handle the last key: with
``_NET_WM_PING`` it says so itself; without it the executor waits a few milliseconds. A
character is counted in ``typed_chars`` when it was sent while the check held; when a
check finds that the target's application opened another window meanwhile (a dialog that
may have taken the key before the X focus moved), the character sent just before it is
in doubt: not counted, and named in the message. Nothing is sent after a failed check.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from functools import partial

from Xlib import X
from Xlib import error as xerror
from Xlib.ext import xtest

from handrail._patterns import PatternError, compile_regex
from handrail.executor._backend import DispatchResult, DispatchStatus, Refusal
from handrail.executor._models import ActionKind, ActionSpec, Observation, Reason, WaitFor
from handrail.executor.desktop._binding import Binding
from handrail.executor.desktop._checks import Checker, Planned
from handrail.executor.desktop._keys import Keyboard, key_keysym, keysym_for, untypable
from handrail.executor.desktop._x11 import X11
from handrail.executor.desktop._xinput import pointer_left

MAX_SCROLL_NOTCHES = 100
log = logging.getLogger(__name__)

_POLL_S = 0.03
_DRAG_STEPS = 8
_RESTORE_KEYMAP_AFTER_S = 0.3  # let the client read the last borrowed key before it is unmapped
_PING_TIMEOUT_S = 1.0  # an application that answers no ping within this is not typed into further
_SETTLE_S = 0.003  # without _NET_WM_PING: the time an application is given to handle one key
_BUTTONS = {"": 1, "left": 1, "middle": 2, "right": 3}
_NEW_WINDOW = "the application may have given it to that new window"
_NO_PONG = "the application never said it had handled it"


def root_point(cited: Observation, x: int, y: int) -> tuple[int, int]:
    """A point of the cited screenshot in root coordinates (scaled back by its scale)."""
    assert cited.desktop is not None
    scale = cited.screenshot_scale or 1.0
    return cited.desktop.target.x + round(x / scale), cited.desktop.target.y + round(y / scale)


class DesktopInput:
    """Sends input to one window of one display, each piece under a server grab with its check.

    Args:
        x: the backend's X connection (it checks and sends).
        binding: the bound window.
        checker: the checks run inside each grab.
        interrupted: why input must stop now (a person at the desk), or None; asked
            before every typed character.
    """

    def __init__(self, x: X11, binding: Binding, checker: Checker, interrupted: Callable[[], Refusal | None]) -> None:
        self._x = x
        self._binding = binding
        self._checker = checker
        self.window_id = binding.window_id
        self.display = x.name
        self._interrupted = interrupted
        self._keyboard = Keyboard(x)
        self._loop = asyncio.get_running_loop()
        self._restore: asyncio.TimerHandle | None = None

    def _send_checked(self, cited: Observation, spec: ActionSpec, plan: Callable[[int], Planned]) -> Refusal | None:
        """Grab the server, check, send ``plan``'s events if the check held, let go."""
        x = self._x
        with x.server_grabbed():
            # Where the pointer is, and the modifier state (locks such as NumLock included),
            # which passive grabs match against.
            now = x.root.query_pointer()
            planned = plan(int(now.mask) & 0xFF)
            refusal = self._checker.check(cited, spec, planned, (int(now.root_x), int(now.root_y)))
            if refusal is not None:
                return refusal
            d = x.display
            for rx, ry in planned.points[:1]:
                xtest.fake_input(d, X.MotionNotify, x=rx, y=ry)
            for button, _ in planned.buttons:
                xtest.fake_input(d, X.ButtonPress, button)
                if spec.kind is not ActionKind.DRAG:
                    xtest.fake_input(d, X.ButtonRelease, button)
            self._keyboard.send(list(planned.keys))
        return None

    # -- the pointer ------------------------------------------------------------------

    async def pointer(self, cited: Observation, spec: ActionSpec) -> DispatchResult:
        kind = spec.kind
        rx, ry = root_point(cited, spec.x, spec.y)
        points = [(rx, ry)]
        button = _BUTTONS[spec.button]
        name = spec.button or "left"
        presses: list[int] = []
        if kind in (ActionKind.CLICK, ActionKind.DOUBLE_CLICK):
            count = 2 if kind is ActionKind.DOUBLE_CLICK else max(1, spec.click_count)
            presses = [button] * count
            what = f"{'double-' if count == 2 else ''}clicked {name} at ({rx}, {ry})"
            if count > 2:
                what = f"clicked {name} {count} times at ({rx}, {ry})"
        elif kind is ActionKind.MOVE:
            what = f"moved the pointer to ({rx}, {ry})"
        elif kind is ActionKind.SCROLL:
            if max(abs(spec.delta_x), abs(spec.delta_y)) > MAX_SCROLL_NOTCHES:
                return DispatchResult(
                    DispatchStatus.NOT_STARTED, f"scroll by at most {MAX_SCROLL_NOTCHES} wheel notches at a time"
                )
            presses = [5 if spec.delta_y > 0 else 4] * abs(spec.delta_y)  # positive delta_y scrolls down
            presses += [7 if spec.delta_x > 0 else 6] * abs(spec.delta_x)
            what = f"scrolled {spec.delta_x},{spec.delta_y} notches at ({rx}, {ry})"
        else:
            points.append(root_point(cited, spec.to_x, spec.to_y))
            presses = [button]
            what = f"dragged {name} from ({rx}, {ry}) to {points[1]}"

        def plan(state: int) -> Planned:
            return Planned(points=tuple(points), buttons=tuple((b, state) for b in presses))

        refusal = self._send_checked(cited, spec, plan)
        if refusal is not None:
            return DispatchResult(DispatchStatus.NOT_STARTED, refusal.message, reason=refusal.reason)
        pointer_left[self.display] = (rx, ry)
        if kind is ActionKind.DRAG:
            # The press gave the window under it an implicit grab of the pointer: the moves
            # and the release go to it, whatever is mapped meanwhile.
            tx, ty = points[1]
            d = self._x.display
            try:
                for step in range(1, _DRAG_STEPS + 1):
                    await asyncio.sleep(0.01)
                    px, py = rx + (tx - rx) * step // _DRAG_STEPS, ry + (ty - ry) * step // _DRAG_STEPS
                    xtest.fake_input(d, X.MotionNotify, x=px, y=py)
                    pointer_left[self.display] = (px, py)
                    d.flush()
            finally:
                xtest.fake_input(d, X.ButtonRelease, button)
                d.sync()
        return DispatchResult(DispatchStatus.DONE, what)

    # -- keys ---------------------------------------------------------------------------

    async def press(self, cited: Observation, spec: ActionSpec, keys: list[str]) -> DispatchResult:
        """One key, or keys held together (pressed in order, released in reverse)."""
        if len(keys) == 1 and len(keys[0]) == 1:
            return await self.type(cited, spec, keys[0], 0, 1_000, label="pressed")
        keysyms = [key_keysym(k) for k in keys]
        for key, keysym in zip(keys, keysyms, strict=True):
            if not keysym:
                return DispatchResult(DispatchStatus.NOT_STARTED, f"unknown key {key!r}")
        self._cancel_restore()
        kb = self._keyboard
        try:
            kb.prepare(set(keysyms))
            refusal = self._send_checked(
                cited, spec, lambda state: Planned(keys=tuple(kb.strokes_for_keys(keysyms, state)))
            )
        finally:
            self._schedule_restore()
        if refusal is not None:
            return DispatchResult(DispatchStatus.NOT_STARTED, refusal.message, reason=refusal.reason)
        return DispatchResult(DispatchStatus.DONE, f"pressed {'+'.join(keys)}")

    async def type(
        self, cited: Observation, spec: ActionSpec, text: str, delay_ms: int, timeout_ms: int, *, label: str = "typed"
    ) -> DispatchResult:
        bad = untypable(text)
        if bad:
            return DispatchResult(DispatchStatus.NOT_STARTED, f"cannot type the control character U+{ord(bad):04X}")
        kb = self._keyboard
        self._cancel_restore()
        deadline = time.monotonic() + timeout_ms / 1000
        sent = 0
        try:
            for segment in self._segments(text):
                if kb.borrowed and kb.missing(set(segment)):
                    await asyncio.sleep(_RESTORE_KEYMAP_AFTER_S)  # the client reads the earlier keys first
                    kb.restore()
                kb.prepare({keysym_for(ch) for ch in segment})
                for ch in segment:
                    stop = self._interrupted()
                    if stop is None and time.monotonic() > deadline:
                        return self._stopped(text, sent, None, f"the {timeout_ms} ms timeout passed")
                    if stop is None:
                        stop = self._send_checked(cited, spec, partial(self._char_plan, ch))
                    if stop is not None:
                        # A new window of the target's application puts the character before in doubt.
                        doubt = text[sent - 1] if sent and self._binding.new_windows else ""
                        return self._stopped(
                            text, sent - bool(doubt), stop.reason, stop.message, doubt=doubt, why=_NEW_WINDOW
                        )
                    sent += 1
                    if sent < len(text):
                        late = await self._handled(delay_ms)
                        if late:
                            return self._stopped(text, sent - 1, Reason.FOCUS_MISMATCH, late, doubt=ch, why=_NO_PONG)
        finally:
            self._schedule_restore()
        return DispatchResult(DispatchStatus.DONE, f"{label} {sent} characters", typed_chars=sent)

    def _char_plan(self, ch: str, state: int) -> Planned:
        return Planned(keys=tuple(self._keyboard.strokes_for_char(ch, state)))

    async def _handled(self, delay_ms: int) -> str:
        """Give the application the time to handle the key just sent; why not, or ""."""
        if self._binding.supports_ping:
            if not await self._binding.pong(self._binding.ping(), _PING_TIMEOUT_S):
                return self._binding.gone or (
                    f"the application did not answer a _NET_WM_PING within {_PING_TIMEOUT_S:.0f} s after the key"
                )
            if delay_ms:
                await asyncio.sleep(delay_ms / 1000)
            return ""
        self._x.sync()
        await asyncio.sleep(max(delay_ms / 1000, _SETTLE_S))
        return ""

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

    @staticmethod
    def _stopped(
        text: str, typed: int, reason: Reason | None, stop: str, *, doubt: str = "", why: str = ""
    ) -> DispatchResult:
        """Typing stopped by a check (``reason``) or by its timeout (None)."""
        message = f"typing stopped after {typed} of {len(text)} characters: {stop}"
        if doubt:
            message += (
                f"; the character after them ({doubt!r}) was sent while the check held, but {why}: it is not counted"
            )
        if not typed and not doubt:
            return DispatchResult(DispatchStatus.NOT_STARTED, message, reason=reason)
        return DispatchResult(DispatchStatus.PARTIAL, message, typed_chars=typed, reason=reason)

    def _cancel_restore(self) -> None:
        if self._restore is not None:
            self._restore.cancel()
            self._restore = None

    def _schedule_restore(self) -> None:
        if self._keyboard.borrowed:
            self._restore = self._loop.call_later(_RESTORE_KEYMAP_AFTER_S, self._restore_keymap)

    def _restore_keymap(self) -> None:
        self._restore = None
        try:
            self._keyboard.restore()
        except (xerror.XError, xerror.ConnectionClosedError, OSError) as exc:
            log.warning("could not restore the keymap on %s: %s", self.display, exc)

    # -- the window manager and waiting --------------------------------------------------------

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
        self._cancel_restore()
        with contextlib.suppress(xerror.XError, xerror.ConnectionClosedError, OSError):
            self._keyboard.restore()
