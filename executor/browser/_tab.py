"""One tab of a browser session: its page, its stable id, its navigations and dialogs."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from playwright.async_api import Dialog, Page, Request
from playwright.async_api import Error as PlaywrightError


class Tab:
    """One page of a session, with its stable id, navigation count and open dialogs."""

    def __init__(self, tab_id: str, page: Page) -> None:
        self.tab_id = tab_id
        self.page = page
        self.navigations = 0
        # Navigations of the main frame the page asked for in this tab (a link, a form,
        # ``form.submit()``, a script), counted as the renderer announces them: an input
        # that changed it started one, even before any navigation event of the page's.
        self.requested = 0
        # Dedicated workers the page made under guarded inputs (their reports say): the
        # dispatch waits for each to attach before it lets the workers run what they were handed.
        self.workers_made = 0
        self.dialogs: list[Dialog] = []
        self.dialogs_opened = 0
        # Requests of the page's that failed (a form post whose connection dropped): one
        # listener for the tab's life, read by dispatch before and after an action.
        self.failed_requests: list[Request] = []
        # Futures resolved when the main frame commits a navigation or its navigation
        # request fails: how a dispatch waits for the navigation its input started.
        self._navigation_waiters: list[asyncio.Future[None]] = []
        page.on("framenavigated", self._on_navigated)
        page.on("dialog", self._on_dialog)
        page.on("requestfailed", self._on_request_failed)

    def navigation_requested(self) -> None:
        """The renderer announced a navigation of the main frame in this tab."""
        self.requested += 1

    def navigation_ends(self) -> asyncio.Future[None]:
        """A future resolved by the main frame's next commit or failed navigation."""
        waiter = asyncio.get_running_loop().create_future()
        self._navigation_waiters = [w for w in self._navigation_waiters if not w.done()]
        self._navigation_waiters.append(waiter)
        return waiter

    def _wake_navigation_waiters(self) -> None:
        waiters, self._navigation_waiters = self._navigation_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    def _on_request_failed(self, request: Request) -> None:
        self.failed_requests.append(request)
        del self.failed_requests[:-20]  # only the newest matter
        with contextlib.suppress(PlaywrightError):  # a service worker's request has no frame
            if request.is_navigation_request() and request.frame is self.page.main_frame:
                self._wake_navigation_waiters()

    def _on_navigated(self, frame: Any) -> None:
        if frame is self.page.main_frame:
            self.navigations += 1
            self._wake_navigation_waiters()

    def _on_dialog(self, dialog: Dialog) -> None:
        # Listening keeps the dialog open (Playwright would dismiss it otherwise): the
        # agent sees it in the next observation and accepts or dismisses it itself.
        self.dialogs.append(dialog)
        self.dialogs_opened += 1
