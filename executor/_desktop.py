"""Moved to :mod:`handrail.executor.desktop` (``open_desktop``, ``bind_window``, ``DesktopSurface``).

This path re-exports those names for one release, for code written against the old flat
layout; import them from ``handrail.executor.desktop`` instead.
"""

from __future__ import annotations

from handrail.executor.desktop import DesktopSurface, bind_window, open_desktop

__all__ = ["DesktopSurface", "bind_window", "open_desktop"]
