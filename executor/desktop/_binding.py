"""The one window a desktop session is bound to, watched until it is destroyed.

A window id is not an identity: when a client disconnects, the server hands its range of
resource ids to the next client that connects, and that client (a restarted app, or an
unrelated program) can create a window with the very id the session was bound to. So the
binding is not re-found by id; it *ends* the moment the bound window is destroyed.

At bind time, with the server grabbed (nothing can be destroyed or created meanwhile),
the backend's connection checks that the window is still the one chosen and selects

- ``StructureNotify`` on it: its ``DestroyNotify`` ends the binding (``gone``), for good;
- ``SubstructureNotify`` on the root: ``CreateNotify``, ``ReparentNotify`` (a window being
  managed) and ``MapNotify`` of top-level windows, so that a new top-level window of the
  bound window's own client — a dialog, which a toolkit may give its keys before the X
  focus moves — is seen (``new_windows``, since the last observation).

Events arrive on the connection the checks use; ``poll()`` reads them. It runs from the
event loop as soon as the socket is readable, and again at the start of every check, after
a round trip, so an event the server sent before a check is always seen by that check.

``ping()`` sends ``_NET_WM_PING`` (when the window's ``WM_PROTOCOLS`` has it); the
application answers after it has handled every event sent before, which tells the typist
that the keys it sent were handled before it looks for a dialog.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from collections.abc import Callable

from Xlib import X
from Xlib import error as xerror
from Xlib.protocol import event as xevent
from Xlib.protocol.rq import Event

from handrail.executor.desktop._x11 import X11, WindowGoneError

log = logging.getLogger(__name__)

_stamps = itertools.count(1)


class Binding:
    """A session's bound window: its id, its client, and whether it still exists.

    Args:
        x: the backend's connection (the one that checks and sends input).
        window_id: the managed window chosen by ``bind_window``.
    """

    def __init__(self, x: X11, window_id: int) -> None:
        self._x = x
        self.window_id = window_id
        self.owner = x.owner(window_id)
        self.pid = 0
        self.gone = ""  # why the binding ended; "" while the window exists
        self.new_windows: list[tuple[int, str]] = []  # (window, what happened) since the last observation
        self.supports_ping = False
        self._pongs: set[int] = set()
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self, find: Callable[[], int]) -> None:
        """Select the events with the server grabbed, once ``find()`` still names the window.

        ``find`` looks the window up again by the session's selectors: between the first
        look-up and the grab the window may have been replaced by another with its id.

        Raises:
            BackendError: ``find`` names no window, or another one.
            WindowGoneError: the window was destroyed before it could be watched.
        """
        x = self._x
        with x.server_grabbed():
            again = find()
            if again != self.window_id:
                raise WindowGoneError(f"window 0x{self.window_id:x} was replaced by 0x{again:x} while it was bound")
            caught = xerror.CatchError(xerror.BadWindow)
            x.window(self.window_id).change_attributes(event_mask=X.StructureNotifyMask, onerror=caught)
            x.root.change_attributes(event_mask=X.SubstructureNotifyMask)
            x.sync()
            if caught.get_error() is not None:
                raise WindowGoneError(f"window 0x{self.window_id:x} was destroyed before it could be bound")
            self.pid = x.pid(self.window_id)
            self.supports_ping = self._has_ping()

    def _has_ping(self) -> bool:
        x = self._x
        prop = x.window(self.window_id).get_full_property(x.atom("WM_PROTOCOLS"), X.AnyPropertyType)
        return prop is not None and x.atom("_NET_WM_PING") in [int(a) for a in prop.value]

    def watch(self, loop: asyncio.AbstractEventLoop) -> None:
        """Read the connection's events as soon as they arrive (the loop's reader)."""
        self._loop = loop
        loop.add_reader(self._x.display.fileno(), self._readable)

    def _readable(self) -> None:
        try:
            self.poll()
        except (xerror.XError, xerror.ConnectionClosedError, OSError) as exc:
            log.warning("the X connection of window 0x%x failed: %s", self.window_id, exc)
            self.stop_watching()
            if not self.gone:
                self.gone = f"the connection to the X display failed: {exc}"

    def stop_watching(self) -> None:
        if self._loop is not None:
            with contextlib.suppress(ValueError, OSError):
                self._loop.remove_reader(self._x.display.fileno())
            self._loop = None

    def poll(self) -> None:
        """Handle every event the server has sent so far (no round trip of its own)."""
        d = self._x.display
        while d.pending_events():
            self._event(d.next_event())

    def _event(self, e: Event) -> None:
        kind = e.type
        if kind == X.DestroyNotify and int(e.window.id) == self.window_id:
            if not self.gone:
                stamp = time.strftime("%H:%M:%S")
                self.gone = f"the target window 0x{self.window_id:x} was destroyed at {stamp}"
                log.info("%s: the session's binding has ended", self.gone)
            return
        if kind == X.ClientMessage and e.client_type == self._x.atom("WM_PROTOCOLS"):
            _, data = e.data
            if int(data[0]) == self._x.atom("_NET_WM_PING") and int(data[2]) == self.window_id:
                self._pongs.add(int(data[1]))  # the application's answer, sent to the root
            return
        if kind == X.CreateNotify and int(e.parent.id) == int(self._x.root.id):
            self._new(int(e.window.id), "was created")
        elif kind == X.ReparentNotify and int(e.event.id) == int(self._x.root.id):
            if int(e.parent.id) != int(self._x.root.id):
                self._new(int(e.window.id), "was mapped (the window manager took it)")
        elif kind == X.MapNotify and int(e.event.id) == int(self._x.root.id):
            self._new(int(e.window.id), "was mapped")

    def _new(self, wid: int, what: str) -> None:
        if wid != self.window_id and self._x.owner(wid) == self.owner:
            self.new_windows.append((wid, what))

    def observed(self) -> None:
        """What the agent is about to see is its baseline: forget the windows seen so far."""
        self.poll()
        self.new_windows.clear()

    # -- a barrier through the application ----------------------------------------------

    def ping(self) -> int:
        """Send ``_NET_WM_PING`` to the window (flushed); returns its stamp."""
        stamp = next(_stamps) & 0x7FFFFFFF
        x = self._x
        message = xevent.ClientMessage(
            window=x.window(self.window_id),
            client_type=x.atom("WM_PROTOCOLS"),
            data=(32, [x.atom("_NET_WM_PING"), stamp, self.window_id, 0, 0]),
        )
        x.window(self.window_id).send_event(message, event_mask=0)
        x.display.flush()
        return stamp

    async def pong(self, stamp: int, timeout_s: float) -> bool:
        """Wait until the application answered the ping ``stamp``; False after ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while True:
            self.poll()
            if stamp in self._pongs:
                self._pongs.discard(stamp)
                return True
            if self.gone or time.monotonic() >= deadline:
                return False
            await asyncio.sleep(0.0005)
