"""Binding a point to the element of its observation (``executor._points``), and the
validation of point actions per RPC: pure, no browser."""

from __future__ import annotations

import pytest

from handrail.executor import (
    ActionKind,
    ActionSpec,
    Box,
    Element,
    InvalidArgumentError,
    NotFoundError,
    Observation,
    _validate,
)
from handrail.executor._models import PointSpace
from handrail.executor._points import CssPoint, bind_point, element_at
from handrail.proto.executor.v1 import executor_pb2 as pb


def _el(ref: str, box: Box | None, frame: str = "", role: str = "button") -> Element:
    return Element(ref=ref, role=role, name=ref.upper(), tab_id="t1", frame=frame, box=box)


ROW = _el("e1", Box(0, 100, 600, 40), role="row")
BUTTON = _el("e2", Box(500, 105, 80, 30))
DIALOG = _el("e3", Box(400, 50, 300, 200), role="dialog")  # later in the document: painted over
IN_FRAME = _el("f1e1", Box(0, 0, 1280, 800), frame="e9")
OBS = Observation(
    "s:3", "s", 3, 1, "http://x/", "", "", "", 0,
    screenshot_png=b"png", screenshot_scale=0.5, viewport_width=1280, viewport_height=800,
)  # fmt: skip


def _spec(kind: ActionKind, x: int, y: int, space: PointSpace = PointSpace.SCREENSHOT, **kw: int) -> ActionSpec:
    return ActionSpec(kind, "s:3", "k", x=x, y=y, point_space=space, **kw)  # type: ignore[arg-type]


def test_the_innermost_and_latest_painted_element_holds_the_point() -> None:
    assert element_at([ROW, BUTTON], CssPoint(510, 110)) == BUTTON
    assert element_at([ROW, BUTTON], CssPoint(10, 110)) == ROW
    assert element_at([ROW, BUTTON, DIALOG], CssPoint(510, 110)) == DIALOG
    assert element_at([ROW, BUTTON], CssPoint(510, 140)) is None  # the bottom edge is outside
    assert element_at([IN_FRAME], CssPoint(10, 10)) is None  # a child frame's element: not a top-document point


def test_a_screenshot_point_is_divided_by_its_scale() -> None:
    bound = bind_point(OBS, [ROW, BUTTON], _spec(ActionKind.CLICK, 255, 55))
    assert (bound.element, bound.at) == (BUTTON, CssPoint(510, 110))
    assert bound.spec.ref == "e2" and bound.spec.bound_point is not None
    assert (bound.spec.bound_point.x, bound.spec.bound_point.y) == (510, 110)
    css = bind_point(OBS, [ROW, BUTTON], _spec(ActionKind.CLICK, 510, 110, PointSpace.CSS))
    assert css.element == BUTTON


def test_a_drag_binds_both_ends() -> None:
    bound = bind_point(OBS, [ROW, BUTTON], _spec(ActionKind.DRAG, 5, 55, to_x=255, to_y=55))
    assert (bound.element, bound.to_element) == (ROW, BUTTON)
    assert bound.spec.bound_point is not None and bound.spec.bound_point.to_ref == "e2"


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        (_spec(ActionKind.CLICK, 640, 10), "x"),  # 1280 CSS pixels: one past the edge
        (_spec(ActionKind.CLICK, 10, 400), "y"),
        (_spec(ActionKind.CLICK, -1, 10, PointSpace.CSS), "x"),
        (_spec(ActionKind.DRAG, 5, 55, to_x=5, to_y=900), "to_y"),
    ],
)
def test_a_point_outside_the_viewport_names_its_field(spec: ActionSpec, field: str) -> None:
    with pytest.raises(InvalidArgumentError) as bad:
        bind_point(OBS, [ROW, BUTTON], spec)
    assert bad.value.field == field and "outside the viewport" in str(bad.value)


def test_a_point_over_nothing_needs_nothing_only_to_move_or_scroll() -> None:
    with pytest.raises(NotFoundError) as missing:
        bind_point(OBS, [ROW, BUTTON], _spec(ActionKind.CLICK, 600, 390))
    assert missing.value.field == "x"
    bound = bind_point(OBS, [ROW, BUTTON], _spec(ActionKind.SCROLL, 600, 390))
    assert bound.element is None and bound.spec.ref == ""


def test_a_screenshot_point_needs_a_screenshot() -> None:
    bare = Observation("s:3", "s", 3, 1, "http://x/", "", "", "", 0, viewport_width=1280, viewport_height=800)
    with pytest.raises(InvalidArgumentError) as bad:
        bind_point(bare, [BUTTON], _spec(ActionKind.CLICK, 510, 110))
    assert bad.value.field == "point_space"


def _req(**kw: object) -> pb.ActRequest:
    base: dict[str, object] = {"session_id": "s", "observation_id": "s:3", "idempotency_key": "k"}
    return pb.ActRequest(**(base | kw))


@pytest.mark.parametrize(
    ("request_", "backend", "field"),
    [
        (_req(kind=pb.ACTION_CLICK, ref="e2", point_space=pb.POINT_SPACE_CSS), "browser", "ref"),
        (_req(kind=pb.ACTION_CLICK, point_space=7), "browser", "point_space"),
        (_req(kind=pb.ACTION_FILL, text="a", point_space=pb.POINT_SPACE_SCREENSHOT), "browser", "point_space"),
        (_req(kind=pb.ACTION_CLICK, point_space=pb.POINT_SPACE_CSS), "desktop", "point_space"),
    ],
)
def test_point_fields_are_validated_per_rpc(request_: pb.ActRequest, backend: str, field: str) -> None:
    with pytest.raises(InvalidArgumentError) as bad:
        _validate.check_for_backend(backend, _validate.action_spec(request_))
    assert bad.value.field == field


def test_a_point_action_goes_through_the_wire_and_back() -> None:
    spec = _validate.action_spec(_req(kind=pb.ACTION_MOVE, x=3, y=4, point_space=pb.POINT_SPACE_SCREENSHOT))
    assert (spec.kind, spec.point_space, spec.at_point) == (ActionKind.MOVE, PointSpace.SCREENSHOT, True)
    _validate.check_for_backend("browser", spec)  # a browser move at a point is allowed
    _validate.check_for_backend("desktop", spec)


def test_a_point_over_a_child_frame_is_refused() -> None:
    frame = _el("e9", Box(0, 300, 600, 200), role="iframe")
    with pytest.raises(InvalidArgumentError) as bad:
        bind_point(OBS, [ROW, frame], _spec(ActionKind.CLICK, 10, 200))
    assert bad.value.field == "x" and "child frame" in str(bad.value)
