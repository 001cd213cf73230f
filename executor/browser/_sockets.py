"""The URL of each WebSocket a session's pages open, for the ledger's record of a message
that lost its socket.

The gate hears a socket's events on the CDP session of the tab, frame or worker that owns
it, and keeps the URL that ``Network.webSocketCreated`` gave. A dedicated worker's session
can miss that event: the worker waits at its start for a debugger, but Playwright's own
session lets it run at once, before this one has asked for the worker's network events, and
a worker that opens its socket as it starts has opened it by then (seen on a slow machine).
Playwright's page reports every socket of the tab, workers' included, with its URL but not
the browser's id for it. So a socket whose making was not heard takes the URL of the tab's
open sockets that no heard one accounts for: one URL when there is one, every candidate
(``" or "``) when there are several, ``""`` when none.
"""

from __future__ import annotations

from collections import Counter

from playwright.async_api import Page, WebSocket

KEEP = 1024  # how many sockets' URLs are kept (the newest)


class SocketUrls:
    """The URLs of the sockets of one browser context, by the gate's key for each."""

    def __init__(self) -> None:
        self._urls: dict[str, tuple[Page, str]] = {}  # key -> (its tab, its URL)
        self._open: dict[Page, list[str]] = {}  # per tab: the URLs of Playwright's open sockets

    def watch(self, page: Page) -> None:
        """Follow the sockets Playwright reports for ``page`` (the fallback's candidates)."""
        page.on("websocket", lambda socket: self._opened(page, socket))

    def _opened(self, page: Page, socket: WebSocket) -> None:
        urls = self._open.setdefault(page, [])
        urls.append(socket.url)

        def closed(_socket: WebSocket) -> None:
            if socket.url in urls:
                urls.remove(socket.url)

        socket.on("close", closed)

    def made(self, key: str, page: Page, url: str) -> None:
        self._urls[key] = (page, url)
        while len(self._urls) > KEEP:
            del self._urls[next(iter(self._urls))]

    def url(self, key: str, page: Page) -> str:
        """The URL of socket ``key`` of ``page``; see the module's note when its making was
        not heard (the answer is then kept for its next messages)."""
        known = self._urls.get(key)
        if known is not None:
            return known[1]
        unaccounted = Counter(self._open.get(page, ()))
        unaccounted.subtract(url for owner, url in self._urls.values() if owner is page)
        url = " or ".join(sorted(u for u, n in unaccounted.items() if n > 0))
        self.made(key, page, url)
        return url

    def closed(self, key: str) -> None:
        self._urls.pop(key, None)

    def forget(self, page: Page) -> None:
        self._open.pop(page, None)
        for key in [k for k, (owner, _u) in self._urls.items() if owner is page]:
            del self._urls[key]
