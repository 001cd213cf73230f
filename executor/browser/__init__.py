"""The browser backend: one headless Chromium driven by Playwright, a context per session.

This sub-package is the only part of Handrail that imports ``playwright``:

- ``_host``: Playwright and the one Chromium process every session shares;
- ``_surface``: a session's context and tabs behind the ``Backend`` protocol — observe,
  check, dispatch, expectations;
- ``_tab``: one page's navigations, dialogs and failed requests;
- ``_pointer``: the executor's own guarded click;
- ``_context``: an element's context and what acting on it does (verbs by effect);
- ``_gate``: the navigation gate and the reporter of side-effecting requests;
- ``_expect``: bounded waits and expectations;
- ``_pagescript``: the scripts installed in every page and run per action;
- ``_aria``: what the backend reads from its own ARIA snapshots.

What is checked before every write, and how a click goes out: ``docs/browser.md``.
"""

from __future__ import annotations

from handrail.executor.browser._host import CHROMIUM_ARGS, CHROMIUM_ENV, DEFAULT_CHROMIUM, BrowserHost, chromium_path
from handrail.executor.browser._surface import VIEWPORT, BrowserSurface

__all__ = [
    "CHROMIUM_ARGS",
    "CHROMIUM_ENV",
    "DEFAULT_CHROMIUM",
    "VIEWPORT",
    "BrowserHost",
    "BrowserSurface",
    "chromium_path",
]
