"""The one module that maps executor wire messages to the core's data and back.

It also validates every request: a bad field raises ``InvalidArgumentError`` naming it.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from handrail.executor._errors import InvalidArgumentError
from handrail.executor._models import (
    ActionKind,
    ActionResult,
    ActionSpec,
    ActResponse,
    Evidence,
    Expectation,
    Observation,
    Outcome,
    SessionInfo,
)
from handrail.executor._snapshot import is_ref
from handrail.proto.executor.v1 import executor_pb2 as pb

MAX_ID = 256
MAX_TEXT = 64 * 1024
MAX_URL = 4096
MAX_KEY = 64
MAX_VALUES = 100
MAX_TIMEOUT_MS = 60_000

_KINDS = {
    pb.ACTION_CLICK: ActionKind.CLICK,
    pb.ACTION_FILL: ActionKind.FILL,
    pb.ACTION_TYPE: ActionKind.TYPE,
    pb.ACTION_PRESS: ActionKind.PRESS,
    pb.ACTION_SELECT: ActionKind.SELECT,
    pb.ACTION_NAVIGATE: ActionKind.NAVIGATE,
}
KIND_TO_PB = {v: k for k, v in _KINDS.items()}


def _bounded(field: str, value: str, limit: int, *, required: bool = True) -> str:
    if required and not value:
        raise InvalidArgumentError(field, "must not be empty")
    if len(value) > limit:
        raise InvalidArgumentError(
            field, f"is {len(value)} characters long, at most {limit} allowed"
        )
    if "\x00" in value:
        raise InvalidArgumentError(field, "must not contain NUL characters")
    return value


def _http_url(field: str, value: str, *, required: bool) -> str:
    _bounded(field, value, MAX_URL, required=required)
    if not value:
        return value
    if value == "about:blank":
        return value
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise InvalidArgumentError(field, f"{value!r} is not an http(s) URL")
    return value


def open_session_args(req: pb.OpenSessionRequest) -> tuple[str, str, str]:
    """Validate an OpenSession request; return (target, start_url, agent)."""
    target = _bounded("target", req.target, MAX_ID)
    if req.backend not in (pb.BACKEND_UNSPECIFIED, pb.BACKEND_BROWSER):
        raise InvalidArgumentError("backend", f"unknown backend {req.backend}")
    start_url = _http_url("start_url", req.start_url, required=False)
    agent = _bounded("agent", req.agent, MAX_ID, required=False)
    return target, start_url, agent


def session_id(value: str) -> str:
    return _bounded("session_id", value, MAX_ID)


def action_spec(req: pb.ActRequest) -> ActionSpec:
    """Validate an Act request and turn it into an ``ActionSpec``."""
    session_id(req.session_id)
    _bounded("observation_id", req.observation_id, MAX_ID)
    kind = _KINDS.get(req.kind)
    if kind is None:
        raise InvalidArgumentError("kind", f"unknown or unspecified action kind {req.kind}")
    _bounded("idempotency_key", req.idempotency_key, MAX_ID)
    if kind.needs_ref:
        _bounded("ref", req.ref, MAX_ID)
        if not is_ref(req.ref):
            raise InvalidArgumentError("ref", f"{req.ref!r} is not a snapshot ref like 'e12'")
    elif req.ref:
        raise InvalidArgumentError("ref", f"a {kind.value} action takes no ref")
    _bounded("text", req.text, MAX_TEXT, required=False)
    if kind is ActionKind.TYPE and not req.text:
        raise InvalidArgumentError("text", "must not be empty for type")
    _bounded("key", req.key, MAX_KEY, required=kind is ActionKind.PRESS)
    if kind is ActionKind.SELECT and not req.values:
        raise InvalidArgumentError("values", "select needs at least one value")
    if len(req.values) > MAX_VALUES:
        raise InvalidArgumentError("values", f"at most {MAX_VALUES} values allowed")
    for i, value in enumerate(req.values):
        _bounded(f"values[{i}]", value, MAX_ID)
    _http_url("url", req.url, required=kind is ActionKind.NAVIGATE)
    if req.url and kind is not ActionKind.NAVIGATE:
        raise InvalidArgumentError("url", f"a {kind.value} action takes no url")
    if not 0 <= req.timeout_ms <= MAX_TIMEOUT_MS:
        raise InvalidArgumentError("timeout_ms", f"must be within 0..{MAX_TIMEOUT_MS}")
    _bounded("expect.text_visible", req.expect.text_visible, MAX_ID * 4, required=False)
    _bounded("expect.url_matches", req.expect.url_matches, MAX_ID * 4, required=False)
    if req.expect.url_matches:
        try:
            re.compile(req.expect.url_matches)
        except re.error as exc:
            raise InvalidArgumentError(
                "expect.url_matches", f"not a regular expression: {exc}"
            ) from exc
    return ActionSpec(
        kind=kind,
        observation_id=req.observation_id,
        idempotency_key=req.idempotency_key,
        ref=req.ref,
        text=req.text,
        key=req.key,
        values=tuple(req.values),
        url=req.url,
        expect=Expectation(req.expect.text_visible, req.expect.url_matches),
        timeout_ms=req.timeout_ms,
    )


def session_pb(info: SessionInfo) -> pb.Session:
    return pb.Session(
        session_id=info.session_id,
        target=info.target,
        agent=info.agent,
        lease_epoch=info.lease_epoch,
    )


def observation_pb(obs: Observation) -> pb.Observation:
    return pb.Observation(
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
    )


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
    )


def act_response_pb(resp: ActResponse) -> pb.ActResponse:
    out = pb.ActResponse(result=result_pb(resp.result))
    if resp.observation is not None:
        out.observation.CopyFrom(observation_pb(resp.observation))
    return out


# -- wire -> data, for the agent SDK ----------------------------------------------------


def observation_from_pb(msg: pb.Observation) -> Observation:
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
    )


def result_from_pb(msg: pb.ActionResult) -> ActionResult:
    reason = pb.Reason.Name(msg.reason) if msg.reason else ""
    return ActionResult(
        action_id=msg.action_id,
        outcome=Outcome(pb.Outcome.Name(msg.outcome)),
        reason="" if reason == "REASON_UNSPECIFIED" else reason,
        message=msg.message,
        execution_started=msg.execution_started,
        evidence=Evidence(pb.Evidence.Name(msg.evidence).removeprefix("EVIDENCE_")),
        idempotency_key=msg.idempotency_key,
        decision_id=msg.decision_id,
    )


def act_response_from_pb(msg: pb.ActResponse) -> ActResponse:
    obs = observation_from_pb(msg.observation) if msg.HasField("observation") else None
    return ActResponse(result_from_pb(msg.result), obs)


def session_from_pb(msg: pb.Session) -> SessionInfo:
    return SessionInfo(msg.session_id, msg.target, msg.agent, msg.lease_epoch)


def act_request_pb(session_id: str, spec: ActionSpec) -> pb.ActRequest:
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
            text_visible=spec.expect.text_visible, url_matches=spec.expect.url_matches
        ),
        timeout_ms=spec.timeout_ms,
    )
