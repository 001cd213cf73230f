"""The browser backend: one shared headless Chromium, a context and page per session.

Only this module imports Playwright.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from handrail.executor._backend import DispatchResult, DispatchStatus, RawObservation
from handrail.executor._errors import BackendError
from handrail.executor._models import ActionKind, ActionSpec
from handrail.executor._snapshot import RefInfo
from playwright.async_api import Browser, Page, Playwright, async_playwright
from playwright.async_api import Error as PlaywrightError
from playwright.async_api import TimeoutError as PlaywrightTimeoutError

DEFAULT_CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ENV = "HANDRAIL_CHROMIUM"

# As root Chromium needs --no-sandbox; the rest keep it off a network it cannot reach.
_CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
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
    """Owns Playwright and one Chromium process shared by every browser session."""

    def __init__(self, executable_path: str | None = None) -> None:
        self._executable_path = executable_path
        self._playwright: Playwright | None = None
        self._browser: Browser | None = None

    async def start(self) -> None:
        path = chromium_path(self._executable_path)
        self._playwright = await async_playwright().start()
        try:
            self._browser = await self._playwright.chromium.launch(
                executable_path=path, headless=True, args=_CHROMIUM_ARGS
            )
        except PlaywrightError as exc:
            await self._playwright.stop()
            self._playwright = None
            raise BackendError(f"could not launch Chromium at {path}: {exc}") from exc

    async def open_page(self, start_url: str, timeout_ms: int = 15_000) -> BrowserPage:
        if self._browser is None:
            raise BackendError("the browser host is not started")
        context = await self._browser.new_context(viewport={"width": 1280, "height": 800})
        page = await context.new_page()
        surface = BrowserPage(page)
        if start_url:
            try:
                await page.goto(start_url, wait_until="domcontentloaded", timeout=timeout_ms)
            except PlaywrightError as exc:
                await context.close()
                raise BackendError(f"could not open {start_url}: {exc.message}") from exc
        return surface

    async def close(self) -> None:
        if self._browser is not None:
            await self._browser.close()
            self._browser = None
        if self._playwright is not None:
            await self._playwright.stop()
            self._playwright = None


class BrowserPage:
    """A session's page: observation, the fast ref check and bounded dispatch."""

    def __init__(self, page: Page) -> None:
        self._page = page
        self._navigations = 0
        page.on("framenavigated", self._on_navigated)

    def _on_navigated(self, frame: object) -> None:
        if frame is self._page.main_frame:
            self._navigations += 1

    def structure_version(self) -> int:
        return self._navigations

    def current_url(self) -> str:
        return self._page.url

    async def observe(self, *, screenshot: bool) -> RawObservation:
        version = self._navigations
        try:
            snapshot = await self._page.aria_snapshot(mode="ai", timeout=5_000)
            title = await self._page.title()
            png = await self._page.screenshot(type="png") if screenshot else b""
        except PlaywrightError as exc:
            raise BackendError(f"could not observe the page: {exc.message}") from exc
        return RawObservation(
            url=self._page.url,
            title=title,
            snapshot=snapshot,
            screenshot_png=png,
            structure_version=version,
        )

    async def check_target(self, info: RefInfo) -> str | None:
        # One round trip on the happy path: the ref's element, if it still has the role
        # and accessible name the observation gave it. Playwright computes the name the
        # same way for get_by_role as for the snapshot. (A locator's own aria_snapshot()
        # would renumber the page's refs, so it is never used here.)
        ref = self._page.locator(f"aria-ref={info.ref}")
        same = ref.and_(self._page.get_by_role(info.role, name=info.name, exact=True))  # type: ignore[arg-type]
        try:
            if await same.count() == 1:
                return None
            if await ref.count() != 1:
                return f"ref {info.ref} no longer resolves ({info.role} {info.name!r} is gone)"
        except PlaywrightError as exc:
            return f"ref {info.ref} could not be checked: {_first_line(exc)}"
        return f"ref {info.ref} is no longer {info.role} {info.name!r}"

    async def dispatch(self, spec: ActionSpec, timeout_ms: int) -> DispatchResult:
        page = self._page
        try:
            if spec.kind is ActionKind.NAVIGATE:
                await page.goto(spec.url, wait_until="domcontentloaded", timeout=timeout_ms)
                return DispatchResult(DispatchStatus.DONE)
            locator = page.locator(f"aria-ref={spec.ref}")
            if spec.kind is ActionKind.CLICK:
                await locator.click(timeout=timeout_ms)
            elif spec.kind is ActionKind.FILL:
                await locator.fill(spec.text, timeout=timeout_ms)
            elif spec.kind is ActionKind.TYPE:
                await locator.press_sequentially(spec.text, timeout=timeout_ms)
            elif spec.kind is ActionKind.PRESS:
                await locator.press(spec.key, timeout=timeout_ms)
            elif spec.kind is ActionKind.SELECT:
                await locator.select_option(list(spec.values), timeout=timeout_ms)
        except PlaywrightTimeoutError as exc:
            status = _status_after_error(exc, spec.kind)
            return DispatchResult(status, _first_line(exc))
        except PlaywrightError as exc:
            # A closed target or a crash mid-action: the page may have got the input.
            return DispatchResult(DispatchStatus.MAYBE_STARTED, _first_line(exc))
        return DispatchResult(DispatchStatus.DONE)

    async def settle(self, timeout_ms: int) -> None:
        # The re-observation reports what the page shows, settled or not.
        with contextlib.suppress(PlaywrightError):
            await self._page.wait_for_load_state("domcontentloaded", timeout=timeout_ms)

    async def text_visible(self, text: str) -> bool:
        locator = self._page.get_by_text(text)
        try:
            count = await locator.count()
            for i in range(min(count, 20)):
                if await locator.nth(i).is_visible():
                    return True
        except PlaywrightError:
            return False
        return False

    async def close(self) -> None:
        with contextlib.suppress(PlaywrightError):  # already gone with the browser
            await self._page.context.close()


def _first_line(exc: PlaywrightError) -> str:
    return exc.message.splitlines()[0] if exc.message else type(exc).__name__


def _status_after_error(exc: PlaywrightError, kind: ActionKind) -> DispatchStatus:
    """Whether a timed-out action may have reached the page.

    Playwright logs "performing <action> action" once it starts to dispatch input; a
    timeout before that line (element hidden, covered, disabled) means nothing was sent.
    A navigation that timed out may have reached the server.
    """
    if kind is ActionKind.NAVIGATE:
        return DispatchStatus.MAYBE_STARTED
    log = exc.message or ""
    if "performing" in log or "action done" in log:
        return DispatchStatus.MAYBE_STARTED
    return DispatchStatus.NOT_STARTED
