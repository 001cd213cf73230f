"""The X11 desktop backend: a session bound to one window of a display.

This sub-package is the only part of Handrail that imports ``pyautogui``, ``mss`` and
``Xlib``:

- ``_open``: binding a session to exactly one managed window (``open_desktop``);
- ``_surface``: the session's window behind the ``Backend`` protocol — observe, the
  focus/geometry/point checks, dispatch, expectations, a person at the desk;
- ``_input``: the input it sends — pointer, keys, typed text;
- ``_x11``: the X connection (EWMH, XTest, X-Resource) and the keyboard with borrowed
  keycodes; ``X11`` is public for fixtures that set a display up;
- ``_xinput``: XRecord watching for input the executor did not send;
- ``_gui``: pyautogui, bound to one display; ``_screenshots``: mss.

What is checked before every write: ``docs/desktop.md``.
"""

from __future__ import annotations

from handrail.executor.desktop._open import bind_window, open_desktop
from handrail.executor.desktop._surface import DesktopSurface
from handrail.executor.desktop._x11 import X11, Keyboard, Rect, WindowGoneError

__all__ = [
    "X11",
    "DesktopSurface",
    "Keyboard",
    "Rect",
    "WindowGoneError",
    "bind_window",
    "open_desktop",
]
