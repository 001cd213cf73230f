"""Telling a person's input from the executor's: the X RECORD extension.

A thread records, from every client, the device events the server processes (key,
button, motion) and the XTEST ``FakeInput`` requests that cause synthetic ones. Each
``FakeInput`` from one of the executor's own connections produces (at most) one device
event, recorded right after the request; so a device event not preceded by a pending
``FakeInput`` of ours was caused by somebody else: a keyboard or mouse at the desk, a
remote-desktop viewer, or another program driving XTEST (``xdotool``). That is what the
backend reports as a person at the desk.

The same recording names the holder of an active grab. X can tell that the keyboard or
the pointer is grabbed (a grab attempt fails) but not by whom; the watcher records every
client's ``GrabPointer``/``GrabKeyboard`` (and their replies: did it succeed?),
``UngrabPointer``/``UngrabKeyboard`` and disconnections, so that a refusal can say which
client took the grab — when it took it while the session was open.

This works on Xvfb (which has RECORD), needs no input device of its own, and costs one
thread and two connections per session. Our own requests are recognised by the
connection's resource id base; every connection of this process that sends input is
registered in ``own_clients`` (pyautogui's and each session's keyboard connection), so
that two sessions on one display do not report each other.
"""

from __future__ import annotations

import contextlib
import logging
import struct
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from Xlib import X
from Xlib import error as xerror
from Xlib.display import Display
from Xlib.ext import record

log = logging.getLogger(__name__)

# A FakeInput request waits at most this long for its device event; a request that made
# no event (the server dropped it) must not excuse a person's later input.
_PENDING_S = 0.5
_XTEST_FAKE_INPUT = 2
_KINDS = {
    X.KeyPress: "used the keyboard",
    X.KeyRelease: "used the keyboard",
    X.ButtonPress: "pressed pointer button {detail} at ({x}, {y})",
    X.ButtonRelease: "released pointer button {detail} at ({x}, {y})",
    X.MotionNotify: "moved the pointer to ({x}, {y})",
}

_GRABS = {26: "pointer", 31: "keyboard"}  # GrabPointer, GrabKeyboard
_UNGRABS = {27: "pointer", 32: "keyboard"}  # UngrabPointer, UngrabKeyboard

# display name -> resource id bases of this process's connections that send input
own_clients: dict[str, set[int]] = {}
# display name -> the root point where this process's input last left the pointer
pointer_left: dict[str, tuple[int, int]] = {}


@dataclass(frozen=True)
class GrabHolder:
    """A client that took an active grab while the session watched: its id base, the grab window, when."""

    client: int
    window: int
    at: float


def describe_event(data: bytes) -> tuple[int, str]:
    """The type of a recorded core device event and what a person did, in words.

    Which key was pressed is never said: it may be part of a password.
    """
    kind = data[0] & 0x7F
    detail = data[1]
    x, y = struct.unpack_from("=hh", data, 20)
    return kind, _KINDS.get(kind, "used an input device").format(detail=detail, x=x, y=y)


