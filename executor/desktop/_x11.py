"""Window facts on an X display, and the server grab that makes a check and its input one step.

Every fact the desktop backend checks before a write is read here in a round trip or two:
the active window (EWMH ``_NET_ACTIVE_WINDOW``), the X input focus, the managed windows in
stacking order (``_NET_CLIENT_LIST_STACKING``), a window's client area in root coordinates,
its WM_CLASS, title and pid (``_NET_WM_PID``, else the X-Resource extension, which knows the
pid of every local client — Tk does not set ``_NET_WM_PID``), the windows under a point from
the root down, and which client owns a window.

**Ownership.** The server gives each client a range of resource ids: a base and a mask,
the same mask for every client. A window's owner is its id without the mask bits
(``owner``). When a client disconnects its range goes to the next client that connects,
so an id alone never proves a window is the one seen before: the backend watches the bound
window's destruction (``_binding``) instead of caching anything per window id.

**The server grab.** ``server_grabbed()`` wraps ``GrabServer`` ... ``UngrabServer``: while it
is held the server runs only this connection's requests, so no other client can map,
move, focus or grab anything between a check and the XTest input sent after it.
"""

from __future__ import annotations

import gc
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from Xlib import X
from Xlib import error as xerror
from Xlib.display import Display
from Xlib.ext import res
from Xlib.protocol import event as xevent
from Xlib.xobject.drawable import Window

from handrail._patterns import compile_regex
from handrail.executor._errors import BackendError
from handrail.executor._models import WindowInfo


class WindowGoneError(BackendError):
    """The window no longer exists."""


@dataclass(frozen=True)
class Rect:
    x: int
    y: int
    width: int
    height: int

    def contains(self, x: int, y: int) -> bool:
        return self.x <= x < self.x + self.width and self.y <= y < self.y + self.height


