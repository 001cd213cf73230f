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

import dataclasses
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
from handrail.executor.browser._context import CHECK_ARM_CONTEXT, CHECK_PICKED_CONTEXT
from handrail.executor.browser._pagescript import ARM_INPUT
from handrail.executor.browser._pointer import (
    InputNavigation,
    NavigationWatch,
    NotStartedError,
    PartlyTypedError,
    disarmed,
    on_picked,
    stopped,
)

__all__ = ["ARMED_POINT_KINDS", "at_point", "check_point", "drag_by_refs", "named", "scale_png"]

_MODES = {
    ActionKind.CLICK: "point",
    ActionKind.DOUBLE_CLICK: "point",
    ActionKind.DRAG: "drag",
    ActionKind.TYPE: "point-keys",
}
#: The point actions whose input goes out with the guard armed (``check_point`` may arm it).
ARMED_POINT_KINDS = frozenset(_MODES)
_TWO_FRAMES = "() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(0))))"
_DRAG_STEPS = 8


async def check_point(
    page: Page,
    spec: ActionSpec,
    target: RefInfo | None,
    since: float,
    named: Callable[[RefInfo], str],
    arm: tuple[str, int] | None = None,
) -> tuple[Refusal | None, dict[str, Any]]:
    """The checks before dispatch of a bound point action: (the refusal or None, the facts).

    The element bound to the point (and a drag's drop target, bound to its end) must be the
    topmost thing under its point now (else ``TARGET_CHANGED``), and pass the element check
    (unchanged since the observation, visible, enabled, not behind a modal: else
    ``STALE_REF``). Only top-document elements are ever bound (``_points``).

    ``arm`` (token, how long it holds in ms): when the element passes, the input guard is
    armed on it with the point in the same round trip (``armed`` in the facts is the arm's
    answer), for a kind that ``at_point`` arms; ``at_point`` is then given the token.
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
    mode = _MODES.get(spec.kind) if arm is not None else None
    for info, at, where in checks:
        if mode is not None and arm is not None and info is target:
            token, hold = arm
            count, facts_or_none = await on_picked(page, info.ref, CHECK_ARM_CONTEXT, since, at, token, hold, mode)
        else:
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


def named(info: RefInfo) -> str:
    """``button 'Cancel' (e41, in row 'Plan E €25 / month Active Cancel')``: the element as observed."""
    where = ""
    element = info.element
    if element is not None and element.contexts():
        kind, context = element.contexts()[0]
        where = f", {'under' if kind == 'heading' else 'in'} {context.role} {context.name[:70]!r} when observed"
    return f"{info.role} {info.name!r} ({info.ref}{where})"


async def drag_by_refs(page: Page, tab: NavigationWatch, spec: ActionSpec, since: float, timeout_ms: int) -> None:
    """A drag by ref (``spec.ref`` to ``spec.to_ref``, both checked before the decision),
    sent as a drag between the two elements' centres now.

    Right before the press, as for a drag at a point: the drop target must be the topmost
    thing at its centre and unchanged since the observation, the start element likewise,
    and the guard is armed on the start element with its centre (``at_point``).

    Raises:
        NotStartedError: either element is gone, changed or covered: nothing was sent.
        (and what ``at_point`` raises)
    """
    centres = []
    for ref in (spec.ref, spec.to_ref):
        try:
            box = await page.locator(f"aria-ref={ref}").bounding_box(timeout=1_000)
        except PlaywrightError:
            box = None
        if box is None or box["width"] <= 0 or box["height"] <= 0:
            raise NotStartedError(Reason.STALE_REF, f"ref {ref} no longer resolves to a box on the page")
        centres.append((box["x"] + box["width"] / 2, box["y"] + box["height"] / 2))
    (x, y), (to_x, to_y) = centres
    bound = dataclasses.replace(spec, bound_point=PointTarget(x, y, to_x, to_y, spec.to_ref))
    start = RefInfo(spec.ref, "drag start", "", "")
    refusal, _ = await check_point(page, bound, start, since, named)
    if refusal is not None:
        raise NotStartedError(refusal.reason, f"at dispatch time {refusal.message}")
    await at_point(page, tab, bound, since, timeout_ms)


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


async def at_point(
    page: Page, tab: NavigationWatch, spec: ActionSpec, since: float, timeout_ms: int, armed_token: str = ""
) -> None:
    """Send the point action ``spec`` (bound: ``spec.bound_point``, ``spec.ref``) to the page.

    ``armed_token``: the guard was armed by ``check_point`` (still holding); else it is
    armed here, its check run once more, right before the input.

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
    token = armed_token or await _arm(page, spec, point, since, timeout_ms)
    navigation = InputNavigation(tab)
    try:
        await _send(page, spec, point)
        report = await disarmed(page, tab, token)
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
        await navigation.wait(report["navigating"], timeout_ms, what)
    finally:
        navigation.close()


async def _arm(page: Page, spec: ActionSpec, point: PointTarget, since: float, timeout_ms: int) -> str:
    """Arm the input guard on the bound element with the point; its token."""
    token = secrets.token_hex(8)
    count, armed = await on_picked(
        page, spec.ref, ARM_INPUT, since, token, timeout_ms + 2_000, _MODES[spec.kind], [point.x, point.y]
    )
    if count == 0:
        raise NotStartedError(Reason.STALE_REF, f"ref {spec.ref} no longer resolves")
    if count != 1 or armed is None:
        raise NotStartedError(None, "the input guard could not be armed on the element at the point")
    if armed.get("problem"):
        reason = Reason.TARGET_CHANGED if armed.get("target") else Reason.STALE_REF
        raise NotStartedError(reason, f"at dispatch time {armed['problem']}")
    return token


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
