"""What ``handrail mcp`` says back: page state as text, and refusals with the next step.

Tool results follow Playwright MCP's layout (a short result line, then the page URL,
title, tabs, an open dialog and the snapshot in a fenced block) so that an agent used to
it reads ours the same way; each refusal is a tool error whose text says the reason and
the one thing to do next.
"""

from __future__ import annotations

from handrail._vocabulary import Outcome, Reason
from handrail.executor import ActionResult, Observation

__all__ = ["NEXT_STEP", "next_step", "page_state", "refusal_text"]

_OBSERVE = "take a new snapshot (browser_snapshot) and act on the refs it shows"
_OPERATOR = "ask an operator"

#: The one thing to do after a refusal, by reason.
NEXT_STEP: dict[str, str] = {
    Reason.STALE_OBSERVATION: _OBSERVE,
    Reason.STALE_REF: _OBSERVE,
    Reason.TARGET_CHANGED: _OBSERVE,
    Reason.FOCUS_MISMATCH: _OBSERVE,
    Reason.IDEMPOTENCY_CONFLICT: _OBSERVE,
    Reason.RECONCILE_REQUIRED: (
        "reconcile first: look at the page (browser_snapshot), then call handrail_reconcile with the "
        "pending action's id and HAPPENED or DID_NOT_HAPPEN"
    ),
    Reason.HELD_BY_HUMAN: f"wait: a person holds the controls; {_OPERATOR} to hand them back (handrail_lease_status)",
    Reason.NO_LEASE: f"{_OPERATOR} for the target's control lease (handrail_lease_status says why none is held)",
    Reason.STALE_EPOCH: _OBSERVE + " (the control lease changed hands)",
    Reason.OUT_OF_SCOPE: f"{_OPERATOR} for a grant that covers it; do not retry as is",
    Reason.GRANT_EXPIRED: f"{_OPERATOR} for a new grant",
    Reason.GRANT_REVOKED: f"{_OPERATOR}: the grant was revoked",
    Reason.GRANT_EXHAUSTED: f"{_OPERATOR} for a new grant: the single-use grant was used",
    Reason.POLICY_FORBID: f"do not retry: a standing policy forbids it; {_OPERATOR} if it must be done",
    Reason.APPROVAL_REQUIRED: (
        "wait for an operator to approve it (handrail approve APPROVAL_ID), then call this tool again "
        "with the same arguments"
    ),
    Reason.APPROVAL_DENIED: f"do not retry: an operator denied it; {_OPERATOR} why",
    Reason.APPROVAL_EXPIRED: _OBSERVE + ", then ask again: no operator decided in time",
    Reason.AUTHZ_UNAVAILABLE: (
        "call this tool again in a few seconds with the same arguments, without a new snapshot in between: "
        "the authorization service did not answer, and the same call is sent as the same action"
    ),
    Reason.UNAUTHENTICATED: f"{_OPERATOR} for a valid agent token",
}


def next_step(result: ActionResult) -> str:
    """The one thing the agent should do after ``result`` (not DONE)."""
    if result.outcome is Outcome.UNKNOWN:
        return (
            f"reconcile: look at the page (browser_snapshot), then call handrail_reconcile with "
            f"action_id {result.action_id} and HAPPENED or DID_NOT_HAPPEN; no other write goes until then"
        )
    return NEXT_STEP.get(result.reason, _OBSERVE)


def refusal_text(result: ActionResult) -> str:
    """A tool error's text: what happened, why, and the next step (the SDK puts the tool's
    name in front: "Error executing tool browser_click: ...")."""
    reason = f" {result.reason}" if result.reason else ""
    started = "it may have started" if result.execution_started else "nothing was dispatched"
    lines = [
        f"{result.outcome.value}{reason} ({started}): {result.message or 'no detail'}",
        f"Next: {next_step(result)}.",
        f"- action_id: {result.action_id}",
    ]
    if result.approval_id:
        lines.append(f"- approval_id: {result.approval_id}")
    if result.policies:
        lines.append(f"- policies: {', '.join(result.policies)}")
    return "\n".join(lines)


def page_state(obs: Observation, snapshot: str, *, diff: bool = False) -> str:
    """The page part of a result: URL, title, tabs, dialogs, and the snapshot (or diff)."""
    lines = [
        "### Page state",
        f"- Page URL: {obs.url}",
        f"- Page Title: {obs.title}",
        f"- Observation: {obs.observation_id} (lease epoch {obs.lease_epoch})",
    ]
    if len(obs.tabs) > 1:
        lines.append("### Open tabs")
        for tab in obs.tabs:
            current = " [current]" if tab.active else ""
            lines.append(f"- {tab.tab_id}:{current} {tab.title or '(no title)'} ({tab.url})")
    for dialog in obs.dialogs:
        lines += [
            "### Modal state",
            f'- ["{dialog.type}" dialog with message "{dialog.message}"]: handle it with browser_handle_dialog',
        ]
    if diff:
        body = snapshot or "(no change since the previous snapshot)"
        lines += ["### Page snapshot (diff against the previous snapshot)", "```diff", body, "```"]
    else:
        lines += ["### Page snapshot", "```yaml", snapshot, "```"]
    return "\n".join(lines)
