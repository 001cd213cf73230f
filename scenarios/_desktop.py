"""The desktop fixture of a run: Tk windows on the run's own virtual display.

Used by scenarios whose app is ``notes``; :func:`display_unavailable` says why such a
scenario cannot run here (then it is skipped, with that reason).
"""

from __future__ import annotations

import importlib.util
import shutil
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from . import _x11 as x11
from ._errors import Divergence
from ._tkapps import TkApp

if TYPE_CHECKING:
    from ._x11 import X11

__all__ = ["EVENT_TIMEOUT_S", "DesktopApps", "display_unavailable"]

EVENT_TIMEOUT_S = 10.0
"""How long a fixture event (a re-render, a focus change) may take to show."""


class DesktopApps:
    """The desktop fixture of a run: the Tk ``notes`` window (the target) and a ``thief``
    application, on the run's own virtual display.

    ``state()`` is the notes window's state (``text``, ``clicks``, ``popup_text``,
    ``popup_open`` ...) with the thief's under ``thief`` (``thief.text``).
    """

    url = ""

    def __init__(self, display: str, name: str) -> None:
        self.display = display
        self.notes = TkApp("notes", display, title=f"Notes - {name}")
        self.thief = TkApp("thief", display, title=f"Thief - {name}")

    def start(self) -> None:
        self.notes.start()
        self.thief.start()
        self.thief.window_id()
        self.activate(self.notes.window_id())  # the thief took the focus when it opened

    def stop(self) -> None:
        self.thief.stop()
        self.notes.stop()

    def state(self) -> dict[str, Any]:
        notes = self.notes.settled_state(quiet=0.2)
        return {**notes, "thief": self.thief.settled_state(quiet=0.05)}

    def _wait_focus(self, holds: Callable[[X11], bool], what: str) -> None:
        with x11.connect(self.display) as x:
            deadline = time.monotonic() + EVENT_TIMEOUT_S
            while time.monotonic() < deadline:
                if holds(x):
                    return
                time.sleep(0.01)
        raise Divergence(what)

    def activate(self, window: int) -> None:
        """Have the window manager activate ``window`` (set-up, not the product)."""

        # The window manager may pass over one request (a window just mapped, focus
        # stealing prevention): ask again until it holds.
        last = [0.0]

        def active(x: X11) -> bool:
            if x.active_window() == window and x.is_inside(x.input_focus(), window):
                return True
            if time.monotonic() - last[0] > 0.3:
                x.request_activate(window)
                last[0] = time.monotonic()
            return False

        self._wait_focus(active, f"could not activate window {window:#x}")

    def move(self, x: int, y: int) -> str:
        """Move the notes window to ``(x, y)``; wait until its client area has moved."""
        window = self.notes.window_id()
        with x11.connect(self.display) as conn:
            before = conn.client_rect(window)
        self.notes.command(f"move {x} {y}")
        self._wait_focus(lambda xc: xc.client_rect(window) != before, f"the notes window did not move to ({x}, {y})")
        time.sleep(0.05)
        return f"the notes window moved to ({x}, {y})"

    def restart(self) -> str:
        """The notes application quits and starts again with a new window, titled the same."""
        old = self.notes
        window = old.window_id()
        old.command("quit")
        with x11.connect(self.display) as x:
            deadline = time.monotonic() + EVENT_TIMEOUT_S
            while x.exists(window) and time.monotonic() < deadline:
                time.sleep(0.01)
        old.stop()
        self.notes = TkApp("notes", self.display, title=old.title).start()
        new = self.notes.window_id()
        self.activate(new)
        return f"the notes application restarted: window {window:#x} closed, window {new:#x} opened"

    def steal(self, window: str) -> str:
        """Another window takes the focus: the thief app, or the notes app's own popup."""
        notes = self.notes.window_id()
        if window == "thief":
            self.thief.command("steal")
            self.thief.wait_state(lambda st: bool(st["stole"]))
            thief = self.thief.window_id()
            self._wait_focus(lambda x: x.active_window() == thief, "the thief did not get the focus")
        else:
            self.notes.command("steal")
            self.notes.wait_state(lambda st: bool(st["popup_open"]))
            self._wait_focus(
                lambda x: x.active_window() != notes and not x.is_inside(x.input_focus(), notes),
                "the popup did not take the focus",
            )
        time.sleep(0.1)  # let the window manager finish the change
        return f"the {window} has the focus"


def display_unavailable() -> str | None:
    """Why desktop scenarios cannot run here (no Xvfb, openbox, Tk ...), or None."""
    missing = [tool for tool in ("Xvfb", "openbox") if shutil.which(tool) is None]
    missing += [mod for mod in ("tkinter", "Xlib", "mss") if importlib.util.find_spec(mod) is None]
    if missing:
        return f"missing {', '.join(missing)} (see docs/desktop.md: apt-get install -y xvfb openbox python3-tk)"
    return None
