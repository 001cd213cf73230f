"""Recording: one session's ledger entries turned into a scenario that replays.

The recorder offers the session (:func:`handrail.recorder.read_session`): its target and
start URL, every intent with its result, every refusal with its reason, reconciliations
and lease changes, each with its typed body. Refs and observation ids are not copied: the
replay takes them again. The grants come from the authz store next to the ledger when
there is one, else they are inferred from the actions that passed.

What the ledger cannot say is left out with a note at the top of the file: a refusal
that depended on the page changing under the agent (``STALE_REF``, ``STALE_OBSERVATION``,
``TARGET_CHANGED``), and the fault behind an ``UNKNOWN`` outcome.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from handrail._errors import HandrailError
from handrail._vocabulary import ActionKind, Outcome, Reason, Verdict
from handrail.authz import Store
from handrail.recorder import (
    ActionParams,
    IntentBody,
    LeaseChangeBody,
    Ledger,
    LedgerError,
    ReconcileBody,
    RefusalBody,
    ResultBody,
    SessionLog,
    read_session,
)

from ._acts import BROWSER_KINDS
from ._errors import RecordError, ScenarioError
from ._fit import check_fit
from ._loading import parse_scenario

__all__ = ["record_session", "scenario_from_session"]

# Refusals that depend on what changed between the agent's observation and its action:
# the ledger does not say what changed, so a replay could not bring them about.
_CONTEXT_REASONS = frozenset({Reason.STALE_REF, Reason.STALE_OBSERVATION, Reason.TARGET_CHANGED, Reason.FOCUS_MISMATCH})
_REPLAYABLE_KINDS = frozenset(k.value for k in BROWSER_KINDS)
_STARTED = (Outcome.DONE, Outcome.FAILED, Outcome.UNKNOWN)  # the action passed the checks


def record_session(
    ledger_path: Path,
    session_id: str,
    *,
    fixture: str = "subscription",
    name: str = "recorded",
    state_url: str | None = None,
    warn: Callable[[str], None] | None = None,
) -> str:
    """Return the YAML text of a scenario that replays session ``session_id``.

    Args:
        ledger_path: the ledger file (an ``authz.sqlite`` beside it supplies the grants).
        session_id: the session to record.
        fixture: the fixture app the session ran against.
        name: the scenario's name.
        state_url: the fixture's ``/state`` URL; when given, its fields and POST counts
            become the final state checks.
        warn: told each way the session may not fit the fixture (also noted in the file).

    Raises:
        RecordError: no such session, the session does not fit the fixture (it does not
            serve the session's start page), or the result is not a valid scenario.
    """
    try:
        with Ledger(ledger_path, read_only=True) as ledger:
            session = read_session(ledger, session_id)
    except LedgerError as exc:
        raise RecordError(str(exc)) from None
    fit_warnings = check_fit(session, fixture)
    for warning in fit_warnings:
        if warn is not None:
            warn(warning)
    grants = _stored_grants(ledger_path.parent / "authz.sqlite", session)
    state = _fetch_state(state_url) if state_url else None
    data, notes = scenario_from_session(session, fixture=fixture, name=name, grants=grants, state=state)
    header = [
        f"# Recorded by `handrail record` from session {session_id} of {ledger_path}",
        f"# on {datetime.now(UTC):%Y-%m-%d %H:%M} UTC.",
    ]
    header += [f"# NOTE: {n}" for n in [*fit_warnings, *notes]]
    text = "\n".join(header) + "\n" + yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=96)
    try:
        parse_scenario(text, f"{name}.yaml")
    except ScenarioError as exc:
        raise RecordError(f"the recorded scenario does not validate:\n{exc}") from None
    return text


def scenario_from_session(
    session: SessionLog,
    *,
    fixture: str,
    name: str,
    grants: list[dict[str, Any]] | None = None,
    state: Mapping[str, Any] | None = None,
) -> tuple[dict[str, Any], list[str]]:
    """Build the scenario mapping (and notes on what was left out) from one session."""
    target = session.opened.target
    parts = urlsplit(session.opened.start_url)
    base = f"{parts.scheme}://{parts.netloc}" if parts.netloc else ""
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    agent = session.principal or "agent"

    notes: list[str] = []
    steps: list[dict[str, Any]] = []
    acts: dict[str, dict[str, Any]] = {}  # action id -> act spec being built
    keys_used: dict[str, int] = {}
    verbs_ok: set[str] = set()
    done = 0

    def add_act(spec: dict[str, Any], action_id: str) -> None:
        if not steps or "observe" not in steps[-1]:
            steps.append({"observe": None})
        steps.append({"act": spec})
        acts[action_id] = spec

    for e, body in session:
        if isinstance(body, IntentBody):
            spec = _act_spec(body.params, base, notes)
            if spec is None:
                continue
            spec["idempotency_key"] = e.idempotency_key
            keys_used[e.idempotency_key] = keys_used.get(e.idempotency_key, 0) + 1
            add_act(spec, e.action_id)
        elif isinstance(body, ResultBody) and e.action_id in acts:
            spec = acts[e.action_id]
            spec["expect"] = f"{body.outcome} {body.reason}" if body.outcome == Outcome.REFUSED else body.outcome
            if body.outcome in _STARTED:
                verbs_ok.add(ActionKind(spec["kind"]).verb.value)
            if body.outcome == Outcome.DONE:
                done += 1
            if body.outcome == Outcome.UNKNOWN:
                notes.append(
                    f"act {spec.get('idempotency_key')} ended UNKNOWN in the recording: add the "
                    "fault that caused it (drop_connection or kill_executor) for it to replay"
                )
        elif isinstance(body, RefusalBody):
            if body.reason in _CONTEXT_REASONS:
                what = f"{body.kind or None} {body.role} {body.name!r}"
                notes.append(f"left out a {body.reason} refusal of {what}: the ledger does not say what changed")
                continue
            spec = _act_spec(body.params, base, notes)
            if spec is None:
                continue
            if spec["kind"] in (ActionKind.FILL, ActionKind.TYPE) and not spec.get("text"):
                spec["text"] = "(not recorded)"
            spec["expect"] = f"{Outcome.REFUSED} {body.reason}"
            if body.reason == Reason.POLICY_FORBID:
                verbs_ok.add(ActionKind(spec["kind"]).verb.value)
            add_act(spec, e.action_id)
        elif isinstance(body, ReconcileBody):
            if e.idempotency_key in keys_used:
                verdict = body.verdict or Verdict.HAPPENED.value
                steps.append({"reconcile": {"key": e.idempotency_key, "verdict": verdict, "evidence": body.evidence}})
        elif isinstance(body, LeaseChangeBody):
            if body.event == "takeover":
                steps.append({"fault": "takeover"})
            elif body.event in ("hand_back", "handback"):
                to = body.detail.next_holder or ""
                steps.append({"fault": {"kind": "hand_back", "to": to} if to else "hand_back"})

    if not any("act" in s for s in steps):
        raise RecordError("the session has no action that a replay could repeat")
    # Keys matter only where the recording repeated one; elsewhere the replay makes its own.
    reconciled = {s["reconcile"]["key"] for s in steps if "reconcile" in s}
    for s in steps:
        act = s.get("act")
        key = act.get("idempotency_key", "") if act is not None else ""
        if act is not None and keys_used.get(key, 0) < 2 and key not in reconciled:
            act.pop("idempotency_key", None)

    data: dict[str, Any] = {
        "name": name,
        "description": f"Recorded from session {session.session_id} on {target}.",
        "app": fixture,
        "target": target,
        "principals": {"agents": [agent], "operators": ["operator"]},
        "grants": grants or [{"id": "recorded", "verbs": sorted(verbs_ok or {"input"}), "origins": ["app"]}],
        "sessions": [{"name": "main", "agent": agent, "path": path}],
        "steps": steps,
    }
    checks: dict[str, Any] = {"ledger": {"counts": [{"kind": "result", "outcome": "DONE", "equals": done}]}}
    if state is not None:
        checks["state"] = _state_checks(state)
    data["checks"] = checks
    return data, notes


def _act_spec(params: ActionParams, base: str, notes: list[str]) -> dict[str, Any] | None:
    kind = params.kind or ""
    if kind not in _REPLAYABLE_KINDS:
        notes.append(f"left out a {kind or 'nameless'} action: scenarios cannot state it yet")
        return None
    spec: dict[str, Any] = {"kind": kind}
    if kind != ActionKind.NAVIGATE:
        role, name = params.role or "", params.name or ""
        if not role:
            notes.append(f"left out a {kind} action without an element role and name")
            return None
        spec["target"] = {"role": role, "name": name}
    if params.text:
        spec["text"] = params.text
    if params.key:
        spec["keys"] = params.key
    if params.values:
        spec["values"] = list(params.values)
    url = params.url or ""
    if url:
        spec["url"] = url[len(base) :] or "/" if base and url.startswith(base + "/") else url
    return spec


def _stored_grants(authz_db: Path, session: SessionLog) -> list[dict[str, Any]] | None:
    """The session's grants as scenario grant specs, from the authz store beside the ledger."""
    if not authz_db.is_file():
        return None
    start = urlsplit(session.opened.start_url)
    app_origin = f"{start.scheme}://{start.netloc}"
    try:
        with Store(authz_db) as store:
            found = store.list_grants(principal=session.principal, target=session.opened.target, include_inactive=True)
    except HandrailError:
        return None
    specs = []
    for i, g in enumerate(found, 1):
        if g.revoked:
            continue
        spec: dict[str, Any] = {
            "id": f"grant{i}",
            "verbs": list(g.verbs),
            "origins": ["app" if o == app_origin else o for o in g.origins],
        }
        if g.note:
            spec["note"] = g.note
        specs.append(spec)
    return specs or None


def _fetch_state(url: str) -> dict[str, Any]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            data = json.loads(response.read())
    except (OSError, ValueError) as exc:
        raise RecordError(f"cannot read the fixture's state at {url}: {exc}") from None
    if not isinstance(data, dict):
        raise RecordError(f"the fixture's state at {url} is not a JSON object")
    return data


def _state_checks(state: Mapping[str, Any]) -> list[dict[str, Any]]:
    checks: list[dict[str, Any]] = []
    for key, value in state.items():
        if key in ("requests", "actions", "lost"):
            continue
        if isinstance(value, bool | int | str | float) or value is None:
            checks.append({"field": key, "equals": value})
    requests = state.get("requests", {})
    if isinstance(requests, Mapping):
        for path, n in sorted(requests.items()):
            if str(path).startswith("POST "):
                checks.append({"requests": path, "equals": n})
    return checks
