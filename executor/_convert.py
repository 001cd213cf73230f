"""The one module that maps executor wire messages to the core's data and back.

It also validates every request: a bad field raises ``InvalidArgumentError`` naming it.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from handrail.executor._backend import ObserveOptions
from handrail.executor._errors import InvalidArgumentError
from handrail.executor._models import (
    BROWSER_KINDS,
    BROWSER_REF_KINDS,
    DESKTOP_KINDS,
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
    Reason,
    SessionInfo,
    TabInfo,
    Verdict,
    WaitFor,
    WindowInfo,
)
from handrail.executor._snapshot import is_ref
from handrail.proto.executor.v1 import executor_pb2 as pb

MAX_ID = 256
MAX_TEXT = 64 * 1024
MAX_URL = 4096
MAX_KEY = 64
MAX_VALUES = 100
MAX_TIMEOUT_MS = 60_000
MAX_BATCH = 50
MAX_COORD = 100_000

_KINDS = {
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
KIND_TO_PB = {v: k for k, v in _KINDS.items()}
_BACKENDS = {
    pb.BACKEND_UNSPECIFIED: BackendKind.BROWSER,
    pb.BACKEND_BROWSER: BackendKind.BROWSER,
    pb.BACKEND_DESKTOP: BackendKind.DESKTOP,
}
_VERDICTS = {pb.HAPPENED: Verdict.HAPPENED, pb.DID_NOT_HAPPEN: Verdict.DID_NOT_HAPPEN}
_BUTTONS = ("", "left", "middle", "right")


def _bounded(field: str, value: str, limit: int, *, required: bool = True) -> str:
    if required and not value:
        raise InvalidArgumentError(field, "must not be empty")
    if len(value) > limit:
        raise InvalidArgumentError(field, f"is {len(value)} characters long, at most {limit} allowed")
    if "\x00" in value:
        raise InvalidArgumentError(field, "must not contain NUL characters")
    return value


def _http_url(field: str, value: str, *, required: bool) -> str:
    _bounded(field, value, MAX_URL, required=required)
    if not value or value == "about:blank":
        return value
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise InvalidArgumentError(field, f"{value!r} is not an http(s) URL")
    return value


def _regex(field: str, value: str) -> str:
    _bounded(field, value, MAX_ID * 4, required=False)
    if value:
        try:
            re.compile(value)
        except re.error as exc:
            raise InvalidArgumentError(field, f"not a regular expression: {exc}") from exc
    return value


def _int_range(field: str, value: int, low: int, high: int) -> int:
    if not low <= value <= high:
        raise InvalidArgumentError(field, f"must be within {low}..{high}")
    return value


# -- requests -------------------------------------------------------------------------


def open_session_args(
    req: pb.OpenSessionRequest,
) -> tuple[str, str, BackendKind, str, DesktopTarget | None]:
    """Validate an OpenSession request; return (target, agent, backend, start_url, desktop)."""
    target = _bounded("target", req.target, MAX_ID)
    backend = _BACKENDS.get(req.backend)
    if backend is None:
        raise InvalidArgumentError("backend", f"unknown backend {req.backend}")
    agent = _bounded("agent", req.agent, MAX_ID, required=False)
    if backend is BackendKind.BROWSER:
        if req.HasField("desktop"):
            raise InvalidArgumentError("desktop", "a browser session takes no desktop target")
        return target, agent, backend, _http_url("start_url", req.start_url, required=False), None
    if req.start_url:
        raise InvalidArgumentError("start_url", "a desktop session takes no start URL")
    d = req.desktop
    _bounded("desktop.display", d.display, 64, required=False)
    if d.display and not re.fullmatch(r"[\w.-]*:\d+(\.\d+)?", d.display):
        raise InvalidArgumentError("desktop.display", f"{d.display!r} is not an X display like ':99'")
    _int_range("desktop.window_id", d.window_id, 0, 2**32 - 1)
    _int_range("desktop.pid", d.pid, 0, 2**22)
    _bounded("desktop.wm_class", d.wm_class, MAX_ID, required=False)
    _regex("desktop.title_pattern", d.title_pattern)
    if not (d.window_id or d.pid or d.wm_class or d.title_pattern):
        raise InvalidArgumentError("desktop", "name the target window: window_id, pid, wm_class or title_pattern")
    return (
        target,
        agent,
        backend,
        "",
        DesktopTarget(d.display, d.window_id, d.pid, d.wm_class, d.title_pattern),
    )


def session_id(value: str) -> str:
    return _bounded("session_id", value, MAX_ID)


def observe_args(req: pb.ObserveRequest) -> tuple[ObserveOptions, bool]:
    session_id(req.session_id)
    scale = req.screenshot_scale or 1.0
    if not 0.05 <= scale <= 1.0:
        raise InvalidArgumentError("screenshot_scale", "must be within 0.05..1 (0 means 1)")
    _int_range("depth", req.depth, 0, 1000)
    opts = ObserveOptions(req.screenshot, scale, req.viewport_only, req.depth)
    return opts, req.diff


def action_spec(req: pb.ActRequest, field: str = "") -> ActionSpec:
    """Validate an Act request (its generic form) and turn it into an ``ActionSpec``.

    ``field`` prefixes the names of bad fields (``actions[2].ref``) inside a batch.
    """
    try:
        return _action_spec(req)
    except InvalidArgumentError as exc:
        if not field:
            raise
        raise InvalidArgumentError(f"{field}.{exc.field}", str(exc).split(": ", 1)[1]) from exc


def _action_spec(req: pb.ActRequest) -> ActionSpec:
    _bounded("observation_id", req.observation_id, MAX_ID)
    kind = _KINDS.get(req.kind)
    if kind is None:
        raise InvalidArgumentError("kind", f"unknown or unspecified action kind {req.kind}")
    _bounded("idempotency_key", req.idempotency_key, MAX_ID)
    if req.ref and not is_ref(_bounded("ref", req.ref, MAX_ID)):
        raise InvalidArgumentError("ref", f"{req.ref!r} is not a snapshot ref like 'e12'")
    _bounded("text", req.text, MAX_TEXT, required=False)
    _bounded("key", req.key, MAX_KEY, required=kind is ActionKind.PRESS)
    if kind is ActionKind.TYPE and not req.text:
        raise InvalidArgumentError("text", "must not be empty for type")
    if kind is ActionKind.SELECT and not req.values:
        raise InvalidArgumentError("values", "select needs at least one value")
    if len(req.values) > MAX_VALUES:
        raise InvalidArgumentError("values", f"at most {MAX_VALUES} values allowed")
    for i, value in enumerate(req.values):
        _bounded(f"values[{i}]", value, MAX_ID)
    needs_url = kind in (ActionKind.NAVIGATE, ActionKind.TAB_OPEN)
    _http_url("url", req.url, required=needs_url)
    if req.url and not needs_url:
        raise InvalidArgumentError("url", f"a {kind.value} action takes no url")
    _int_range("timeout_ms", req.timeout_ms, 0, MAX_TIMEOUT_MS)
    for name in ("x", "y", "to_x", "to_y", "delta_x", "delta_y"):
        _int_range(name, getattr(req, name), -MAX_COORD, MAX_COORD)
    if req.button not in _BUTTONS:
        raise InvalidArgumentError("button", f"{req.button!r} is not left, middle or right")
    _int_range("click_count", req.click_count, 0, 3)
    _int_range("key_delay_ms", req.key_delay_ms, 0, 1000)
    _int_range("approval_wait_ms", req.approval_wait_ms, 0, 10 * 60_000)
    if kind is ActionKind.UPLOAD and not req.files:
        raise InvalidArgumentError("files", "upload needs at least one file")
    for i, name in enumerate(req.files):
        _bounded(f"files[{i}]", name, MAX_ID)
    _bounded("tab_id", req.tab_id, 32, required=kind in (ActionKind.TAB_SWITCH, ActionKind.TAB_CLOSE))
    if kind is ActionKind.HOTKEY and not req.keys:
        raise InvalidArgumentError("keys", "hotkey needs at least one key")
    if len(req.keys) > 8:
        raise InvalidArgumentError("keys", "at most 8 keys at once")
    for i, key in enumerate(req.keys):
        _bounded(f"keys[{i}]", key, MAX_KEY)
    w = req.wait_for
    for name in ("text", "role", "name", "window_title"):
        _bounded(f"wait_for.{name}", getattr(w, name), MAX_ID * 4, required=False)
    _regex("wait_for.url_matches", w.url_matches)
    wait_for = WaitFor(w.text, w.role, w.name, w.url_matches, w.window_title, w.gone)
    if kind is ActionKind.WAIT_FOR and not wait_for:
        raise InvalidArgumentError("wait_for", "say what to wait for: text, role, url_matches or window_title")
    e = req.expect
    for name in ("text_visible", "role", "name", "field_value"):
        _bounded(f"expect.{name}", getattr(e, name), MAX_ID * 4, required=False)
    _regex("expect.url_matches", e.url_matches)
    if e.field_ref and not is_ref(e.field_ref):
        raise InvalidArgumentError("expect.field_ref", f"{e.field_ref!r} is not a snapshot ref")
    _int_range("expect.within_ms", e.within_ms, 0, MAX_TIMEOUT_MS)
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
        button=req.button,
        click_count=req.click_count,
        delta_x=req.delta_x,
        delta_y=req.delta_y,
        key_delay_ms=req.key_delay_ms,
        files=tuple(req.files),
        tab_id=req.tab_id,
        wait_for=wait_for,
        keys=tuple(req.keys),
        approval_wait_ms=req.approval_wait_ms,
        skip_reobserve=req.skip_reobserve,
    )


def check_for_backend(backend: str, spec: ActionSpec, field: str = "") -> None:
    """The action's fields against what the session's backend can do."""
    prefix = f"{field}." if field else ""
    if backend == BackendKind.BROWSER:
        if spec.kind not in BROWSER_KINDS:
            raise InvalidArgumentError(prefix + "kind", f"{spec.kind.value} is not a browser action")
        if spec.kind in BROWSER_REF_KINDS and not spec.ref:
            raise InvalidArgumentError(prefix + "ref", f"a {spec.kind.value} action needs a ref")
        if spec.ref and spec.kind not in BROWSER_REF_KINDS | {
            ActionKind.PRESS,
            ActionKind.SCROLL,
            ActionKind.HOTKEY,
        }:
            raise InvalidArgumentError(prefix + "ref", f"a {spec.kind.value} action takes no ref")
    else:
        if spec.kind not in DESKTOP_KINDS:
            raise InvalidArgumentError(prefix + "kind", f"{spec.kind.value} is not a desktop action")
        if spec.ref:
            raise InvalidArgumentError(prefix + "ref", "desktop actions use x, y, not refs")


def reconcile_args(req: pb.ReconcileRequest) -> tuple[str, Verdict, str]:
    session_id(req.session_id)
    action_id = _bounded("action_id", req.action_id, MAX_ID)
    verdict = _VERDICTS.get(req.verdict)
    if verdict is None:
        raise InvalidArgumentError("verdict", "must be HAPPENED or DID_NOT_HAPPEN")
    evidence = _bounded("evidence", req.evidence, MAX_TEXT)
    _bounded("observation_id", req.observation_id, MAX_ID, required=False)
    if req.observation_id:
        evidence = f"{evidence} (observation {req.observation_id})"
    return action_id, verdict, evidence


def batch_specs(req: pb.ActBatchRequest) -> list[ActionSpec]:
    session_id(req.session_id)
    if not req.actions:
        raise InvalidArgumentError("actions", "must not be empty")
    if len(req.actions) > MAX_BATCH:
        raise InvalidArgumentError("actions", f"at most {MAX_BATCH} actions in one batch")
    specs = []
    for i, action in enumerate(req.actions):
        if action.session_id and action.session_id != req.session_id:
            raise InvalidArgumentError(f"actions[{i}].session_id", "differs from the batch's session_id")
        specs.append(action_spec(action, f"actions[{i}]"))
    cited = {s.observation_id for s in specs}
    if len(cited) != 1:
        raise InvalidArgumentError("actions", "every action of a batch cites the same observation")
    keys = [s.idempotency_key for s in specs]
    if len(set(keys)) != len(keys):
        raise InvalidArgumentError("actions", "idempotency keys repeat within the batch")
    return specs


# -- data -> wire ---------------------------------------------------------------------


def session_pb(info: SessionInfo) -> pb.Session:
    return pb.Session(
        session_id=info.session_id,
        target=info.target,
        agent=info.agent,
        lease_epoch=info.lease_epoch,
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
        dialogs=[pb.Dialog(type=d.type, message=d.message) for d in obs.dialogs],
        viewport_width=obs.viewport_width,
        viewport_height=obs.viewport_height,
        mutation_counter=obs.mutation_counter,
        is_diff=obs.is_diff,
        diff=obs.diff,
        screenshot_scale=obs.screenshot_scale,
    )
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
    return pb.ActionResult(
        action_id=result.action_id,
        outcome=result.outcome.value,
        reason=result.reason or "REASON_UNSPECIFIED",
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
    )
    if batch.observation is not None:
        out.observation.CopyFrom(observation_pb(batch.observation))
    return out


# -- wire -> data, for the agent SDK ----------------------------------------------------


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
        dialogs=tuple(DialogInfo(d.type, d.message) for d in msg.dialogs),
        viewport_width=msg.viewport_width,
        viewport_height=msg.viewport_height,
        mutation_counter=msg.mutation_counter,
        is_diff=msg.is_diff,
        diff=msg.diff,
        desktop=desktop,
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
    return BatchResult(tuple(result_from_pb(r) for r in msg.results), tuple(msg.not_started), msg.stop_reason, obs)


def session_from_pb(msg: pb.Session) -> SessionInfo:
    return SessionInfo(msg.session_id, msg.target, msg.agent, msg.lease_epoch)


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
    )


def verdict_pb(verdict: Verdict) -> str:
    return verdict.value  # the enum value's name on the wire
