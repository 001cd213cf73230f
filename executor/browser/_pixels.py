"""Input at a point of a screenshot: click, double/right click, move, drag, scroll, type.

The loop has bound the point to the element the cited observation had under it
(``executor._points``) and the checks before dispatch found that element under the point
now, unchanged (``_surface.check_fresh``). Right before the input, the page's input guard
is armed on the element with the point (``_guardscript``): the element check once more —
the element under the point, unchanged since the observation — then, armed, every trusted
press must land on the element and find its identity unchanged, and (typing) every key
must go to it. The first that does not is swallowed before the page sees it, and every
later one: the action ends ``FAILED``, not started, with ``TARGET_CHANGED`` when the press
landed on something else and ``STALE_REF`` when the element changed.

Observation screenshots are taken with ``caret="initial"``: Playwright's caret hiding sets
a style attribute on the focused field, which the checks would see as a change to it.

There is no fall-back to Playwright's click here: the point is the agent's, not the
element's centre, and an input that cannot be guarded does not go out.
"""

from __future__ import annotations

import asyncio
import io
import secrets
from collections.abc import Callable
from typing import Any

from playwright.async_api import Error as PlaywrightError
from playwright.async_api import Page

from handrail._vocabulary import Reason
from handrail.executor._backend import Refusal
from handrail.executor._models import ActionKind, ActionSpec, PointTarget
from handrail.executor._snapshot import RefInfo
from handrail.executor.browser._context import CHECK_PICKED_CONTEXT
from handrail.executor.browser._pagescript import ARM_INPUT, DISARM
from handrail.executor.browser._pointer import (
    MaybeStartedError,
    NavigationWatch,
    NotStartedError,
    PartlyTypedError,
    on_picked,
    stopped,
)

__all__ = ["at_point", "check_point", "scale_png"]

_MODES = {
    ActionKind.CLICK: "point",
    ActionKind.DOUBLE_CLICK: "point",
    ActionKind.DRAG: "drag",
    ActionKind.TYPE: "point-keys",
}
_GONE = {"blocked": "", "changed": "", "navigating": True, "gone": True}
_TWO_FRAMES = "() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(0))))"
_DRAG_STEPS = 8


async def check_point(
    page: Page, spec: ActionSpec, target: RefInfo | None, since: float, named: Callable[[RefInfo], str]
) -> tuple[Refusal | None, dict[str, Any]]:
    """The checks before dispatch of a bound point action: (the refusal or None, the facts).

    The element bound to the point (and a drag's drop target, bound to its end) must be the
    topmost thing under its point now (else ``TARGET_CHANGED``), and pass the element check
    (unchanged since the observation, visible, enabled, not behind a modal: else
    ``STALE_REF``). Only top-document elements are ever bound (``_points``).
    """
    point = spec.bound_point
    assert point is not None
    checks: list[tuple[RefInfo, list[float], str]] = []
    if point.to_ref:
        end = RefInfo(point.to_ref, "drop target", "", "")
        checks.append((end, [point.to_x, point.to_y], f"({spec.to_x}, {spec.to_y})"))
    if target is not None:
        checks.append((target, [point.x, point.y], f"({spec.x}, {spec.y})"))
    facts: dict[str, Any] = {}
    for info, at, where in checks:
        count, facts_or_none = await on_picked(page, info.ref, CHECK_PICKED_CONTEXT, since, at)
        if count != 1 or facts_or_none is None:
            return Refusal(Reason.STALE_REF, f"ref {info.ref} no longer resolves ({info.role} is gone)"), {}
        facts = facts_or_none
        if facts.get("problem") and facts.get("target"):
            return Refusal(
                Reason.TARGET_CHANGED, f"at {where} the observation had {named(info)}; {facts['problem']}"
            ), {}
        if facts.get("problem"):
            return Refusal(Reason.STALE_REF, f"{named(info)}: {facts['problem']}"), {}
    return None, facts


def scale_png(png: bytes, scale: float) -> bytes:
    """A screenshot scaled by ``scale`` (what a point of it is measured in)."""
    from PIL import Image

    with Image.open(io.BytesIO(png)) as img:
        size = (max(1, round(img.width * scale)), max(1, round(img.height * scale)))
        out = io.BytesIO()
        img.resize(size, Image.Resampling.LANCZOS).save(out, format="PNG")
    return out.getvalue()


