"""Deprecated: moved to ``handrail.scenarios`` (``VirtualDisplay``, ``DisplayError``).

Kept for one release so that imports of ``handrail._xvfb`` keep working; pinned by
``tests/scenarios/test_old_paths.py``.
"""

from __future__ import annotations

from handrail.scenarios._xvfb import FIRST_DISPLAY, LAST_DISPLAY, DisplayError, VirtualDisplay, free_display

__all__ = ["FIRST_DISPLAY", "LAST_DISPLAY", "DisplayError", "VirtualDisplay", "free_display"]
