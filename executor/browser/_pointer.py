"""The input guard from Python: the executor's own guarded click, and Playwright's input armed.

Playwright's ``click()`` re-checks the element, waits two animation frames (~33 ms at
60 Hz) to see it hold still, hit-tests the point and guards the input. The executor has
checked the element already; ``guarded_click`` arms the page's input guard on it right
before the input (``_guardscript``: the element check again, at dispatch time; no
animation on it or its ancestors; its centre inside the viewport and the topmost element
there), presses its centre, and reads the guard's report. Where the page script cannot
vouch for the element it says so, and the caller lets Playwright click instead — armed
the same way (``armed``), as is every other input that goes through Playwright on a cited
element: a click, a double click, a check or an uncheck; fill, type and press into a
field.

Armed, the guard swallows, before the page sees it, any trusted press event that lands on
something else, and any press or key after the element stopped being what it was (its
record re-painted, its label changed, the focus moved on): ``NotStartedError`` says what
changed, ``PartlyTypedError`` how much was typed before.

The snapshot's refs live in Playwright's isolated world; a page script needs the element
in the page's own. ``on_picked`` hands it over with a selector engine chained after the
ref (``aria-ref=e5 >> handrail-pick=TOKEN``, see PICK_ENGINE): one ``count()`` round trip,
against the ~5 ms of an element handle adopted across worlds; an element of a child frame
goes by its handle.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Protocol

from playwright.async_api import Error as PlaywrightError
from playwright.async_api import Locator, Page

from handrail._vocabulary import Reason
from handrail.executor._errors import InvalidArgumentError
from handrail.executor._models import ActionKind, ActionSpec
from handrail.executor.browser._pagescript import ARM_INPUT, ARM_POINTER, DISARM, PICK_SELECTOR
from handrail.executor.browser._world import run

log = logging.getLogger(__name__)

# The actions guarded_click can send.
POINTER_KINDS = frozenset({ActionKind.CLICK, ActionKind.DOUBLE_CLICK})
# The actions Playwright sends on a cited element with the guard armed, and how.
ARMED_KINDS = {
    ActionKind.CLICK: "click",
    ActionKind.DOUBLE_CLICK: "click",
    ActionKind.CHECK: "click",
    ActionKind.UNCHECK: "click",
    ActionKind.FILL: "keys",
    ActionKind.TYPE: "keys",
    ActionKind.PRESS: "keys",
    ActionKind.HOTKEY: "keys",
}
ARM_MS = 5_000  # how long the guard holds for the executor's own click
# The guard armed with the check holds this much longer than an arm at dispatch would, for
# the decision and the intent between them; past _ARM_REUSE_MS the dispatch arms anew.
ARM_EXTRA_MS = 3_000
_ARM_REUSE_MS = 3_000


_GONE = {"blocked": "", "changed": "", "navigating": True, "gone": True}


@dataclass(frozen=True)
class CheckArm:
    """The input guard armed on an element with its check before the decision (``_surface``)."""

    token: str
    ref: str
    answer: dict[str, Any]
    at: float  # time.monotonic() of the arm

    def usable(self, spec: ActionSpec) -> bool:
        return spec.ref == self.ref and (time.monotonic() - self.at) * 1000 < _ARM_REUSE_MS


class NotStartedError(Exception):
    """A check at dispatch time stopped the action: nothing reached the page."""

    def __init__(self, reason: Reason | None, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class PartlyTypedError(Exception):
    """Typing stopped part-way: the field changed after ``typed_chars`` characters went in."""

    def __init__(self, message: str, typed_chars: int) -> None:
        super().__init__(message)
        self.typed_chars = typed_chars


class MaybeStartedError(Exception):
    """The input reached the page and what it started did not finish within its bound."""


class NavigationWatch(Protocol):
    """A tab's main-frame navigations, as the browser backend counts them."""

    navigations: int
    requested: int  # the main frame's navigations asked for, as the renderer announces them
    workers_made: int  # dedicated workers the page made under guarded inputs, as their reports say

    def navigation_ends(self) -> asyncio.Future[None]:
        """A future resolved by the main frame's next commit or failed navigation."""
        ...


async def on_picked(page: Page, ref: str, script: str, *args: Any) -> tuple[int, dict[str, Any] | None]:
    """Run ``script`` on the element of ``ref``: (the ref's count, the script's answer).

    ``script`` takes ``[token, *args]``. Both calls go out at once and the page runs them
    in order, so the pick (in Playwright's world) is there when the script (in the
    page's) asks for it; were it not, the script runs again after the count has answered.
    None: no element came.
    """
    token = secrets.token_hex(8)
    picked = page.locator(f"aria-ref={ref} >> {PICK_SELECTOR}={token}")
    call = [token, *args]
    count, answer = await asyncio.gather(picked.count(), run(page, script, call))
    if count == 1 and answer.get("unpicked"):
        answer = await run(page, script, call)
    return count, None if answer.get("unpicked") else answer


