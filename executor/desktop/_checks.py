"""What is checked before every desktop write, cheapest first, each refusal with its reason.

``Checker.check`` runs twice for every write: once early (``check_fresh``, before the
authz round trip) and once inside the server grab that the input is sent under, so that
what it verified is what the server routes the input by (see ``_input``). In order:

1. a person used the desk since the observation: ``HELD_BY_HUMAN``;
2. the bound window was destroyed (the binding has ended for good): ``TARGET_GONE``;
3. the target is on screen — else it was iconified, withdrawn or replaced: ``TARGET_CHANGED``;
4. (not for ``activate``) the target's own client opened no other top-level window since
   the observation — a dialog can take the keys before the X focus moves — and the target
   is the active window: else ``FOCUS_MISMATCH``;
5. keys: the X focus is the target or inside it *and belongs to the target's client*
   (another client's window inside the target holding the focus is ``TARGET_CHANGED``);
6. the client area and the screen size are the observed ones: ``TARGET_CHANGED``;
7. the pointer is where the executor left it (else a person moved it): ``HELD_BY_HUMAN``;
8. pointer: the point lies in the client area; the windows at the point, from the root
   down, pass through the target, and every one below it belongs to the target's client —
   another client's window there (an input-only window takes clicks unseen) is
   ``TARGET_CHANGED``, a window on top ``FOCUS_MISMATCH``; keys: the same for the windows
   under the pointer inside the focus window, which the server gives the keys to;
9. no other client holds an active grab of the keyboard (keys) or the pointer (buttons):
   a short grab attempt from this connection, released at once, fails ``AlreadyGrabbed``;
10. no other client's passive grab would take the very key or button events about to be
    sent: a passive grab of the same key (or button) and modifiers on a window the event
    would pass is refused to this connection with ``BadAccess``. Both ``FOCUS_MISMATCH``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from Xlib import X
from Xlib import error as xerror
from Xlib.xobject.drawable import Window

from handrail.executor._backend import Refusal
from handrail.executor._models import ActionKind, ActionSpec, Observation, Reason
from handrail.executor.desktop._binding import Binding
from handrail.executor.desktop._keys import KeyStroke
from handrail.executor.desktop._x11 import X11, Rect, WindowGoneError
from handrail.executor.desktop._xinput import InputWatcher, pointer_left

KEY_KINDS = frozenset({ActionKind.TYPE, ActionKind.PRESS, ActionKind.HOTKEY})
POINTER_KINDS = frozenset(
    {ActionKind.CLICK, ActionKind.DOUBLE_CLICK, ActionKind.MOVE, ActionKind.DRAG, ActionKind.SCROLL}
)
_GRAB_STATUS = {
    X.AlreadyGrabbed: "AlreadyGrabbed",
    X.GrabInvalidTime: "GrabInvalidTime",
    X.GrabNotViewable: "GrabNotViewable",
    X.GrabFrozen: "GrabFrozen",
}
# How long a refusal for a grab waits for the input recording to catch up with the check
# (milliseconds when the machine is not starved): only to name the grab's holder.
_CATCH_UP_S = 0.5


@dataclass(frozen=True)
class Planned:
    """What an action is about to send, for the checks that depend on it.

    Attributes:
        points: root points of a pointer action (the start and end of a drag).
        buttons: (button, modifier state) of each button press.
        keys: the key events (their keycodes and the modifier state each meets).
    """

    points: tuple[tuple[int, int], ...] = ()
    buttons: tuple[tuple[int, int], ...] = ()
    keys: tuple[KeyStroke, ...] = ()


class Checker:
    """The checks of one bound window, on the backend's connection.

    Args:
        x: the connection that checks and sends.
        binding: the bound window.
        human: why input must stop now (a person at the desk), or None.
        on_foreign_pointer: told when the pointer is not where the executor left it.
        watcher: the foreign-input watch, which names grab holders (None without RECORD).
    """

    def __init__(
        self,
        x: X11,
        binding: Binding,
        human: Callable[[], Refusal | None],
        on_foreign_pointer: Callable[[str], None],
        watcher: Callable[[], InputWatcher | None],
    ) -> None:
        self._x = x
        self._binding = binding
        self._human = human
        self._on_foreign_pointer = on_foreign_pointer
        self._watcher = watcher
        self.window_id = binding.window_id

    def gone(self) -> Refusal | None:
        """TARGET_GONE once the bound window was destroyed (after reading pending events)."""
        self._binding.poll()
        if self._binding.gone:
            return Refusal(
                Reason.TARGET_GONE,
                f"{self._binding.gone}; this session's binding has ended and no action can reach "
                "that window again: close the session and open a new one",
            )
        return None

    def new_window(self) -> Refusal | None:
        """FOCUS_MISMATCH when the target's client made another top-level window since the observation."""
        if not self._binding.new_windows:
            return None
        wid, what = self._binding.new_windows[0]
        return Refusal(
            Reason.FOCUS_MISMATCH,
            f"the target's application opened {self._x.describe(wid)}, which {what} since the observation "
            "(a dialog can take the keys before the X focus moves)",
        )

    def check(
        self, cited: Observation, spec: ActionSpec, planned: Planned, pointer: tuple[int, int] | None = None
    ) -> Refusal | None:
        """Every check of the module docstring, in order; None when the write may go out.

        ``pointer``: where the pointer is, when the caller has just asked (one round trip less).
        """
        human = self._human()
        if human is not None:
            return human
        seen = cited.desktop
        if seen is None:
            return Refusal(Reason.TARGET_CHANGED, f"observation {cited.observation_id} has no desktop state")
        x = self._x
        try:
            focus = x.input_focus()  # a round trip first: every event sent before it is read now
            refusal = self.gone() or self._viewable()
            if refusal is None and spec.kind is not ActionKind.ACTIVATE:
                refusal = self.new_window() or self._active()
            if refusal is None and spec.kind in KEY_KINDS:
                refusal = self._focus(focus)
            if refusal is not None:
                return refusal
            rect = x.client_rect(self.window_id)
            was = Rect(seen.target.x, seen.target.y, seen.target.width, seen.target.height)
            if rect != was:
                return Refusal(Reason.TARGET_CHANGED, _geometry_change(was, rect))
            screen = x.screen_size()
            if screen != (seen.screen_width, seen.screen_height):
                return Refusal(
                    Reason.TARGET_CHANGED,
                    f"the screen is {screen[0]}x{screen[1]}, not {seen.screen_width}x{seen.screen_height} as observed",
                )
            pointer = pointer or x.pointer()
            left = pointer_left.get(x.name)
            if left is not None and pointer != left:
                self._on_foreign_pointer(f"moved the pointer to ({pointer[0]}, {pointer[1]})")
                return self._human()
            if spec.kind in POINTER_KINDS:
                return self._pointer(rect, planned, pointer, buttons=spec.kind is not ActionKind.MOVE)
            if spec.kind in KEY_KINDS:
                return self._keys(focus, pointer, planned)
        except WindowGoneError:
            return self.gone() or Refusal(
                Reason.TARGET_CHANGED, f"the target window 0x{self.window_id:x} went away during the check"
            )
        except xerror.BadWindow as exc:
            # Outside the server grab a window may go between two requests of the check.
            return Refusal(Reason.TARGET_CHANGED, f"the windows changed while they were checked ({exc})")
        return None

    # -- the window manager's view and the focus ------------------------------------------

    def _viewable(self) -> Refusal | None:
        """TARGET_CHANGED when the target is not on screen (iconified, withdrawn, unmapped)."""
        x = self._x
        if x.window(self.window_id).get_attributes().map_state == X.IsViewable:
            return None
        return Refusal(
            Reason.TARGET_CHANGED,
            f"the target window 0x{self.window_id:x} is not on screen (iconified, withdrawn or unmapped); "
            f"the active window is {x.describe(x.active_window())}",
        )

    def _active(self) -> Refusal | None:
        x = self._x
        active = x.active_window()
        if active == self.window_id:
            return None
        return Refusal(
            Reason.FOCUS_MISMATCH, f"the active window is {x.describe(active)}, not the target 0x{self.window_id:x}"
        )

    def _focus(self, focus: int) -> Refusal | None:
        """Keys: the X focus is the target or inside it, and the target's client owns it."""
        x = self._x
        above = [] if focus == self.window_id else x.ancestors(focus)
        inside = focus == self.window_id or self.window_id in above
        if inside and x.owner(focus) == self._binding.owner:
            return None
        if inside:
            return Refusal(
                Reason.TARGET_CHANGED,
                f"the keyboard focus is in {self._describe_foreign(focus)} inside the target: keys would go to it",
            )
        managed = set(x.stacking())
        holder = next((w for w in reversed(above) if w in managed), focus)
        return Refusal(
            Reason.FOCUS_MISMATCH,
            f"the keyboard focus is in {x.describe(holder)}, not in the target 0x{self.window_id:x}",
        )

    def _describe_foreign(self, wid: int) -> str:
        x = self._x
        pid = x.client_pid(wid)
        return f"window 0x{wid:x} of another client (pid {pid or '?'})"

    # -- what the events will pass ----------------------------------------------------------

    def _foreign_below(self, chain: list[int], top: int) -> int:
        """The first window below ``top`` in ``chain`` not owned by the target's client; 0 if none."""
        owner = self._binding.owner
        for wid in chain[chain.index(top) + 1 :]:
            if self._x.owner(wid) != owner:
                return wid
        return 0

    def _pointer(self, rect: Rect, planned: Planned, pointer: tuple[int, int], *, buttons: bool) -> Refusal | None:
        x = self._x
        deepest = 0
        origin = (rect.x, rect.y)
        for rx, ry in planned.points:
            if not rect.contains(rx, ry):
                return Refusal(
                    Reason.TARGET_CHANGED,
                    f"the point ({rx - origin[0]}, {ry - origin[1]}) in client pixels is outside the target's "
                    f"{rect.width}x{rect.height} client area",
                )
            chain = x.chain_at(rx, ry)
            if self.window_id not in chain:
                return Refusal(
                    Reason.FOCUS_MISMATCH,
                    f"{self._describe_top(chain)} covers the point ({rx - origin[0]}, {ry - origin[1]}) of the target",
                )
            foreign = self._foreign_below(chain, self.window_id)
            if foreign:
                return Refusal(
                    Reason.TARGET_CHANGED,
                    f"{self._describe_foreign(foreign)} lies inside the target at the point "
                    f"({rx - origin[0]}, {ry - origin[1]}): the click would go to it",
                )
            if (rx, ry) != planned.points[0]:
                continue  # buttons are pressed at the first point only (a drag releases at the last)
            deepest = chain[-1]
            for button, state in planned.buttons:
                refusal = self._passive(chain, f"button {button}", partial(_grab_button, button=button, state=state))
                if refusal is not None:
                    return refusal
        if not buttons:
            return None
        # The attempt on the window the click goes to: where the pointer usually is already
        # (else the target sees a Leave/Enter pair with mode NotifyGrab/NotifyUngrab).
        return self._active_grab("pointer", deepest or x.chain_at(*pointer)[-1])

    def _keys(self, focus: int, pointer: tuple[int, int], planned: Planned) -> Refusal | None:
        x = self._x
        under = x.chain_at(*pointer)
        if focus in under:
            # The server gives the keys to the window under the pointer when it lies inside
            # the focus window: that one must be the target's client's too.
            foreign = self._foreign_below(under, focus)
            if foreign:
                return Refusal(
                    Reason.TARGET_CHANGED,
                    f"{self._describe_foreign(foreign)} lies inside the target under the pointer: keys would go to it",
                )
            chain = under
        else:
            chain = [*x.ancestors(focus), focus]
        refusal = self._active_grab("keyboard", focus)
        if refusal is not None:
            return refusal
        for stroke in planned.keys:
            if stroke.press:
                what = f"keycode {stroke.keycode} (modifiers 0x{stroke.state:x})"
                refusal = self._passive(chain, what, partial(_grab_key, keycode=stroke.keycode, state=stroke.state))
                if refusal is not None:
                    return refusal
        return None

    # -- grabs ------------------------------------------------------------------------------

    def _active_grab(self, kind: str, window: int) -> Refusal | None:
        """Try to grab the keyboard (or pointer) on ``window`` and let go: did another client hold it?

        ``window`` is the focus window (or the window under the pointer), so that the
        attempt moves no focus or pointer anywhere; the target may still see a FocusOut and
        FocusIn with mode NotifyGrab/NotifyUngrab, as when any menu opens.
        """
        x = self._x
        w = x.window(window)
        watcher = self._watcher()
        mark = watcher.own_grabs(x.client_id_base) if watcher is not None else 0
        if kind == "keyboard":
            status = w.grab_keyboard(False, X.GrabModeAsync, X.GrabModeAsync, X.CurrentTime)
            if status == X.GrabSuccess:
                x.display.ungrab_keyboard(X.CurrentTime)
                return None
        else:
            status = w.grab_pointer(False, 0, X.GrabModeAsync, X.GrabModeAsync, X.NONE, X.NONE, X.CurrentTime)
            if status == X.GrabSuccess:
                x.display.ungrab_pointer(X.CurrentTime)
                return None
        what = "keys" if kind == "keyboard" else "clicks"
        return Refusal(
            Reason.FOCUS_MISMATCH,
            f"another X client holds an active {kind} grab ({_GRAB_STATUS.get(status, status)}): "
            f"every one of its {what} would go to {self._holder(kind, mark)}",
        )

    def _holder(self, kind: str, mark: int) -> str:
        """Who holds the ``kind`` grab, once the recording has caught up with this
        check's own grab attempt (the ``mark``-th and next of this connection's)."""
        watcher = self._watcher()
        holder = None
        if watcher is not None:
            watcher.catch_up(self._x.client_id_base, mark, _CATCH_UP_S)
            holder = watcher.grab_holder(kind)
        if holder is None:
            return "the grabbing client (it grabbed before this session watched: X does not say which)"
        x = self._x
        stamp = time.strftime("%H:%M:%S", time.localtime(holder.at))
        return (
            f"the client of pid {x.client_pid(holder.client) or '?'} (ids 0x{holder.client:x}), "
            f"which grabbed it on {x.describe(holder.window)} at {stamp}"
        )

    def _passive(
        self, chain: list[int], what: str, grab: Callable[[Window, xerror.CatchError], None]
    ) -> Refusal | None:
        """BadAccess for a passive grab of this key or button on any window of ``chain``?"""
        x = self._x
        caught = []
        for wid in chain:
            error = xerror.CatchError(xerror.BadAccess)
            grab(x.window(wid), error)
            caught.append((wid, error))
        x.sync()
        for wid, error in caught:
            if error.get_error() is not None:
                return Refusal(
                    Reason.FOCUS_MISMATCH,
                    f"another X client has a passive grab of {what} on {x.describe(wid)} "
                    "(a window manager binding or a global shortcut): it would take the event, not the target",
                )
        return None

    def _describe_top(self, chain: list[int]) -> str:
        """The window on top at a point, for a message: the managed window in that frame."""
        x = self._x
        top = chain[1] if len(chain) > 1 else 0
        managed = set(x.stacking())
        if top in managed:
            return x.describe(top)
        try:
            inside = [int(c.id) for c in x.window(top).query_tree().children]
        except xerror.BadWindow:
            inside = []
        client = next((w for w in inside if w in managed), 0)
        if client:
            return x.describe(client)
        return f"an unmanaged window 0x{top:x} (a menu, tooltip or notification)"


def _grab_button(window: Window, error: xerror.CatchError, *, button: int, state: int) -> None:
    """A passive grab of ``button`` with ``state``, undone at once (BadAccess if another client has it)."""
    window.grab_button(
        button, state, False, X.ButtonPressMask, X.GrabModeAsync, X.GrabModeAsync, X.NONE, X.NONE, onerror=error
    )
    window.ungrab_button(button, state)


def _grab_key(window: Window, error: xerror.CatchError, *, keycode: int, state: int) -> None:
    """A passive grab of ``keycode`` with ``state``, undone at once (BadAccess if another client has it)."""
    window.grab_key(keycode, state, False, X.GrabModeAsync, X.GrabModeAsync, onerror=error)
    window.ungrab_key(keycode, state)


def _geometry_change(was: Rect, now: Rect) -> str:
    parts = []
    if (was.x, was.y) != (now.x, now.y):
        parts.append(f"moved from {was.x},{was.y} to {now.x},{now.y}")
    if (was.width, was.height) != (now.width, now.height):
        parts.append(f"was resized from {was.width}x{was.height} to {now.width}x{now.height}")
    return "the target window " + " and ".join(parts) + " since the observation"
