"""Moved to :mod:`handrail.executor.browser` (``BrowserHost``, ``chromium_path``, ``CHROMIUM_ARGS`` ...).

This path re-exports those names for one release, for code written against the old flat
layout; import them from ``handrail.executor.browser`` instead.
"""

from __future__ import annotations

from handrail.executor.browser import (
    CHROMIUM_ARGS,
    CHROMIUM_ENV,
    DEFAULT_CHROMIUM,
    BrowserHost,
    BrowserSurface,
    chromium_path,
)

__all__ = ["CHROMIUM_ARGS", "CHROMIUM_ENV", "DEFAULT_CHROMIUM", "BrowserHost", "BrowserSurface", "chromium_path"]