def _refusal(report: dict[str, Any], what: str) -> NotStartedError:
    # Something else under the point is another target; the element itself changing is a stale ref.
    if report.get("changed"):
        return NotStartedError(Reason.STALE_REF, stopped(report, what))
    return NotStartedError(
        Reason.TARGET_CHANGED,
        f"at input time the press landed on {report['blocked']}, not on the element bound to the point; "
        f"the {what} was swallowed before the page saw it",
    )


async def at_point(page: Page, tab: NavigationWatch, spec: ActionSpec, since: float, timeout_ms: int) -> None:
    """Send the point action ``spec`` (bound: ``spec.bound_point``, ``spec.ref``) to the page.

    Raises:
        NotStartedError: the guard stopped the input before any reached the page.
        PartlyTypedError: typing at the point stopped part-way.
        MaybeStartedError: the input started a navigation that did not end in time.
        PlaywrightError: the page or browser failed under the input.
    """
    point = spec.bound_point
    assert point is not None  # bound by the loop
    kind = spec.kind
    mouse = page.mouse
    if kind in (ActionKind.MOVE, ActionKind.HOVER):
        await mouse.move(point.x, point.y)
        return
    if kind is ActionKind.SCROLL:
        await mouse.move(point.x, point.y)
        await mouse.wheel(spec.delta_x, spec.delta_y)
        await page.evaluate(_TWO_FRAMES)  # the wheel returns before the page has scrolled
        return
    mode = _MODES[kind]
    token = secrets.token_hex(8)
    count, armed = await on_picked(
        page, spec.ref, ARM_INPUT, since, token, timeout_ms + 2_000, mode, [point.x, point.y]
    )
    if count == 0:
        raise NotStartedError(Reason.STALE_REF, f"ref {spec.ref} no longer resolves")
    if count != 1 or armed is None:
        raise NotStartedError(None, "the input guard could not be armed on the element at the point")
    if armed.get("problem"):
        reason = Reason.TARGET_CHANGED if armed.get("target") else Reason.STALE_REF
        raise NotStartedError(reason, f"at dispatch time {armed['problem']}")
    ends = tab.navigation_ends()
    navigations = tab.navigations
    try:
        await _send(page, spec, point)
        try:
            report = await page.evaluate(DISARM, token)
        except PlaywrightError:  # the page went away under the report: a navigation
            report = dict(_GONE)
        what = "typing" if kind is ActionKind.TYPE else kind.value.replace("_", " ")
        typed = int(report.get("chars") or 0)
        if kind is ActionKind.TYPE and report.get("changed") and (typed or report.get("keys")):
            raise PartlyTypedError(
                f"stopped after {typed} characters: at the {report.get('at')}, {report['changed']}; "
                "nothing was typed after it",
                typed,
            )
        if report.get("changed") or report.get("blocked"):
            raise _refusal(report, what)
        if report["navigating"] and tab.navigations == navigations:
            bound = timeout_ms / 1000
            try:
                await asyncio.wait_for(asyncio.shield(ends), bound)
            except TimeoutError:
                raise MaybeStartedError(
                    f"the {what} started a navigation that neither committed nor failed within {bound:g} s"
                ) from None
    finally:
        if not ends.done():
            ends.cancel()


async def _send(page: Page, spec: ActionSpec, point: PointTarget) -> None:
    # ``keys`` of a click or drag at a point: the modifiers held while it goes out.
    held = list(spec.keys) if spec.kind is not ActionKind.TYPE else []
    for key in held:
        await page.keyboard.down(key)
    try:
        await _mouse(page, spec, point)
    finally:
        for key in reversed(held):
            await page.keyboard.up(key)


async def _mouse(page: Page, spec: ActionSpec, point: PointTarget) -> None:
    mouse = page.mouse
    button: Any = spec.button or "left"
    if spec.kind is ActionKind.DOUBLE_CLICK:
        await mouse.dblclick(point.x, point.y, button=button)
    elif spec.kind is ActionKind.CLICK:
        await mouse.click(point.x, point.y, button=button, click_count=spec.click_count or 1)
    elif spec.kind is ActionKind.DRAG:
        await mouse.move(point.x, point.y)
        await mouse.down(button=button)
        await mouse.move(point.to_x, point.to_y, steps=_DRAG_STEPS)
        await mouse.up(button=button)
    elif spec.kind is ActionKind.TYPE:
        await mouse.click(point.x, point.y)
        await page.keyboard.type(spec.text, delay=spec.key_delay_ms)
