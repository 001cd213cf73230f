"""Window facts and text input on an X display, through one python-xlib connection.

Every fact the desktop backend checks before a write is read here in one or two round
trips: the active window (EWMH ``_NET_ACTIVE_WINDOW``), the X input focus, the managed
windows in stacking order (``_NET_CLIENT_LIST_STACKING``), a window's client area in root
coordinates, its WM_CLASS, title and pid (``_NET_WM_PID``, else the X-Resource extension,
which knows the pid of every local client — Tk does not set ``_NET_WM_PID``), and which
top-level window is topmost at a point.

``Keyboard`` types text with XTest. ``pyautogui.write`` silently drops characters the
keymap lacks; here a character the keymap lacks is given a spare keycode (one with no
keysyms) for the duration of the text, so ``héllo ü€ 中`` arrives intact. Key events are
routed by the server in order with the mapping change, so the client reads each key with
the mapping in force when it was sent.
"""

from __future__ import annotations

import gc
import warnings
from dataclasses import dataclass

from Xlib import XK, X
from Xlib import error as xerror
from Xlib.display import Display
from Xlib.ext import res, xtest
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
        self._pids: dict[int, int] = {}
        self._inside: set[tuple[int, int]] = set()
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
        """The pid of the window's client: ``_NET_WM_PID``, else X-Resource; 0 if unknown."""
        cached = self._pids.get(wid)
        if cached is not None:
            return cached
        try:
            prop = self.window(wid).get_full_property(self.atom("_NET_WM_PID"), X.AnyPropertyType)
        except xerror.BadWindow as exc:
            raise WindowGoneError(f"window 0x{wid:x} no longer exists") from exc
        pid = int(prop.value[0]) if prop is not None and len(prop.value) else 0
        if not pid and self.has_xres:
            reply = self.display.res_query_client_ids([{"client": wid, "mask": res.LocalClientPIDMask}])
            for cid in reply.ids:
                if cid.spec.mask & res.LocalClientPIDMask and cid.value:
                    pid = int(cid.value[0])
        self._pids[wid] = pid
        return pid

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
        if wid in (0, 1):
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
        """Whether ``wid`` is ``ancestor`` or one of its descendants (cached when true)."""
        if wid == ancestor or (wid, ancestor) in self._inside:
            return True
        current = wid
        try:
            for _ in range(32):
                tree = self.window(current).query_tree()
                parent = int(tree.parent.id) if tree.parent else 0
                if parent == ancestor:
                    self._inside.add((wid, ancestor))
                    return True
                if parent in (0, int(self.root.id)):
                    return False
                current = parent
        except xerror.BadWindow:
            return False
        return False

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


# Characters typed as named keys rather than by their code point.
_CONTROL_KEYSYMS = {"\n": XK.XK_Return, "\r": XK.XK_Return, "\t": XK.XK_Tab}


def keysym_for(ch: str) -> int:
    """The keysym of a character: Latin-1 directly, anything else as a Unicode keysym."""
    special = _CONTROL_KEYSYMS.get(ch)
    if special is not None:
        return int(special)
    o = ord(ch)
    if 0x20 <= o <= 0x7E or 0xA0 <= o <= 0xFF:
        return o
    return 0x01000000 | o


def untypable(text: str) -> str:
    """The first character of ``text`` that cannot be typed (a control character), or ""."""
    for ch in text:
        if ch not in _CONTROL_KEYSYMS and (ord(ch) < 0x20 or 0x7F <= ord(ch) < 0xA0):
            return ch
    return ""


class Keyboard:
    """Types characters through XTest, borrowing spare keycodes for what the keymap lacks.

    Use ``prepare(chars)`` before typing a group of characters, ``send(ch)`` for each, and
    ``restore()`` at the end (or when typing stops) to give the spare keycodes back.
    """

    def __init__(self, x: X11) -> None:
        self._x = x
        info = x.display.display.info
        self._min = int(info.min_keycode)
        self._count = int(info.max_keycode) - self._min + 1
        self._shift = int(x.display.keysym_to_keycode(XK.XK_Shift_L))
        self._codes: dict[int, tuple[int, bool]] = {}  # keysym -> (keycode, needs shift)
        self._borrowed: dict[int, int] = {}  # keycode -> keysym mapped onto it
        self._spare: list[int] = []
        self._width = 1

    def _read_keymap(self) -> None:
        mapping = self._x.display.get_keyboard_mapping(self._min, self._count)
        self._width = len(mapping[0]) if mapping else 1
        self._codes = {}
        self._spare = []
        for i, syms in enumerate(mapping):
            code = self._min + i
            if code in self._borrowed:
                continue
            if not any(syms):
                self._spare.append(code)
                continue
            for level in (1, 0):  # the unshifted level wins when both have the keysym
                if level < len(syms) and syms[level]:
                    self._codes[int(syms[level])] = (code, level == 1)

    @property
    def spare_count(self) -> int:
        if not self._codes:
            self._read_keymap()
        return len(self._spare) + len(self._borrowed)

    def missing(self, chars: set[str]) -> set[str]:
        """The characters of ``chars`` the current keymap cannot type."""
        if not self._codes:
            self._read_keymap()
        return {ch for ch in chars if keysym_for(ch) not in self._codes}

    def prepare(self, chars: set[str]) -> None:
        """Make every character of ``chars`` typable, mapping spare keycodes as needed.

        Raises:
            BackendError: more distinct missing characters than spare keycodes.
        """
        self._read_keymap()
        needed = [keysym_for(ch) for ch in sorted(chars) if keysym_for(ch) not in self._codes]
        needed = [ks for ks in needed if ks not in self._borrowed.values()]
        free = [code for code in self._spare if code not in self._borrowed]
        if len(needed) > len(free):
            raise BackendError(f"{len(needed)} characters need spare keycodes; the keymap has {len(free)}")
        for keysym, code in zip(needed, free, strict=False):
            self._x.display.change_keyboard_mapping(code, [[keysym] * self._width])
            self._borrowed[code] = keysym
        for code, keysym in self._borrowed.items():
            self._codes[keysym] = (code, False)
        self._x.display.sync()

    def send(self, ch: str) -> None:
        """Press and release the key of one prepared character (not synced)."""
        code, shift = self._codes[keysym_for(ch)]
        d = self._x.display
        if shift:
            xtest.fake_input(d, X.KeyPress, self._shift)
        xtest.fake_input(d, X.KeyPress, code)
        xtest.fake_input(d, X.KeyRelease, code)
        if shift:
            xtest.fake_input(d, X.KeyRelease, self._shift)

    @property
    def borrowed(self) -> int:
        return len(self._borrowed)

    def restore(self) -> None:
        """Give every borrowed keycode back its empty mapping."""
        if not self._borrowed:
            return
        for code in self._borrowed:
            self._x.display.change_keyboard_mapping(code, [[0] * self._width])
        self._borrowed.clear()
        self._codes = {}
        self._x.display.sync()
