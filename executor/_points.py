"""Pixel-coordinate actions on a browser page: a point of an observation, bound to an element.

An agent that looks at screenshots acts at ``(x, y)`` of one, not at a ref. The guarded
loop binds such a point, before anything else is checked, to the element of the cited
observation's element list that was under it — from the boxes measured at that
observation's moment, never from the page as it is now:

- the point is mapped to CSS pixels of the viewport (a point of a screenshot taken at
  ``screenshot_scale`` s is divided by s) and must lie inside the viewport
  (``InvalidArgumentError`` naming ``x``, ``y``, ``to_x`` or ``to_y``);
- the element is the last one, in document order, of the tab's top document whose box
  holds the point: the innermost, and of two that overlap the one painted later (a
  dialog over the page, a toast over a row). A point over no element is ``NotFoundError``
  (``x``), as an unknown ref is, except for a move or a scroll, which need none.

From there the action is a ref action on that element: the checks before dispatch, the
sidecar's decision (its role, name and context, as for a ref), the ledger (the ref and
the point), and, at dispatch, the browser's own check that the element now under the
point is that element, unchanged, and not covered (``TARGET_CHANGED`` when something
else is there; ``STALE_REF`` when the element itself changed), with the input guard armed
on it. Pure: no I/O.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from handrail.executor._errors import InvalidArgumentError, NotFoundError
from handrail.executor._models import ActionKind, ActionSpec, Element, Observation, PointSpace, PointTarget

__all__ = ["CssPoint", "PointBinding", "bind_point", "element_at"]

# A move or a scroll may go where no element is (the page's margin).
_NO_ELEMENT_NEEDED = frozenset({ActionKind.MOVE, ActionKind.HOVER, ActionKind.SCROLL})


@dataclasses.dataclass(frozen=True)
class CssPoint:
    """A point in CSS pixels of the viewport."""

    x: float
    y: float


@dataclasses.dataclass(frozen=True)
class PointBinding:
    """What a point action was bound to in its observation.

    Attributes:
        spec: the action, now citing the bound element's ref ("" when none was under the
            point), with its ``bound_point`` set.
        at: the point, in CSS pixels; ``to`` a drag's end point.
        element: the element under ``at`` in the observation (None: a move or scroll over
            no element); ``to_element`` the one under ``to``.
    """

    spec: ActionSpec
    at: CssPoint
    element: Element | None
    to: CssPoint | None = None
    to_element: Element | None = None


def _css(obs: Observation, space: PointSpace, x: int, y: int, names: tuple[str, str]) -> CssPoint:
    scale = 1.0
    if space is PointSpace.SCREENSHOT:
        if not obs.screenshot_png:
            raise InvalidArgumentError(
                "point_space",
                f"observation {obs.observation_id} has no screenshot: observe with a screenshot, "
                "or give CSS pixels (POINT_SPACE_CSS)",
            )
        scale = obs.screenshot_scale or 1.0
    cx, cy = x / scale, y / scale
    width, height = obs.viewport_width, obs.viewport_height
    for name, value, limit in ((names[0], cx, width), (names[1], cy, height)):
        if not 0 <= value < limit:
            unit = f"screenshot pixels at scale {scale:g}" if space is PointSpace.SCREENSHOT else "CSS pixels"
            raise InvalidArgumentError(
                name,
                f"{value:g} CSS pixels ({x if name in ('x', 'to_x') else y} {unit}) is outside the "
                f"viewport (0 .. {limit - 1})",
            )
    return CssPoint(cx, cy)


def element_at(elements: Sequence[Element], point: CssPoint, document: str = "") -> Element | None:
    """The element of ``elements`` (an observation's list) under ``point``, or None.

    The last in document order, of ``document`` ("": the tab's top document), whose box
    holds the point: the innermost, and of overlapping ones the later painted.
    """
    found = None
    for element in elements:
        box = element.box
        if box is None or element.frame != document or box.width <= 0 or box.height <= 0:
            continue
        if box.x <= point.x < box.x + box.width and box.y <= point.y < box.y + box.height:
            found = element
    return found


def bind_point(obs: Observation, elements: Sequence[Element], spec: ActionSpec) -> PointBinding:
    """Bind a point action of ``spec`` to the element of ``obs`` that was under it.

    Raises:
        InvalidArgumentError: a point outside the viewport (its field named), or a
            screenshot point of an observation that has no screenshot.
        NotFoundError: no element was under the point (field ``x``), for an action that
            needs one.
        InvalidArgumentError: the point is over a child frame (``x`` or ``to_x``).
    """
    at = _css(obs, spec.point_space, spec.x, spec.y, ("x", "y"))
    element = element_at(elements, at)
    to = to_element = None
    if spec.kind is ActionKind.DRAG:
        to = _css(obs, spec.point_space, spec.to_x, spec.to_y, ("to_x", "to_y"))
        to_element = element_at(elements, to)
    if element is None and spec.kind not in _NO_ELEMENT_NEEDED:
        raise NotFoundError(
            "x",
            f"no element of observation {obs.observation_id} is at ({spec.x}, {spec.y}) "
            f"(CSS {at.x:g}, {at.y:g}); a {spec.kind.value} needs one",
        )
    target = PointTarget(at.x, at.y, *((to.x, to.y) if to else (0.0, 0.0)), to_element.ref if to_element else "")
    for name, bound_to in (("x", element), ("to_x", to_element)):
        if bound_to is not None and bound_to.role == "iframe":
            # Input there lands in the frame's document, out of reach of the top document's
            # guard: the frame's elements are acted on by ref.
            raise InvalidArgumentError(name, f"the point is over a child frame ({bound_to.ref}): act there by ref")
    bound = dataclasses.replace(spec, ref=element.ref if element else "", bound_point=target)
    return PointBinding(bound, at, element, to, to_element)
