"""The executor's own guarded click, and how it finds the element in the page's world.

Playwright's ``click()`` re-checks the element, waits two animation frames (~33 ms at
60 Hz) to see it hold still, hit-tests the point and guards the input. The executor has
checked the element already; ``guarded_click`` arms the page script ARM_POINTER on it
right before the input — the element check again, at dispatch time; no animation on it or
its ancestors (the mutation clock already says nothing moved it); its centre inside the
viewport and the topmost element there — presses its centre and guards the input the way
Playwright does. Where the script cannot vouch for the element it says so, and the caller
lets Playwright click instead. A navigation the click starts is waited for until it
commits or fails, as Playwright's click waits for it.

The snapshot's refs live in Playwright's isolated world; a page script needs the element
in the page's own. ``on_picked`` hands it over with a selector engine chained after the
ref (``aria-ref=e5 >> handrail-pick=TOKEN``, see PICK_ENGINE): one ``count()`` round trip,
against the ~5 ms of an element handle adopted across worlds.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from typing import Any, Protocol

from playwright.async_api import Error as PlaywrightError
from playwright.async_api import Page

from handrail._vocabulary import Reason
from handrail.executor._models import ActionKind, ActionSpec
from handrail.executor.browser._pagescript import ARM_POINTER, DISARM_POINTER, PICK_SELECTOR

log = logging.getLogger(__name__)

# The actions guarded_click can send.
POINTER_KINDS = frozenset({ActionKind.CLICK, ActionKind.DOUBLE_CLICK})
_tokens = itertools.count(1)


class NotStartedError(Exception):
    """A check at dispatch time stopped the action: nothing reached the page."""

    def __init__(self, reason: Reason, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class MaybeStartedError(Exception):
    """The input reached the page and what it started did not finish within its bound."""


class NavigationWatch(Protocol):
    """A tab's main-frame navigations, as the browser backend counts them."""

    navigations: int

    def navigation_ends(self) -> asyncio.Future[None]:
        """A future resolved by the main frame's next commit or failed navigation."""
        ...


async def on_picked(page: Page, ref: str, script: str, since: float) -> tuple[int, dict[str, Any] | None]:
    """Run ``script`` on the element of ``ref``: (the ref's count, the script's answer).

    ``script`` takes ``[token, since]``. Both calls go out at once and the page runs them
    in order, so the pick (in Playwright's world) is there when the script (in the
    page's) asks for it; were it not, the script runs again after the count has answered.
    None: no element came.
    """
    token = f"p{next(_tokens)}"
    picked = page.locator(f"aria-ref={ref} >> {PICK_SELECTOR}={token}")
    args = [token, since]
    count, answer = await asyncio.gather(picked.count(), page.evaluate(script, args))
    if count == 1 and answer.get("unpicked"):
        answer = await page.evaluate(script, args)
    return count, None if answer.get("unpicked") else answer


async def guarded_click(page: Page, tab: NavigationWatch, spec: ActionSpec, since: float, timeout_ms: int) -> bool:
    """Click (or double-click) the element of ``spec.ref``, guarded; False: let Playwright.

    Raises:
        NotStartedError: the element is gone or changed since ``since``: nothing was sent.
        MaybeStartedError: the click started a navigation that did not end in time.
        PlaywrightError: the page or browser failed under the input.
    """
    try:
        count, armed = await on_picked(page, spec.ref, ARM_POINTER, since)
    except PlaywrightError:
        return False  # navigated meanwhile: Playwright's click will say what it finds
    if count == 0:
        raise NotStartedError(Reason.STALE_REF, f"not dispatched: ref {spec.ref} no longer resolves")
    if count != 1 or armed is None:
        return False
    if armed.get("problem"):
        raise NotStartedError(Reason.STALE_REF, f"not dispatched: at dispatch time {armed['problem']}")
    if "x" not in armed:
        log.debug("click on %s goes through Playwright: %s", spec.ref, armed.get("fallback"))
        return False
    ends = tab.navigation_ends()
    navigations = tab.navigations
    button: Any = spec.button or "left"
    try:
        if spec.kind is ActionKind.DOUBLE_CLICK:
            await page.mouse.dblclick(armed["x"], armed["y"], button=button)
        else:
            await page.mouse.click(armed["x"], armed["y"], button=button, click_count=spec.click_count or 1)
        try:
            report = await page.evaluate(DISARM_POINTER)
        except PlaywrightError:  # the page went away under the report: a navigation
            report = {"blocked": "", "navigating": True}
        if report["blocked"]:
            # Swallowed before the page saw it, as Playwright's guard would: its click
            # (which waits for the element to be the target again) takes over.
            return False
        if report["navigating"] and tab.navigations == navigations:
            bound = timeout_ms / 1000
            try:
                await asyncio.wait_for(asyncio.shield(ends), bound)
            except TimeoutError:
                raise MaybeStartedError(
                    f"the click started a navigation that neither committed nor failed within {bound:g} s"
                ) from None
    finally:
        if not ends.done():
            ends.cancel()
    return True
