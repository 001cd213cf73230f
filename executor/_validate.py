"""What a request to the executor may hold: every field checked, then decoded.

A bad field raises ``InvalidArgumentError`` naming it (``actions[2].ref: ...`` inside a
batch); a good request becomes the core's data through ``_wire``.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from handrail._patterns import PatternError, compile_regex
from handrail.executor import _wire
from handrail.executor._backend import ObserveOptions
from handrail.executor._errors import InvalidArgumentError
from handrail.executor._models import (
    BROWSER_KINDS,
    BROWSER_POINT_KINDS,
    BROWSER_REF_KINDS,
    DESKTOP_KINDS,
    ActionKind,
    ActionSpec,
    BackendKind,
    DesktopTarget,
    PointSpace,
    Verdict,
    WaitFor,
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

_BUTTONS = ("", "left", "middle", "right")
# The keys a click or drag at a point may hold down (ActRequest.keys).
MODIFIERS = ("Shift", "Control", "Alt", "Meta")


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
            compile_regex(value)  # RE2: linear time, or refused here
        except PatternError as exc:
            raise InvalidArgumentError(field, str(exc)) from None
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
    backend = _wire.BACKENDS.get(req.backend)
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
        _wire.desktop_target_from_pb(d),
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
    kind = _wire.KINDS.get(req.kind)
    if kind is None:
        raise InvalidArgumentError("kind", f"unknown or unspecified action kind {req.kind}")
    _bounded("idempotency_key", req.idempotency_key, MAX_ID)
    if req.ref and not is_ref(_bounded("ref", req.ref, MAX_ID)):
        raise InvalidArgumentError("ref", f"{req.ref!r} is not a snapshot ref like 'e12'")
    if req.to_ref and not is_ref(_bounded("to_ref", req.to_ref, MAX_ID)):
        raise InvalidArgumentError("to_ref", f"{req.to_ref!r} is not a snapshot ref like 'e12'")
    if req.to_ref and (kind is not ActionKind.DRAG or req.point_space):
        raise InvalidArgumentError("to_ref", "only a drag by ref (no point_space) takes a to_ref")
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
    if req.point_space not in _wire.POINT_SPACES:
        raise InvalidArgumentError("point_space", f"unknown point space {req.point_space}")
    if req.point_space and req.ref:
        raise InvalidArgumentError("ref", "an action at a point (point_space) cites no ref")
    for name in ("x", "y", "to_x", "to_y", "delta_x", "delta_y"):
        _int_range(name, getattr(req, name), -MAX_COORD, MAX_COORD)
    if req.button not in _BUTTONS:
        raise InvalidArgumentError("button", f"{req.button!r} is not left, middle or right")
    _int_range("click_count", req.click_count, 0, 3)
    _int_range("key_delay_ms", req.key_delay_ms, 0, 1000)
    _int_range("approval_wait_ms", req.approval_wait_ms, 0, 10 * 60_000)
    _bounded("approval_asked", req.approval_asked, 1024, required=False)
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
    return _wire.action_spec_from_pb(req, kind)


def check_for_backend(backend: str, spec: ActionSpec, field: str = "") -> None:
    """The action's fields against what the session's backend can do."""
    prefix = f"{field}." if field else ""
    if backend == BackendKind.BROWSER and spec.at_point:
        if spec.kind not in BROWSER_POINT_KINDS:
            kinds = ", ".join(sorted(k.value for k in BROWSER_POINT_KINDS))
            raise InvalidArgumentError(
                prefix + "point_space", f"a {spec.kind.value} action takes no point ({kinds} do)"
            )
        for i, key in enumerate(spec.keys):
            if key not in MODIFIERS:
                raise InvalidArgumentError(
                    f"{prefix}keys[{i}]", f"{key!r}: a point action holds only modifiers ({', '.join(MODIFIERS)})"
                )
    elif backend == BackendKind.BROWSER:
        if spec.kind not in BROWSER_KINDS:
            raise InvalidArgumentError(prefix + "kind", f"{spec.kind.value} is not a browser action")
        if spec.kind in BROWSER_REF_KINDS and not spec.ref:
            raise InvalidArgumentError(prefix + "ref", f"a {spec.kind.value} action needs a ref")
        if spec.kind is ActionKind.DRAG and not spec.to_ref:
            raise InvalidArgumentError(prefix + "to_ref", "a drag by ref needs the drop target's ref (to_ref)")
        if spec.ref and spec.kind not in BROWSER_REF_KINDS | {
            ActionKind.PRESS,
            ActionKind.SCROLL,
            ActionKind.HOTKEY,
        }:
            raise InvalidArgumentError(prefix + "ref", f"a {spec.kind.value} action takes no ref")
    else:
        if spec.kind not in DESKTOP_KINDS:
            raise InvalidArgumentError(prefix + "kind", f"{spec.kind.value} is not a desktop action")
        if spec.ref or spec.to_ref:
            name = "ref" if spec.ref else "to_ref"
            raise InvalidArgumentError(prefix + name, "desktop actions use x, y, not refs")
        if spec.point_space is PointSpace.CSS:
            raise InvalidArgumentError(prefix + "point_space", "a desktop point is in screenshot pixels, not CSS")


def reconcile_args(req: pb.ReconcileRequest) -> tuple[str, Verdict, str]:
    session_id(req.session_id)
    action_id = _bounded("action_id", req.action_id, MAX_ID)
    verdict = _wire.VERDICTS.get(req.verdict)
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
