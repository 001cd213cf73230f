"""The browser host: Playwright and the one headless Chromium every browser session shares."""

from __future__ import annotations

import os
from pathlib import Path

from playwright.async_api import Browser, Playwright, async_playwright
from playwright.async_api import Error as PlaywrightError

from handrail.executor._backend import OPEN_LISTENER, SurfaceListener
from handrail.executor._errors import BackendError
from handrail.executor.browser._pagescript import (
    INIT_SCRIPT,
    NO_SHARED_WORKERS,
    NO_UNROUTED_CONNECTIONS,
    PICK_ENGINE,
    PICK_SELECTOR,
    SNAP_ENGINE,
    SNAP_SELECTOR,
)
from handrail.executor.browser._policy import policy_problem
from handrail.executor.browser._surface import VIEWPORT, BrowserSurface
from handrail.executor.browser._workerstart import GUARDED_WORKERS

DEFAULT_CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ENV = "HANDRAIL_CHROMIUM"

#: The features Playwright (1.65) turns off in its own ``--disable-features`` switch.
#: Chromium keeps only the last ``--disable-features`` it is given, whole: ours comes
#: after Playwright's, so it must carry Playwright's list too or that list is dropped (with
#: it the fix for cross-origin redirects under request interception).
#: ``tests/executor/test_chromium_args.py`` fails when Playwright's list has moved on.
PLAYWRIGHT_DISABLED_FEATURES = (
    "AvoidUnnecessaryBeforeUnloadCheckSync",
    "DestroyProfileOnBrowserClose",
    "HttpsUpgrades",
    "HttpsFirstBalancedModeAutoEnable",
    "LensOverlay",
    "MediaRouter",
    "PaintHolding",
    "ThirdPartyStoragePartitioning",
    "AvoidCorsURLLoaderRestartOnRedirect",
    "TcpPortRandomizationWin",
    "OptimizationHints",
    "NetworkTimeServiceQuerying",
    "AimEnabled",
    "PreconnectToSearch",
    "msForceBrowserSignIn",
    "msEdgeUpdateLaunchServicesPreferredVersion",
)

#: The features Handrail turns off besides.
HANDRAIL_DISABLED_FEATURES = (
    # A page restored from the back-forward cache loads without a request, so the
    # navigation gate would not see it: history navigations load (and are judged) anew.
    "BackForwardCache",
    # The address bar's suggestion pop-ups, made ahead in a renderer of their own at every
    # launch: about a second of CPU each time for a browser that has no address bar.
    "WebUIOmniboxPopup",
    "WebUIOmniboxAimPopup",
    "WebUIOmniboxFullPopup",
)

# As root Chromium needs --no-sandbox; the rest keep it off a network it cannot reach.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--disable-features=" + ",".join(PLAYWRIGHT_DISABLED_FEATURES + HANDRAIL_DISABLED_FEATURES),
]


def chromium_path(explicit: str | None = None) -> str:
    """The Chromium executable: the flag, else $HANDRAIL_CHROMIUM, else /usr/bin/chromium."""
    path = explicit or os.environ.get(CHROMIUM_ENV) or DEFAULT_CHROMIUM
    if not Path(path).exists():
        raise BackendError(
            f"no Chromium at {path}: install Debian's chromium (apt-get install chromium) "
            f"or point --chromium / ${CHROMIUM_ENV} at one"
        )
    return path


class BrowserHost:
    """Owns Playwright and one Chromium process shared by every browser session.

    Args:
        executable_path: Chromium to launch (default: ``chromium_path()``).
        upload_dir: the only directory files may be uploaded from; None forbids uploads.
        playwright_clicks: send every click through Playwright's click, never the
            executor's guarded pointer (``browser._pointer``).
    """

    def __init__(
        self, executable_path: str | None = None, upload_dir: Path | None = None, *, playwright_clicks: bool = False
    ) -> None:
        self._executable_path = executable_path
        self.upload_dir = upload_dir.resolve() if upload_dir else None
        self._playwright_clicks = playwright_clicks
        self._playwright: Playwright | None = None
        self._browser: Browser | None = None

    async def start(self) -> None:
        path = chromium_path(self._executable_path)
        problem = policy_problem()  # without it, a page's speculation rules load past the gate
        if problem:
            raise BackendError(problem)
        self._playwright = await async_playwright().start()
        await self._playwright.selectors.register(PICK_SELECTOR, PICK_ENGINE, content_script=True)
        await self._playwright.selectors.register(SNAP_SELECTOR, SNAP_ENGINE, content_script=True)
        try:
            self._browser = await self._playwright.chromium.launch(
                executable_path=path, headless=True, args=CHROMIUM_ARGS
            )
        except PlaywrightError as exc:
            await self._playwright.stop()
            self._playwright = None
            raise BackendError(f"could not launch Chromium at {path}: {exc}") from exc

    async def open_page(
        self, start_url: str = "", timeout_ms: int = 15_000, *, listener: SurfaceListener | None = None
    ) -> BrowserSurface:
        """A new session surface: its own context, one blank tab, the network gate in place.

        The executor opens it without a start page and loads that through the loop, once
        the session's listener judges its loads (``listen``, then ``start``). A tool or a
        test that drives a surface without the loop may give ``start_url`` alone: its loads
        are then judged by :data:`OPEN_LISTENER`, which lets everything through.
        """
        if self._browser is None:
            raise BackendError("the browser host is not started")
        # Service workers are blocked: one could answer a navigation without a request the
        # gate sees. Shared workers are taken away (NO_SHARED_WORKERS): their requests
        # bypass the context's routing, so none would be reported or tracked. Peer
        # connections and WebTransport are taken away too, and WebSockets reach only the
        # page's own origin (NO_UNROUTED_CONNECTIONS): they pass no route the gate holds.
        # A dedicated worker starts with the same guard in front of its source (_workerstart).
        context = await self._browser.new_context(viewport=VIEWPORT, service_workers="block")  # type: ignore[arg-type]
        await context.add_init_script(NO_SHARED_WORKERS + NO_UNROUTED_CONNECTIONS + GUARDED_WORKERS + INIT_SCRIPT)
        surface = BrowserSurface(context, self.upload_dir, pointer_clicks=not self._playwright_clicks)
        try:
            await surface.gate.install()
            page = await context.new_page()
            surface.adopt(page, activate=True)
            await surface.gate.gate(page)
            if listener is not None or start_url:
                surface.listen(listener or OPEN_LISTENER)
            if start_url:
                await surface.start(start_url, timeout_ms)
        except (PlaywrightError, BackendError):
            await surface.close()
            raise
        return surface

    async def close(self) -> None:
        if self._browser is not None:
            await self._browser.close()
            self._browser = None
        if self._playwright is not None:
            await self._playwright.stop()
            self._playwright = None
