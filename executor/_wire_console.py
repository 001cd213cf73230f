"""The console's wire messages: the operator RPCs and the agent's request for a person.

The one module that maps the console's messages of ``executor.proto`` to the data of
``_live`` and back, for the servicer (``_service_console``), the console's client
(``_console_client``) and the SDK's ``ask_for_person``; request fields are checked here
too (``human_input_from_pb`` ...), each bad field named.
"""

from __future__ import annotations

import math

from handrail.executor._errors import InvalidArgumentError
from handrail.executor._live import (
    HUMAN_KINDS,
    POINTER_KINDS,
    HumanInput,
    PersonRequest,
    PersonStatus,
    ScreenBox,
    ScreenFrame,
    SessionSummary,
    TimelineItem,
)
from handrail.executor._models import ActionKind, ActionResult
from handrail.executor._wire import BACKENDS, KIND_TO_PB, KINDS, Call, result_from_pb, result_pb
from handrail.proto.executor.v1 import executor_pb2 as pb

MAX_ID = 256
MAX_TEXT = 4096
MAX_KEY = 64
MAX_SIDE = 4096
MAX_COORD = 100_000

_STATUS_TO_PB = {
    PersonStatus.WAITING: pb.PERSON_WAITING,
    PersonStatus.WITH_PERSON: pb.PERSON_WITH_PERSON,
    PersonStatus.HANDED_BACK: pb.PERSON_HANDED_BACK,
}
_STATUS_FROM_PB = {v: k for k, v in _STATUS_TO_PB.items()}
_BACKEND_TO_PB = {"browser": pb.BACKEND_BROWSER, "desktop": pb.BACKEND_DESKTOP}


def _text(field: str, value: str, limit: int, *, required: bool = True) -> str:
    if required and not value:
        raise InvalidArgumentError(field, "must not be empty")
    if len(value) > limit:
        raise InvalidArgumentError(field, f"is {len(value)} characters long, at most {limit} allowed")
    if "\x00" in value:
        raise InvalidArgumentError(field, "must not contain NUL characters")
    return value


# -- requests, checked ----------------------------------------------------------------------


def session_id_of(value: str) -> str:
    return _text("session_id", value, MAX_ID)


def screen_args(req: pb.WatchScreenRequest) -> tuple[int, int, int]:
    session_id_of(req.session_id)
    for name in ("max_width", "max_height"):
        if not 0 <= getattr(req, name) <= MAX_SIDE:
            raise InvalidArgumentError(name, f"must be within 0..{MAX_SIDE}")
    if not 0 <= req.quality <= 100:
        raise InvalidArgumentError("quality", "must be within 0..100 (0 means 70)")
    return req.max_width, req.max_height, req.quality


def timeline_args(req: pb.WatchTimelineRequest) -> int:
    session_id_of(req.session_id)
    if req.since_seq < 0:
        raise InvalidArgumentError("since_seq", "must not be negative")
    return req.since_seq


def human_input_from_pb(req: pb.HumanInputRequest) -> HumanInput:
    """Check a HumanInput request and decode it."""
    session_id_of(req.session_id)
    if req.lease_epoch <= 0:
        raise InvalidArgumentError("lease_epoch", "name the epoch of your takeover (a positive number)")
    kind = KINDS.get(req.kind)
    if kind is None or kind not in HUMAN_KINDS:
        names = ", ".join(sorted(k.value for k in HUMAN_KINDS))
        raise InvalidArgumentError("kind", f"a person's input is one of {names}")
    if kind in POINTER_KINDS:
        for name in ("x", "y"):
            value = getattr(req, name)
            if not math.isfinite(value) or not 0 <= value <= MAX_COORD:
                raise InvalidArgumentError(name, f"must be within 0..{MAX_COORD} surface pixels")
    _text("text", req.text, MAX_TEXT, required=kind is ActionKind.TYPE)
    _text("key", req.key, MAX_KEY, required=kind is ActionKind.PRESS)
    if req.button not in ("", "left", "middle", "right"):
        raise InvalidArgumentError("button", f"{req.button!r} is not left, middle or right")
    for name in ("delta_x", "delta_y"):
        if abs(getattr(req, name)) > MAX_COORD:
            raise InvalidArgumentError(name, f"must be within -{MAX_COORD}..{MAX_COORD}")
    _text("input_id", req.input_id, MAX_ID, required=False)
    return HumanInput(
        kind=kind,
        lease_epoch=req.lease_epoch,
        x=req.x,
        y=req.y,
        text=req.text,
        key=req.key,
        delta_x=req.delta_x,
        delta_y=req.delta_y,
        button=req.button,
        input_id=req.input_id,
    )


def locate_args(req: pb.LocateRequest) -> tuple[str, str]:
    session_id_of(req.session_id)
    return _text("role", req.role, MAX_ID), _text("name", req.name, MAX_TEXT)


def describe_args(req: pb.DescribeActionRequest) -> str:
    session_id_of(req.session_id)
    return _text("action_id", req.action_id, MAX_ID)


def ask_args(req: pb.AskForPersonRequest) -> tuple[str, int, str]:
    session_id_of(req.session_id)
    _text("request_id", req.request_id, MAX_ID, required=False)
    _text("reason", req.reason, 1024, required=not req.request_id)
    return req.reason, req.wait_ms, req.request_id


# -- data -> wire ----------------------------------------------------------------------------


def person_pb(request: PersonRequest) -> pb.PersonRequest:
    return pb.PersonRequest(
        request_id=request.request_id,
        session_id=request.session_id,
        target=request.target,
        agent=request.agent,
        reason=request.reason,
        status=_STATUS_TO_PB[request.status],
        asked_at_ms=request.asked_at_ms,
        taken_by=request.taken_by,
        taken_at_epoch=request.taken_at_epoch,
        ended_at_ms=request.ended_at_ms,
        lease_epoch=request.lease_epoch,
    )


