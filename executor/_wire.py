"""The one module that maps the executor's wire messages to its data and back.

The SDK's requests are built here, each paired with the RPC it goes to and the decoder of
its answer (a ``Call``): the sync and async clients only send them. The servicer's
answers are encoded here too; what a request may hold is checked by ``_validate``, which
decodes through the functions below. A gRPC error an SDK call ends with becomes an
``ExecutorRpcError`` here (``rpc_error``), and nowhere else.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import grpc

from handrail._rpc import error_detail
from handrail.executor._errors import ExecutorRpcError, remote_error_class
from handrail.executor._models import (
    ActionKind,
    ActionResult,
    ActionSpec,
    ActResponse,
    BackendKind,
    BatchResult,
    DesktopState,
    DesktopTarget,
    DialogInfo,
    Evidence,
    Expectation,
    FrameInfo,
    Observation,
    Outcome,
    PointSpace,
    Reason,
    SessionInfo,
    TabInfo,
    Verdict,
    WaitFor,
    WindowInfo,
)
from handrail.executor._wire_elements import LazyElements, elements_blob
from handrail.proto.executor.v1 import executor_pb2 as pb

_T = TypeVar("_T")

#: An SDK call: the RPC's name, its request, and the decoder of its response.
Call = tuple[str, Any, Callable[[Any], _T]]

KINDS = {
    pb.ACTION_CLICK: ActionKind.CLICK,
    pb.ACTION_FILL: ActionKind.FILL,
    pb.ACTION_TYPE: ActionKind.TYPE,
    pb.ACTION_PRESS: ActionKind.PRESS,
    pb.ACTION_SELECT: ActionKind.SELECT,
    pb.ACTION_NAVIGATE: ActionKind.NAVIGATE,
    pb.ACTION_DOUBLE_CLICK: ActionKind.DOUBLE_CLICK,
    pb.ACTION_HOVER: ActionKind.HOVER,
    pb.ACTION_CHECK: ActionKind.CHECK,
    pb.ACTION_UNCHECK: ActionKind.UNCHECK,
    pb.ACTION_SCROLL: ActionKind.SCROLL,
    pb.ACTION_BACK: ActionKind.BACK,
    pb.ACTION_UPLOAD: ActionKind.UPLOAD,
    pb.ACTION_WAIT_FOR: ActionKind.WAIT_FOR,
    pb.ACTION_TAB_OPEN: ActionKind.TAB_OPEN,
    pb.ACTION_TAB_SWITCH: ActionKind.TAB_SWITCH,
    pb.ACTION_TAB_CLOSE: ActionKind.TAB_CLOSE,
    pb.ACTION_DIALOG_ACCEPT: ActionKind.DIALOG_ACCEPT,
    pb.ACTION_DIALOG_DISMISS: ActionKind.DIALOG_DISMISS,
    pb.ACTION_HOTKEY: ActionKind.HOTKEY,
    pb.ACTION_MOVE: ActionKind.MOVE,
    pb.ACTION_DRAG: ActionKind.DRAG,
    pb.ACTION_ACTIVATE: ActionKind.ACTIVATE,
}
KIND_TO_PB = {v: k for k, v in KINDS.items()}
BACKENDS = {
    pb.BACKEND_UNSPECIFIED: BackendKind.BROWSER,
    pb.BACKEND_BROWSER: BackendKind.BROWSER,
    pb.BACKEND_DESKTOP: BackendKind.DESKTOP,
}
POINT_SPACES = {
    pb.POINT_SPACE_UNSPECIFIED: PointSpace.NONE,
    pb.POINT_SPACE_SCREENSHOT: PointSpace.SCREENSHOT,
    pb.POINT_SPACE_CSS: PointSpace.CSS,
}
POINT_SPACE_TO_PB = {v: k for k, v in POINT_SPACES.items()}
VERDICTS = {pb.HAPPENED: Verdict.HAPPENED, pb.DID_NOT_HAPPEN: Verdict.DID_NOT_HAPPEN}
_DIALOG_TYPES: dict[str, pb.DialogType] = {
    "alert": pb.DIALOG_TYPE_ALERT,
    "confirm": pb.DIALOG_TYPE_CONFIRM,
    "prompt": pb.DIALOG_TYPE_PROMPT,
    "beforeunload": pb.DIALOG_TYPE_BEFOREUNLOAD,
}
_DIALOG_NAMES = {v: k for k, v in _DIALOG_TYPES.items()}
_BATCH_STOPS: dict[str, pb.BatchStop] = {
    "": pb.BATCH_STOP_UNSPECIFIED,
    "not_done": pb.BATCH_STOP_NOT_DONE,
    "surface_changed": pb.BATCH_STOP_SURFACE_CHANGED,
}


# -- the SDK's calls ----------------------------------------------------------------------


def open_session(
    target: str, start_url: str, agent: str, desktop: DesktopTarget | None, session_ttl_ms: int = 0
) -> Call[SessionInfo]:
    req = pb.OpenSessionRequest(target=target, start_url=start_url, agent=agent, session_ttl_ms=session_ttl_ms)
    if desktop is None:
        req.backend = pb.BACKEND_BROWSER
    else:
        req.backend = pb.BACKEND_DESKTOP
        req.desktop.CopyFrom(
            pb.DesktopTarget(
                display=desktop.display,
                window_id=desktop.window_id,
                pid=desktop.pid,
                wm_class=desktop.wm_class,
                title_pattern=desktop.title_pattern,
            )
        )
    return "OpenSession", req, session_from_pb


def observe(
    session_id: str, screenshot: bool, scale: float, viewport_only: bool, depth: int, diff: bool
) -> Call[Observation]:
    req = pb.ObserveRequest(
        session_id=session_id,
        screenshot=screenshot,
        screenshot_scale=scale,
        viewport_only=viewport_only,
        depth=depth,
        diff=diff,
    )
    return "Observe", req, observation_from_pb


def act(session_id: str, spec: ActionSpec) -> Call[ActResponse]:
    return "Act", act_request_pb(session_id, spec), act_response_from_pb


def act_batch(session_id: str, specs: Sequence[ActionSpec]) -> Call[BatchResult]:
    req = pb.ActBatchRequest(session_id=session_id, actions=[act_request_pb(session_id, s) for s in specs])
    return "ActBatch", req, batch_from_pb


def reconcile(session_id: str, action_id: str, verdict: Verdict | str, evidence: str) -> Call[ActionResult]:
    req = pb.ReconcileRequest(
        session_id=session_id, action_id=action_id, verdict=Verdict(verdict).value, evidence=evidence
    )
    return "Reconcile", req, lambda msg: result_from_pb(msg.result)


def close_session(session_id: str) -> Call[None]:
    return "CloseSession", pb.CloseSessionRequest(session_id=session_id), lambda _: None


class _GrpcCompat(grpc.RpcError):
    """Also the ``grpc.RpcError`` (with ``code()``) the SDK let through before, for one release."""

    _status: grpc.StatusCode

    def code(self) -> grpc.StatusCode:
        return self._status


_COMPAT: dict[type[ExecutorRpcError], type[ExecutorRpcError]] = {}


def rpc_error(exc: grpc.RpcError) -> ExecutorRpcError:
    """The executor's error for a gRPC error an SDK call ended with: the class of its code
    and ErrorInfo reason (``_errors.remote_error_class``), with its field and reason."""
    detail = error_detail(exc)
    cls = remote_error_class(detail.code.name, detail.reason)
    compat = _COMPAT.get(cls)
    if compat is None:
        compat = _COMPAT[cls] = type(cls.__name__, (cls, _GrpcCompat), {"__doc__": cls.__doc__})
    error = compat(detail.code.name, detail.message, reason=detail.reason, metadata=dict(detail.metadata))
    error._status = detail.code  # type: ignore[attr-defined]
    return error


# -- wire -> data -----------------------------------------------------------------------


def desktop_target_from_pb(d: pb.DesktopTarget) -> DesktopTarget:
    return DesktopTarget(d.display, d.window_id, d.pid, d.wm_class, d.title_pattern)


def action_spec_from_pb(req: pb.ActRequest, kind: ActionKind) -> ActionSpec:
    """The action of a request ``_validate`` has checked (``kind`` decoded by it)."""
    e, w = req.expect, req.wait_for
    return ActionSpec(
        kind=kind,
        observation_id=req.observation_id,
        idempotency_key=req.idempotency_key,
        ref=req.ref,
        text=req.text,
        key=req.key,
        values=tuple(req.values),
        url=req.url,
        expect=Expectation(
            e.text_visible,
            e.url_matches,
            e.role,
            e.name,
            e.gone,
            e.field_ref,
            e.field_value,
            e.within_ms,
        ),
        timeout_ms=req.timeout_ms,
        x=req.x,
        y=req.y,
        to_x=req.to_x,
        to_y=req.to_y,
        to_ref=req.to_ref,
        button=req.button,
        click_count=req.click_count,
        delta_x=req.delta_x,
        delta_y=req.delta_y,
        key_delay_ms=req.key_delay_ms,
        files=tuple(req.files),
        tab_id=req.tab_id,
        wait_for=WaitFor(w.text, w.role, w.name, w.url_matches, w.window_title, w.gone),
        keys=tuple(req.keys),
        approval_wait_ms=req.approval_wait_ms,
        skip_reobserve=req.skip_reobserve,
        point_space=POINT_SPACES.get(req.point_space, PointSpace.NONE),
        approval_asked=req.approval_asked,
    )


def _window(w: pb.Window) -> WindowInfo:
    return WindowInfo(w.window_id, w.pid, w.wm_class, w.title, w.x, w.y, w.width, w.height)


def observation_from_pb(msg: pb.Observation) -> Observation:
    desktop = None
    if msg.HasField("desktop"):
        d = msg.desktop
        desktop = DesktopState(
            screen_width=d.screen_width,
            screen_height=d.screen_height,
            target=_window(d.target),
            active=_window(d.active) if d.HasField("active") else None,
            stacking=tuple(_window(w) for w in d.stacking),
            screenshot_of_target=d.screenshot_of_target,
            screenshot_x=d.screenshot_x,
            screenshot_y=d.screenshot_y,
        )
    return Observation(
        observation_id=msg.observation_id,
        session_id=msg.session_id,
        generation=msg.generation,
        lease_epoch=msg.lease_epoch,
        url=msg.url,
        title=msg.title,
        snapshot=msg.snapshot,
        digest=msg.digest,
        taken_at_ms=msg.taken_at_ms,
        screenshot_png=msg.screenshot_png,
        screenshot_scale=msg.screenshot_scale or 1.0,
        tabs=tuple(TabInfo(t.tab_id, t.url, t.title, t.active) for t in msg.tabs),
        active_tab=msg.active_tab,
        frames=tuple(FrameInfo(f.frame_id, f.name, f.url) for f in msg.frames),
        dialogs=tuple(DialogInfo(_DIALOG_NAMES.get(d.dialog_type, d.type), d.message) for d in msg.dialogs),
        viewport_width=msg.viewport_width,
        viewport_height=msg.viewport_height,
        mutation_counter=msg.mutation_counter,
        is_diff=msg.is_diff,
        diff=msg.diff,
        desktop=desktop,
        elements=LazyElements(msg.elements) if msg.elements else (),
        elements_gone=tuple(msg.elements_gone),
    )


def result_from_pb(msg: pb.ActionResult) -> ActionResult:
    reason = pb.Reason.Name(msg.reason)
    return ActionResult(
        action_id=msg.action_id,
        outcome=Outcome(pb.Outcome.Name(msg.outcome)),
        reason="" if reason == "REASON_UNSPECIFIED" else Reason(reason),
        message=msg.message,
        execution_started=msg.execution_started,
        evidence=Evidence(pb.Evidence.Name(msg.evidence).removeprefix("EVIDENCE_")),
        idempotency_key=msg.idempotency_key,
        decision_id=msg.decision_id,
        typed_chars=msg.typed_chars,
        approval_id=msg.approval_id,
        policies=tuple(msg.policies),
    )


def act_response_from_pb(msg: pb.ActResponse) -> ActResponse:
    obs = observation_from_pb(msg.observation) if msg.HasField("observation") else None
    return ActResponse(result_from_pb(msg.result), obs)


def batch_from_pb(msg: pb.ActBatchResponse) -> BatchResult:
    obs = observation_from_pb(msg.observation) if msg.HasField("observation") else None
    stop = {v: k for k, v in _BATCH_STOPS.items()}.get(msg.stop, "")
    return BatchResult(
        tuple(result_from_pb(r) for r in msg.results), tuple(msg.not_started), msg.stop_reason, obs, stop
    )


def session_from_pb(msg: pb.Session) -> SessionInfo:
    reason = pb.Reason.Name(msg.lease_reason) if msg.lease_reason in pb.Reason.values() else ""
    return SessionInfo(
        msg.session_id,
        msg.target,
        msg.agent,
        msg.lease_epoch,
        "" if reason == "REASON_UNSPECIFIED" else reason,
        msg.session_ttl_ms,
    )


# -- data -> wire -----------------------------------------------------------------------


def act_request_pb(session_id: str, spec: ActionSpec) -> pb.ActRequest:
    e, w = spec.expect, spec.wait_for
    return pb.ActRequest(
        session_id=session_id,
        observation_id=spec.observation_id,
        kind=KIND_TO_PB[spec.kind],
        ref=spec.ref,
        text=spec.text,
        key=spec.key,
        values=list(spec.values),
        url=spec.url,
        idempotency_key=spec.idempotency_key,
        expect=pb.Expectation(
            text_visible=e.text_visible,
            url_matches=e.url_matches,
            role=e.role,
            name=e.name,
            gone=e.gone,
            field_ref=e.field_ref,
            field_value=e.field_value,
            within_ms=e.within_ms,
        ),
        timeout_ms=spec.timeout_ms,
        x=spec.x,
        y=spec.y,
        to_x=spec.to_x,
        to_y=spec.to_y,
        to_ref=spec.to_ref,
        button=spec.button,
        click_count=spec.click_count,
        delta_x=spec.delta_x,
        delta_y=spec.delta_y,
        key_delay_ms=spec.key_delay_ms,
        files=list(spec.files),
        tab_id=spec.tab_id,
        wait_for=pb.WaitFor(
            text=w.text,
            role=w.role,
            name=w.name,
            url_matches=w.url_matches,
            window_title=w.window_title,
            gone=w.gone,
        ),
        keys=list(spec.keys),
        approval_wait_ms=spec.approval_wait_ms,
        skip_reobserve=spec.skip_reobserve,
        point_space=POINT_SPACE_TO_PB[spec.point_space],
        approval_asked=spec.approval_asked,
    )


def session_pb(info: SessionInfo) -> pb.Session:
    return pb.Session(
        session_id=info.session_id,
        target=info.target,
        agent=info.agent,
        lease_epoch=info.lease_epoch,
        lease_reason=info.lease_reason or "REASON_UNSPECIFIED",
        session_ttl_ms=info.session_ttl_ms,
    )


def _window_pb(w: WindowInfo) -> pb.Window:
    return pb.Window(
        window_id=w.window_id,
        pid=w.pid,
        wm_class=w.wm_class,
        title=w.title,
        x=w.x,
        y=w.y,
        width=w.width,
        height=w.height,
    )


def observation_pb(obs: Observation) -> pb.Observation:
    msg = pb.Observation(
        observation_id=obs.observation_id,
        session_id=obs.session_id,
        generation=obs.generation,
        lease_epoch=obs.lease_epoch,
        url=obs.url,
        title=obs.title,
        snapshot=obs.snapshot,
        screenshot_png=obs.screenshot_png,
        digest=obs.digest,
        taken_at_ms=obs.taken_at_ms,
        tabs=[pb.Tab(tab_id=t.tab_id, url=t.url, title=t.title, active=t.active) for t in obs.tabs],
        active_tab=obs.active_tab,
        frames=[pb.Frame(frame_id=f.frame_id, name=f.name, url=f.url) for f in obs.frames],
        dialogs=[
            pb.Dialog(type=d.type, message=d.message, dialog_type=_DIALOG_TYPES.get(d.type, pb.DIALOG_TYPE_UNSPECIFIED))
            for d in obs.dialogs
        ],
        viewport_width=obs.viewport_width,
        viewport_height=obs.viewport_height,
        mutation_counter=obs.mutation_counter,
        is_diff=obs.is_diff,
        diff=obs.diff,
        screenshot_scale=obs.screenshot_scale,
        elements_gone=list(obs.elements_gone),
    )
    if obs.elements:
        msg.MergeFromString(elements_blob(obs.elements))
    d = obs.desktop
    if d is not None:
        msg.desktop.CopyFrom(
            pb.DesktopState(
                screen_width=d.screen_width,
                screen_height=d.screen_height,
                target=_window_pb(d.target),
                active=_window_pb(d.active) if d.active else None,
                stacking=[_window_pb(w) for w in d.stacking],
                screenshot_of_target=d.screenshot_of_target,
                screenshot_x=d.screenshot_x,
                screenshot_y=d.screenshot_y,
            )
        )
    return msg


def result_pb(result: ActionResult) -> pb.ActionResult:
    # A result that is not a refusal carries no reason: ALLOW is never sent on a result.
    reason = result.reason if result.reason and result.reason != Reason.ALLOW else "REASON_UNSPECIFIED"
    return pb.ActionResult(
        action_id=result.action_id,
        outcome=result.outcome.value,
        reason=reason,
        message=result.message,
        execution_started=result.execution_started,
        evidence="EVIDENCE_" + result.evidence.value,
        decision_id=result.decision_id,
        idempotency_key=result.idempotency_key,
        typed_chars=result.typed_chars,
        approval_id=result.approval_id,
        policies=list(result.policies),
    )


def act_response_pb(resp: ActResponse) -> pb.ActResponse:
    out = pb.ActResponse(result=result_pb(resp.result))
    if resp.observation is not None:
        out.observation.CopyFrom(observation_pb(resp.observation))
    return out


def batch_response_pb(batch: BatchResult) -> pb.ActBatchResponse:
    out = pb.ActBatchResponse(
        results=[result_pb(r) for r in batch.results],
        not_started=list(batch.not_started),
        stop_reason=batch.stop_reason,
        stop=_BATCH_STOPS[batch.stop],
    )
    if batch.observation is not None:
        out.observation.CopyFrom(observation_pb(batch.observation))
    return out


def reconcile_response_pb(result: ActionResult) -> pb.ReconcileResponse:
    return pb.ReconcileResponse(result=result_pb(result))


def close_session_response_pb() -> pb.CloseSessionResponse:
    return pb.CloseSessionResponse()
