"""Judging a run: checks of the fixture's real state, and of the ledger it left.

Each check returns what did not hold, in a sentence, or nothing; the run collects them.
The ledger is read through its typed entry bodies.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from handrail._vocabulary import Outcome
from handrail.recorder import Entry, ReconcileBody, RefusalBody, ResultBody, VerifyReport

from ._checks import LedgerChecks, StateCheck

__all__ = ["check_state", "ledger_problems", "unresolved_actions"]

_MISSING = object()


def check_state(state: dict[str, Any], check: StateCheck) -> str | None:
    """Check one state check against a fixture's ``state()``; None when it holds."""
    if check.field is not None:
        value: Any = state
        for part in check.field.split("."):
            if isinstance(value, dict) and part in value:
                value = value[part]
            elif isinstance(value, list) and part.lstrip("-").isdigit() and -len(value) <= int(part) < len(value):
                value = value[int(part)]
            else:
                value = _MISSING
                break
        if value is _MISSING:
            return f"the state has no {check.field!r}"
    elif check.requests is not None:
        value = state.get("requests", {}).get(check.requests, 0)
    else:
        value = state.get("lost", {}).get(check.lost or "", 0)
    if "equals" in check.model_fields_set and value != check.equals:
        return f"found {value!r}"
    if check.at_least is not None and not (isinstance(value, int) and value >= check.at_least):
        return f"found {value!r}"
    if check.at_most is not None and not (isinstance(value, int) and value <= check.at_most):
        return f"found {value!r}"
    return None


def ledger_problems(checks: LedgerChecks, entries: Sequence[Entry], verified: VerifyReport | None) -> list[str]:
    """What the ledger a run left does not satisfy of ``checks``, one sentence each.

    Args:
        checks: the scenario's ledger checks.
        entries: every entry of the run's ledger.
        verified: the ledger's verification, when ``checks.verifies`` asks for it.
    """
    problems: list[str] = []
    if verified is not None and not verified.ok:
        problems.append(f"ledger check verifies: {verified.message}")
    if checks.unique_done_per_key:
        done: dict[tuple[str, str], int] = {}
        for e in entries:
            body = e.content
            if isinstance(body, ResultBody) and body.outcome == Outcome.DONE:
                k = (e.session_id, e.idempotency_key)
                done[k] = done.get(k, 0) + 1
        twice = [key for (_, key), n in done.items() if n > 1]
        if twice:
            problems.append(f"ledger check unique_done_per_key: keys with two DONE results: {twice}")
    if checks.unresolved is not None:
        n = len(unresolved_actions(entries))
        if n != checks.unresolved:
            problems.append(f"ledger check unresolved == {checks.unresolved}: {n} UNKNOWN action(s) not reconciled")
    for count in checks.counts:
        n = sum(
            1
            for e in entries
            if _matches(e, count.kind, count.outcome, count.reason, count.idempotency_key)
            and count.principal_kind in (None, e.principal_kind)
        )
        ok = n == count.equals if count.equals is not None else n >= (count.at_least or 0)
        if not ok:
            problems.append(f"ledger check {count.describe()}: found {n}")
    return problems


def unresolved_actions(entries: Sequence[Entry]) -> list[str]:
    """Action ids whose latest word is UNKNOWN, with no reconcile entry after it."""
    unknown: set[str] = set()
    for e in entries:
        if not e.action_id:
            continue
        body = e.content
        if isinstance(body, ResultBody) and body.outcome == Outcome.UNKNOWN:
            unknown.add(e.action_id)
        elif isinstance(body, ResultBody | ReconcileBody):
            unknown.discard(e.action_id)
    return sorted(unknown)


def _matches(e: Entry, kind: str, outcome: str | None, reason: str | None, key: str | None) -> bool:
    if e.kind != kind:
        return False
    if key is not None and e.idempotency_key != key:
        return False
    body = e.content
    if isinstance(body, ResultBody | ReconcileBody):
        got_outcome, got_reason = body.outcome, body.reason if isinstance(body, ResultBody) else ""
    elif isinstance(body, RefusalBody):
        got_outcome, got_reason = Outcome.REFUSED.value, body.reason
    else:
        got_outcome, got_reason = "", ""
    if outcome is not None and got_outcome != outcome:
        return False
    return reason is None or got_reason == reason