def summary_pb(s: SessionSummary) -> pb.SessionSummary:
    msg = pb.SessionSummary(
        session_id=s.session_id,
        target=s.target,
        agent=s.agent,
        backend=_BACKEND_TO_PB.get(s.backend, pb.BACKEND_UNSPECIFIED),
        lease_epoch=s.lease_epoch,
        human_holds=s.human_holds,
        url=s.url,
        title=s.title,
        latest_observation_id=s.latest_observation_id,
        last_action_id=s.last_action_id,
        last_action=s.last_action,
        last_outcome=s.last_outcome,
        last_action_at_ms=s.last_action_at_ms,
        unknown_actions=list(s.unknown_actions),
        live_view=s.live_view,
        snapshot=s.snapshot,
    )
    if s.person_request is not None:
        msg.person_request.CopyFrom(person_pb(s.person_request))
    return msg


def frame_pb(f: ScreenFrame) -> pb.ScreenFrame:
    return pb.ScreenFrame(
        seq=f.seq,
        image=f.image,
        mime_type=f.mime_type,
        image_width=f.image_width,
        image_height=f.image_height,
        surface_width=f.surface_width,
        surface_height=f.surface_height,
        offset_top=f.offset_top,
        page_scale=f.page_scale,
        scroll_x=f.scroll_x,
        scroll_y=f.scroll_y,
        captured_at_ms=f.captured_at_ms,
        url=f.url,
        tab_id=f.tab_id,
    )


def item_pb(t: TimelineItem) -> pb.TimelineEntry:
    return pb.TimelineEntry(
        seq=t.seq,
        at_ms=t.at_ms,
        kind=t.kind,
        action_id=t.action_id,
        principal=t.principal,
        principal_kind=t.principal_kind,
        epoch=t.epoch,
        outcome=t.outcome,
        reason=t.reason,
        line=t.line,
    )


def human_result_pb(result: ActionResult) -> pb.HumanInputResponse:
    return pb.HumanInputResponse(result=result_pb(result))


def human_input_pb(session_id: str, spec: HumanInput) -> pb.HumanInputRequest:
    return pb.HumanInputRequest(
        session_id=session_id,
        lease_epoch=spec.lease_epoch,
        kind=KIND_TO_PB[spec.kind],
        x=spec.x,
        y=spec.y,
        text=spec.text,
        key=spec.key,
        delta_x=spec.delta_x,
        delta_y=spec.delta_y,
        button=spec.button,
        input_id=spec.input_id,
    )


def ask_for_person(session_id: str, reason: str, wait_ms: int, request_id: str) -> Call[PersonRequest]:
    """The SDK's ``AskForPerson`` call (see ``_wire.Call``)."""
    req = pb.AskForPersonRequest(session_id=session_id, reason=reason, wait_ms=wait_ms, request_id=request_id)
    return "AskForPerson", req, lambda msg: person_from_pb(msg.request)


# -- wire -> data ----------------------------------------------------------------------------


def person_from_pb(m: pb.PersonRequest) -> PersonRequest:
    return PersonRequest(
        request_id=m.request_id,
        session_id=m.session_id,
        target=m.target,
        agent=m.agent,
        reason=m.reason,
        asked_at_ms=m.asked_at_ms,
        status=_STATUS_FROM_PB.get(m.status, PersonStatus.WAITING),
        taken_by=m.taken_by,
        taken_at_epoch=m.taken_at_epoch,
        ended_at_ms=m.ended_at_ms,
        lease_epoch=m.lease_epoch,
    )


def summary_from_pb(m: pb.SessionSummary) -> SessionSummary:
    return SessionSummary(
        session_id=m.session_id,
        target=m.target,
        agent=m.agent,
        backend=BACKENDS.get(m.backend, BACKENDS[pb.BACKEND_BROWSER]).value,
        lease_epoch=m.lease_epoch,
        human_holds=m.human_holds,
        url=m.url,
        title=m.title,
        latest_observation_id=m.latest_observation_id,
        last_action_id=m.last_action_id,
        last_action=m.last_action,
        last_outcome=m.last_outcome,
        last_action_at_ms=m.last_action_at_ms,
        unknown_actions=tuple(m.unknown_actions),
        person_request=person_from_pb(m.person_request) if m.HasField("person_request") else None,
        live_view=m.live_view,
        snapshot=m.snapshot,
    )


def frame_from_pb(m: pb.ScreenFrame) -> ScreenFrame:
    return ScreenFrame(
        image=m.image,
        mime_type=m.mime_type,
        image_width=m.image_width,
        image_height=m.image_height,
        surface_width=m.surface_width,
        surface_height=m.surface_height,
        offset_top=m.offset_top,
        page_scale=m.page_scale or 1.0,
        scroll_x=m.scroll_x,
        scroll_y=m.scroll_y,
        captured_at_ms=m.captured_at_ms,
        url=m.url,
        tab_id=m.tab_id,
        seq=m.seq,
    )


def item_from_pb(m: pb.TimelineEntry) -> TimelineItem:
    return TimelineItem(
        m.seq, m.at_ms, m.kind, m.action_id, m.principal, m.principal_kind, m.epoch, m.outcome, m.reason, m.line
    )


def box_pb(box: ScreenBox) -> pb.LocateResponse:
    return pb.LocateResponse(x=box.x, y=box.y, width=box.width, height=box.height)


def box_from_pb(m: pb.LocateResponse) -> ScreenBox:
    return ScreenBox(m.x, m.y, m.width, m.height)


def human_result_from_pb(m: pb.HumanInputResponse) -> ActionResult:
    return result_from_pb(m.result)