class InputNavigation:
    """The navigation a guarded input may start in its tab, watched from just before it.

    Call ``close`` once done (it drops the tab's waiter).
    """

    def __init__(self, tab: NavigationWatch) -> None:
        self._tab = tab
        self._ends = tab.navigation_ends()
        self._navigations, self._requested = tab.navigations, tab.requested

    async def wait(self, navigating: bool, timeout_ms: int, what: str) -> None:
        """Wait for the navigation the input started (``navigating``: its report says so;
        or the renderer announced one since) to commit or fail, unless it committed already.

        Raises:
            MaybeStartedError: it neither committed nor failed within ``timeout_ms``.
        """
        tab = self._tab
        if (navigating or tab.requested != self._requested) and tab.navigations == self._navigations:
            bound = timeout_ms / 1000
            try:
                await asyncio.wait_for(asyncio.shield(self._ends), bound)
            except TimeoutError:
                raise MaybeStartedError(
                    f"the {what} started a navigation that neither committed nor failed within {bound:g} s"
                ) from None

    def close(self) -> None:
        if not self._ends.done():
            self._ends.cancel()


async def disarmed(page: Page, tab: NavigationWatch, token: str) -> dict[str, Any]:
    """The guard's report on the input armed with ``token`` (the page gone: a navigation)."""
    return await _report(lambda: run(page, DISARM, token), tab)


def stopped(report: dict[str, Any], what: str) -> str:
    """The sentence of a guard's report that stopped ``what`` (a click, the typing)."""
    if report.get("changed"):
        text = f"between the check and the {report.get('at') or 'input'}, {report['changed']}"
        text += f"; the {what} was swallowed before the page saw it"
        passed = report.get("passed") or []
        if passed:
            text += f" (the page had seen {', '.join(dict.fromkeys(passed))}, and changed it in answer)"
        return text
    return f"at input time the point was covered by {report['blocked']}; nothing reached the page"


async def guarded_click(
    page: Page,
    tab: NavigationWatch,
    spec: ActionSpec,
    since: float,
    timeout_ms: int,
    pre: tuple[str, dict[str, Any]] | None = None,
) -> bool:
    """Click (or double-click) the element of ``spec.ref``, guarded; False: let Playwright.

    ``pre``: the guard was armed in "pointer" mode with the check before dispatch (its
    token, the arm's answer), and still holds; else it is armed here.

    Raises:
        NotStartedError: the element is gone or changed since ``since``, or between the
            arming and the input: nothing was sent to the page's handlers.
        MaybeStartedError: the click started a navigation that did not end in time.
        PlaywrightError: the page or browser failed under the input.
    """
    armed: dict[str, Any] | None
    if pre is not None:
        token, armed = pre
        count = 1
    else:
        token = secrets.token_hex(8)
        try:
            count, armed = await on_picked(page, spec.ref, ARM_POINTER, since, token, ARM_MS)
        except PlaywrightError:
            return False  # navigated meanwhile: Playwright's click will say what it finds
    if count == 0:
        raise NotStartedError(Reason.STALE_REF, f"ref {spec.ref} no longer resolves")
    if count != 1 or armed is None:
        return False
    if armed.get("problem"):
        raise NotStartedError(Reason.STALE_REF, f"at dispatch time {armed['problem']}")
    if "x" not in armed:
        log.debug("click on %s goes through Playwright: %s", spec.ref, armed.get("fallback"))
        return False
    navigation = InputNavigation(tab)
    button: Any = spec.button or "left"
    try:
        if spec.kind is ActionKind.DOUBLE_CLICK:
            await page.mouse.dblclick(armed["x"], armed["y"], button=button)
        else:
            await page.mouse.click(armed["x"], armed["y"], button=button, click_count=spec.click_count or 1)
        report = await disarmed(page, tab, token)
        if report.get("changed"):
            raise NotStartedError(Reason.STALE_REF, stopped(report, "click"))
        if report["blocked"]:
            # Swallowed before the page saw it, as Playwright's guard would: its click
            # (which waits for the element to be the target again) takes over, armed.
            return False
        await navigation.wait(report["navigating"], timeout_ms, "click")
    finally:
        navigation.close()
    return True


