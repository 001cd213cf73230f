"""Moved to :mod:`handrail.executor.desktop` (``X11``, ``WindowGoneError``, ``Keyboard``, ``Rect``).

This path re-exports those names for one release, for code written against the old flat
layout; import them from ``handrail.executor.desktop`` instead.
"""

from __future__ import annotations

from handrail.executor.desktop._x11 import X11, Keyboard, Rect, WindowGoneError, keysym_for, untypable

__all__ = ["X11", "Keyboard", "Rect", "WindowGoneError", "keysym_for", "untypable"]