class X11:
    """One connection to an X display: the window facts and the input sent through it.

    Args:
        name: the display, e.g. ``":99"``.

    Raises:
        BackendError: the display cannot be opened.
    """

    def __init__(self, name: str) -> None:
        failure = ""
        with warnings.catch_warnings():
            # python-xlib leaves the sockets of a failed connection to the garbage collector.
            warnings.simplefilter("ignore", ResourceWarning)
            try:
                self.display = Display(name)
            except (xerror.DisplayError, xerror.ConnectionClosedError, OSError) as exc:
                failure = str(exc)
            if failure:
                gc.collect()
        if failure:
            raise BackendError(f"cannot open X display {name!r}: {failure}")
        self.name = name
        self.root = self.display.screen().root
        self._atoms: dict[str, int] = {}
        self._mask = int(self.display.display.info.resource_id_mask)
        self.grab_seconds: list[float] = []  # how long each server grab was held, newest last
        self.has_xres = self.display.has_extension("X-Resource")
        self.has_record = self.display.has_extension("RECORD")
        if not self.display.has_extension("XTEST"):
            self.display.close()
            raise BackendError(f"X display {name!r} has no XTEST extension: input cannot be sent")

    @property
    def client_id_base(self) -> int:
        """This connection's resource id base (how XRecord names its requests)."""
        return int(self.display.display.info.resource_id_base)

    def atom(self, name: str) -> int:
        a = self._atoms.get(name)
        if a is None:
            a = self._atoms[name] = self.display.intern_atom(name)
        return a

    def window(self, wid: int) -> Window:
        return self.display.create_resource_object("window", wid)

    def close(self) -> None:
        self.display.close()

    def sync(self) -> None:
        self.display.sync()

    # -- the window manager's view ----------------------------------------------------

    def _root_windows(self, name: str) -> list[int]:
        prop = self.root.get_full_property(self.atom(name), X.AnyPropertyType)
        return [int(w) for w in prop.value] if prop is not None else []

    def wm_name(self) -> str:
        """The EWMH window manager's name, or "" when none is running."""
        ids = self._root_windows("_NET_SUPPORTING_WM_CHECK")
        if not ids:
            return ""
        try:
            return self.title(ids[0]) or "unnamed"
        except WindowGoneError:
            return ""

    def active_window(self) -> int:
        """``_NET_ACTIVE_WINDOW``: the window the window manager says is active; 0 if none."""
        ids = self._root_windows("_NET_ACTIVE_WINDOW")
        return ids[0] if ids else 0

    def input_focus(self) -> int:
        """The window the server sends key events to (0 for None, 1 for PointerRoot)."""
        focus = self.display.get_input_focus().focus
        return focus if isinstance(focus, int) else int(focus.id)

    def stacking(self) -> list[int]:
        """Managed top-level windows, bottom to top."""
        return self._root_windows("_NET_CLIENT_LIST_STACKING") or self._root_windows("_NET_CLIENT_LIST")

    def screen_size(self) -> tuple[int, int]:
        g = self.root.get_geometry()
        return int(g.width), int(g.height)

    def pointer(self) -> tuple[int, int]:
        p = self.root.query_pointer()
        return int(p.root_x), int(p.root_y)

    # -- one window ---------------------------------------------------------------------

    def client_rect(self, wid: int) -> Rect:
        """The window's client area in root coordinates (two round trips)."""
        w = self.window(wid)
        try:
            g = w.get_geometry()
            origin = self.root.translate_coords(w, 0, 0)
        except (xerror.BadWindow, xerror.BadDrawable) as exc:
            raise WindowGoneError(f"window 0x{wid:x} no longer exists") from exc
        return Rect(int(origin.x), int(origin.y), int(g.width), int(g.height))

    def title(self, wid: int) -> str:
        w = self.window(wid)
        try:
            prop = w.get_full_property(self.atom("_NET_WM_NAME"), self.atom("UTF8_STRING"))
            if prop is not None:
                value = prop.value
                return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
            name = w.get_wm_name()
        except xerror.BadWindow as exc:
            raise WindowGoneError(f"window 0x{wid:x} no longer exists") from exc
        if isinstance(name, bytes):
            return name.decode("latin-1")
        return name or ""

    def wm_class(self, wid: int) -> tuple[str, str]:
        """(instance, class) of WM_CLASS; empty strings when unset."""
        try:
            pair = self.window(wid).get_wm_class()
        except xerror.BadWindow as exc:
            raise WindowGoneError(f"window 0x{wid:x} no longer exists") from exc
        return (pair[0], pair[1]) if pair else ("", "")

    def pid(self, wid: int) -> int:
        """The pid of the window's client: ``_NET_WM_PID``, else X-Resource; 0 if unknown.

        Read afresh every time: a window id says nothing about the client behind it once
        the window is gone, and the id can be handed to another client.
        """
        try:
            prop = self.window(wid).get_full_property(self.atom("_NET_WM_PID"), X.AnyPropertyType)
        except xerror.BadWindow as exc:
            raise WindowGoneError(f"window 0x{wid:x} no longer exists") from exc
        pid = int(prop.value[0]) if prop is not None and len(prop.value) else 0
        return pid or self.client_pid(wid)

    def client_pid(self, xid: int) -> int:
        """The pid of the client that owns resource ``xid`` (X-Resource); 0 if unknown."""
        if not self.has_xres:
            return 0
        try:
            reply = self.display.res_query_client_ids([{"client": xid, "mask": res.LocalClientPIDMask}])
        except xerror.XError:
            return 0
        for cid in reply.ids:
            if cid.spec.mask & res.LocalClientPIDMask and cid.value:
                return int(cid.value[0])
        return 0

    def owner(self, xid: int) -> int:
        """The resource id base of the client that created ``xid`` (0: the server itself)."""
        return xid & ~self._mask

    def frame_extents(self, wid: int) -> tuple[int, int, int, int]:
        """``_NET_FRAME_EXTENTS`` (left, right, top, bottom); zeros when unset."""
        try:
            prop = self.window(wid).get_full_property(self.atom("_NET_FRAME_EXTENTS"), X.AnyPropertyType)
        except xerror.BadWindow as exc:
            raise WindowGoneError(f"window 0x{wid:x} no longer exists") from exc
        if prop is None or len(prop.value) != 4:
            return (0, 0, 0, 0)
        left, right, top, bottom = (int(v) for v in prop.value)
        return left, right, top, bottom

    def info(self, wid: int) -> WindowInfo:
        """Everything the observation says about one window."""
        rect = self.client_rect(wid)
        return WindowInfo(
            window_id=wid,
            pid=self.pid(wid),
            wm_class=self.wm_class(wid)[1],
            title=self.title(wid),
            x=rect.x,
            y=rect.y,
            width=rect.width,
            height=rect.height,
        )

    def describe(self, wid: int) -> str:
        """A window for a message: its id, class, title and pid, as far as they can be read."""
        if wid in (0, 1) or wid == int(self.root.id):
            return "no window" if wid == 0 else "the root window"
        try:
            info = self.info(wid)
        except (WindowGoneError, xerror.XError):
            return f"window 0x{wid:x}"
        return f"window 0x{wid:x} ({info.wm_class or 'no class'} {info.title!r}, pid {info.pid or '?'})"

    def exists(self, wid: int) -> bool:
        try:
            self.window(wid).get_geometry()
        except (xerror.BadWindow, xerror.BadDrawable):
            return False
        return True

    def toplevel(self, wid: int) -> int:
        """The window's ancestor that is a child of the root (its frame when managed)."""
        current = wid
        try:
            while True:
                tree = self.window(current).query_tree()
                parent = int(tree.parent.id) if tree.parent else 0
                if parent in (0, int(self.root.id)):
                    return current
                current = parent
        except xerror.BadWindow as exc:
            raise WindowGoneError(f"window 0x{wid:x} no longer exists") from exc

    def toplevel_at(self, x: int, y: int) -> int:
        """The topmost mapped child of the root at a root point (one round trip); 0 if none."""
        child = self.root.translate_coords(self.root, x, y).child
        return int(child.id) if child else 0

    def is_inside(self, wid: int, ancestor: int) -> bool:
        """Whether ``wid`` is ``ancestor`` or one of its descendants."""
        return wid == ancestor or ancestor in self.ancestors(wid)

    def ancestors(self, wid: int) -> list[int]:
        """The windows above ``wid``, the root first; [] when it is gone or is the root."""
        chain: list[int] = []
        current = wid
        try:
            for _ in range(64):
                tree = self.window(current).query_tree()
                parent = int(tree.parent.id) if tree.parent else 0
                if not parent:
                    break
                chain.append(parent)
                current = parent
        except xerror.BadWindow:
            return []
        chain.reverse()
        return chain

    def chain_at(self, x: int, y: int) -> list[int]:
        """The mapped windows that contain a root point, from the root down to the deepest.

        Input-only windows count: the server delivers pointer events to the deepest window
        at the pointer, and key events too when it lies inside the focus window.
        """
        root = self.root
        chain = [int(root.id)]
        window = root
        for _ in range(64):
            child = window.translate_coords(root, x, y).child
            if not child:
                break
            window = child
            chain.append(int(child.id))
        return chain

    @contextmanager
    def server_grabbed(self) -> Iterator[None]:
        """Hold the server for this connection alone (check, then send, as one step).

        The grab ends (and the requests sent under it are flushed) however the body ends;
        its duration is appended to ``grab_seconds``.
        """
        started = time.perf_counter()
        self.display.grab_server()
        try:
            yield
        finally:
            self.display.ungrab_server()
            self.display.flush()
            self.grab_seconds.append(time.perf_counter() - started)
            if len(self.grab_seconds) > 4096:
                del self.grab_seconds[:2048]

    # -- acting on windows --------------------------------------------------------------

    def request_activate(self, wid: int) -> None:
        """Ask the window manager to raise and focus ``wid`` (a pager's request)."""
        message = xevent.ClientMessage(
            window=self.window(wid),
            client_type=self.atom("_NET_ACTIVE_WINDOW"),
            data=(32, [2, X.CurrentTime, 0, 0, 0]),
        )
        mask = X.SubstructureRedirectMask | X.SubstructureNotifyMask
        self.root.send_event(message, event_mask=mask)
        self.display.flush()

    def find_windows(self, pattern: str) -> list[tuple[int, str]]:
        """Managed windows whose title ``re.search``-matches ``pattern``: (id, title)."""
        regex = compile_regex(pattern)  # RE2: linear time
        found = []
        for wid in self.stacking():
            try:
                title = self.title(wid)
            except WindowGoneError:
                continue
            if regex.search(title):
                found.append((wid, title))
        return found
