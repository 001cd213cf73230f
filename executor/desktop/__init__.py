"""The X11 desktop backend: a session bound to one window of a display.

This sub-package is the only part of Handrail that imports ``mss`` and ``Xlib`` (and the
only one allowed ``pyautogui``, which it no longer needs):

- ``_open``: binding a session to exactly one managed window (``open_desktop``);
- ``_binding``: that window's identity — its client, its destruction (which ends the
  binding for good), new windows of its client, a ping through its application;
- ``_surface``: the session's window behind the ``Backend`` protocol — observe, dispatch,
  expectations, a person at the desk;
- ``_checks``: what is checked before every write (focus, geometry, ownership of the
  windows the input passes, grabs);
- ``_input``: the input it sends — pointer, keys, typed text — each piece with its check
  under one server grab;
- ``_keys``: keysyms, keycodes and the keyboard with borrowed keycodes;
- ``_x11``: the X connection (EWMH, X-Resource, the server grab); ``X11`` is public for
  fixtures that set a display up;
- ``_xinput``: XRecord watching for input the executor did not send, and grab holders;
- ``_screenshots``: mss.

All input goes through XTest on the connection that checks; pyautogui is not used (its
own connection could not send under this connection's server grab). What is checked
before every write: ``docs/desktop.md``.
"""

from __future__ import annotations

from handrail.executor.desktop._binding import Binding
from handrail.executor.desktop._keys import Keyboard
from handrail.executor.desktop._open import bind_window, open_desktop
from handrail.executor.desktop._surface import DesktopSurface
from handrail.executor.desktop._x11 import X11, Rect, WindowGoneError

__all__ = [
    "X11",
    "Binding",
    "DesktopSurface",
    "Keyboard",
    "Rect",
    "WindowGoneError",
    "bind_window",
    "open_desktop",
]