@asynccontextmanager
async def armed(
    page: Page, tab: NavigationWatch, ref: str, since: float, mode: str, timeout_ms: int, *, by_handle: bool = False
) -> AsyncIterator[None]:
    """Arm the input guard on the element of ``ref`` around Playwright's input to it.

    ``mode`` is ``"click"`` or ``"keys"`` (see ``_guardscript``). On the way out the
    guard's report decides: a change or a covered point before anything went through is
    ``NotStartedError``; keys that went in before a change, ``PartlyTypedError``; a
    Playwright error when no input reached the page, ``NotStartedError`` too.

    Raises:
        NotStartedError, PartlyTypedError: as above.
        PlaywrightError: the input failed after some of it reached the page.
    """
    token = secrets.token_hex(8)
    hold = timeout_ms + 2_000
    disarm: Callable[[], Awaitable[Any]]
    if by_handle:  # a child frame's element: its frame's world, through its handle
        handle = await page.locator(f"aria-ref={ref}").element_handle(timeout=1_000)
        answer = await handle.evaluate(
            "(el, a) => window.__handrail ? window.__handrail.arm(el, a[0], a[1], a[2], a[3]) : null",
            [since, mode, token, hold],
        )
        frame = await handle.owner_frame()
        await handle.dispose()

        async def disarm() -> Any:
            return await (frame or page.main_frame).evaluate(DISARM, token)
    else:
        count, answer = await on_picked(page, ref, ARM_INPUT, since, token, hold, mode)
        if count == 0:
            raise NotStartedError(Reason.STALE_REF, f"ref {ref} no longer resolves")

        async def disarm() -> Any:
            return await run(page, DISARM, token)

    if answer is None:
        # The guard could not be armed (a page without Handrail's script, the hand-over
        # lost): Playwright's own checks stand alone, as before the guard.
        log.warning("input guard not armed on %s; Playwright's checks only", ref)
        yield
        return
    if answer.get("problem"):
        raise NotStartedError(Reason.STALE_REF, f"at dispatch time {answer['problem']}")
    what = "click" if mode == "click" else "typing"
    try:
        yield
    except PlaywrightError as exc:
        report = await _report(disarm, tab)
        if report.get("gone") or report.get("passed") or report.get("keys") or report.get("chars"):
            raise  # some input reached the page (or it went away): the caller judges
        if report.get("changed") or report.get("blocked"):
            raise NotStartedError(Reason.STALE_REF, stopped(report, what)) from exc
        # The guard saw no input at all reach the page: Playwright gave up before any.
        first = exc.message.splitlines()[0] if exc.message else type(exc).__name__
        raise NotStartedError(None, f"{first}; no input reached the page") from exc
    report = await _report(disarm, tab)
    if report.get("gone"):
        return
    typed = int(report.get("chars") or 0)
    if report.get("changed") and mode == "keys" and (typed or report.get("keys")):
        raise PartlyTypedError(
            f"stopped after {typed} characters: at the {report.get('at')}, {report['changed']}; "
            "nothing was typed after it",
            typed,
        )
    if report.get("changed") or report.get("blocked"):
        raise NotStartedError(Reason.STALE_REF, stopped(report, what))


async def _report(disarm: Callable[[], Awaitable[Any]], tab: NavigationWatch) -> dict[str, Any]:
    try:
        report = await disarm()
    except PlaywrightError:
        return dict(_GONE)
    if not isinstance(report, dict):
        return dict(_GONE)
    made = report.get("workers")
    if type(made) is int and 0 < made < 1_000:  # from the page's world: only a sane count
        tab.workers_made += made
    return report


async def by_playwright(
    locator: Locator, spec: ActionSpec, timeout_ms: int, upload_paths: Callable[[tuple[str, ...]], list[str]]
) -> None:
    """An action on a cited element, sent by Playwright (its actionability checks);
    ``upload_paths`` resolves an upload's file names."""
    kind = spec.kind
    button: Any = spec.button or "left"
    if kind is ActionKind.CLICK:
        await locator.click(timeout=timeout_ms, button=button, click_count=spec.click_count or 1)
    elif kind is ActionKind.DOUBLE_CLICK:
        await locator.dblclick(timeout=timeout_ms, button=button)
    elif kind is ActionKind.HOVER:
        await locator.hover(timeout=timeout_ms)
    elif kind is ActionKind.FILL:
        await locator.fill(spec.text, timeout=timeout_ms)
    elif kind is ActionKind.TYPE:
        await locator.press_sequentially(spec.text, delay=spec.key_delay_ms, timeout=timeout_ms)
    elif kind is ActionKind.PRESS:
        await locator.press(spec.key, timeout=timeout_ms)
    elif kind is ActionKind.HOTKEY:
        await locator.press("+".join(spec.keys), timeout=timeout_ms)
    elif kind is ActionKind.SELECT:
        await locator.select_option(list(spec.values), timeout=timeout_ms)
    elif kind is ActionKind.CHECK:
        await locator.check(timeout=timeout_ms)
    elif kind is ActionKind.UNCHECK:
        await locator.uncheck(timeout=timeout_ms)
    elif kind is ActionKind.UPLOAD:
        await locator.set_input_files(upload_paths(spec.files), timeout=timeout_ms)
    else:
        raise InvalidArgumentError("kind", f"{kind.value} is not a browser action")