class InputWatcher:
    """Calls ``on_foreign(description)`` (from its thread) for input not sent by us.

    Args:
        display: the display name.
        on_foreign: called with a description of each foreign device event.
    """

    def __init__(self, display: str, on_foreign: Callable[[str], None]) -> None:
        self._name = display
        self._on_foreign = on_foreign
        self._ctl: Display | None = None
        self._data: Display | None = None
        self._ctx = 0
        self._thread: threading.Thread | None = None
        self._pending: deque[float] = deque()
        self._xtest_major = -1
        self.foreign_events = 0
        self._grabbing: dict[int, tuple[str, int]] = {}  # client -> the grab it asked for, awaiting the reply
        self._holders: dict[str, GrabHolder] = {}
        # Grab requests of our own clients seen so far, by client: a check's own grab
        # attempt, once seen here, says every grab the server took before it is seen too.
        self._own_grabs: dict[int, int] = {}
        self._seen = threading.Condition()

    def grab_holder(self, kind: str) -> GrabHolder | None:
        """The client that took the ``"keyboard"`` or ``"pointer"`` grab last, if still held as far as seen."""
        return self._holders.get(kind)

    def own_grabs(self, client: int) -> int:
        """How many grab requests of our own ``client`` the recording has seen."""
        return self._own_grabs.get(client, 0)

    def catch_up(self, client: int, past: int, timeout_s: float) -> bool:
        """Wait until the recording has seen more than ``past`` grab requests of our own
        ``client``: then it has seen every request the server handled before the last one
        (the stream is in the server's order). False if it did not within ``timeout_s``."""
        with self._seen:
            return self._seen.wait_for(lambda: self._own_grabs.get(client, 0) > past, timeout_s)

    def start(self) -> None:
        """Start recording; returns once the server records (errors if RECORD is missing)."""
        self._ctl = Display(self._name)
        self._data = Display(self._name)
        xtest = self._ctl.query_extension("XTEST")
        if xtest is None or not self._ctl.has_extension("RECORD"):
            self._close_displays()
            raise RuntimeError(f"X display {self._name} lacks RECORD or XTEST")
        major = self._xtest_major = xtest.major_opcode
        self._ctx = self._ctl.record_create_context(
            0,
            [record.AllClients],
            [
                {
                    "core_requests": (0, 0),
                    "core_replies": (0, 0),
                    "ext_requests": (major, major, _XTEST_FAKE_INPUT, _XTEST_FAKE_INPUT),
                    "ext_replies": (0, 0, 0, 0),
                    "delivered_events": (0, 0),
                    "device_events": (X.KeyPress, X.MotionNotify),
                    "errors": (0, 0),
                    "client_started": False,
                    "client_died": False,
                },
                *(
                    {
                        "core_requests": (grab, ungrab),
                        "core_replies": (grab, grab),
                        "ext_requests": (0, 0, 0, 0),
                        "ext_replies": (0, 0, 0, 0),
                        "delivered_events": (0, 0),
                        "device_events": (0, 0),
                        "errors": (0, 0),
                        "client_started": False,
                        "client_died": True,
                    }
                    for grab, ungrab in ((26, 27), (31, 32))
                ),
            ],
        )
        self._ctl.sync()  # the context must exist before the other connection enables it
        started = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(started,), name="handrail-xrecord", daemon=True)
        self._thread.start()
        started.wait(5)

    def _run(self, started: threading.Event) -> None:
        assert self._data is not None

        def callback(reply: record.EnableContext) -> None:
            if reply.category == record.StartOfData:
                started.set()
            elif reply.category == record.FromClient and not reply.client_swapped:
                self._requests(reply.id_base, bytes(reply.data))
            elif reply.category == record.FromServer and not reply.client_swapped:
                data = bytes(reply.data)
                if data[:1] == b"\x01":  # a reply: to a grab request we recorded
                    self._grab_reply(reply.id_base, data)
                    return
                for i in range(0, len(data) - 31, 32):
                    self._event(data[i : i + 32])
            elif reply.category == record.ClientDied:
                self._grabbing.pop(reply.id_base, None)
                for kind, holder in list(self._holders.items()):
                    if holder.client == reply.id_base:
                        del self._holders[kind]

        try:
            self._data.record_enable_context(self._ctx, callback)
        except (xerror.XError, xerror.ConnectionClosedError, OSError) as exc:
            log.warning("input recording on %s stopped: %s", self._name, exc)
        finally:
            started.set()

    def _requests(self, client: int, data: bytes) -> None:
        """Recorded requests of one client, one after another in ``data``."""
        own = client in own_clients.get(self._name, ())
        offset = 0
        while offset + 4 <= len(data):
            opcode = data[offset]
            (length,) = struct.unpack_from("=H", data, offset + 2)
            if length == 0 and offset + 8 <= len(data):  # BIG-REQUESTS: the length follows
                (length,) = struct.unpack_from("=I", data, offset + 4)
            request = data[offset : offset + max(length, 1) * 4]
            offset += max(length, 1) * 4
            if opcode in _GRABS or opcode in _UNGRABS:
                if not own:
                    self._grab_request(client, request)
                elif opcode in _GRABS:
                    with self._seen:
                        self._own_grabs[client] = self._own_grabs.get(client, 0) + 1
                        self._seen.notify_all()
            elif opcode == self._xtest_major and own:
                self._pending.append(time.monotonic())  # a FakeInput: it will make one device event

    def _grab_request(self, client: int, data: bytes) -> None:
        opcode = data[0]
        if opcode in _GRABS:
            (window,) = struct.unpack_from("=I", data, 4)
            self._grabbing[client] = (_GRABS[opcode], window)
            return
        kind = _UNGRABS[opcode]
        holder = self._holders.get(kind)
        if holder is not None and holder.client == client:
            del self._holders[kind]

    def _grab_reply(self, client: int, data: bytes) -> None:
        asked = self._grabbing.pop(client, None)
        if asked is not None and data[1] == X.GrabSuccess:
            kind, window = asked
            self._holders[kind] = GrabHolder(client, window, time.time())

    def _event(self, data: bytes) -> None:
        now = time.monotonic()
        while self._pending and now - self._pending[0] > _PENDING_S:
            self._pending.popleft()
        if self._pending:
            self._pending.popleft()
            return
        self.foreign_events += 1
        _, what = describe_event(data)
        self._on_foreign(what)

    def stop(self) -> None:
        if self._ctl is not None and self._ctx:
            try:
                self._ctl.record_disable_context(self._ctx)
                self._ctl.sync()
            except (xerror.XError, xerror.ConnectionClosedError, OSError):
                pass
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None
        if self._ctl is not None and self._ctx:
            try:
                self._ctl.record_free_context(self._ctx)
                self._ctl.sync()
            except (xerror.XError, xerror.ConnectionClosedError, OSError):
                pass
            self._ctx = 0
        self._close_displays()

    def _close_displays(self) -> None:
        for d in (self._ctl, self._data):
            if d is not None:
                with contextlib.suppress(xerror.XError, xerror.ConnectionClosedError, OSError):
                    d.close()
        self._ctl = self._data = None
