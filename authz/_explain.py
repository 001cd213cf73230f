"""Presenting the decision log: redaction of secrets, and ``explain`` in plain words.

What goes into the log is redacted first: the executor never sends typed text, but a URL may
carry a token in its query (``?access_token=...``) and any field named like a password, token
or secret is replaced by ``[REDACTED]``.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import uuid
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from handrail._vocabulary import Reason
from handrail.authz._core import url_origin
from handrail.authz._decide import Verdict, grant_mismatch, url_path
from handrail.authz._errors import InvalidArgumentError
from handrail.authz._models import (
    ApprovalInfo,
    ApprovalStatus,
    CheckInput,
    Decision,
    DecisionRecord,
    GrantInfo,
    GrantState,
)
from handrail.authz._policies import PolicyEngine

REDACTED = "[REDACTED]"

#: Names of fields and URL parameters whose values never reach the log.
SECRET_NAME = re.compile(
    r"pass(word|wd|phrase)?|pwd|token|secret|api[-_]?key|auth|session|cookie|credential|otp",
    re.IGNORECASE,
)


@functools.lru_cache(maxsize=1024)  # a pure function of the text; every check logs its URL
def redact_url(url: str) -> str:
    """``url`` with the values of secret-looking query and fragment parameters redacted,
    and any ``user:password@`` removed."""
    if not url or ("?" not in url and "#" not in url and "@" not in url):
        return url
    if "@" not in url and SECRET_NAME.search(url.partition("?")[2] or url.partition("#")[2]) is None:
        return url  # no secret-looking parameter name anywhere after the path
    try:
        parts = urlsplit(url)
    except ValueError:
        return url

    def clean(query: str) -> str:
        if "=" not in query:
            return query
        pairs = parse_qsl(query, keep_blank_values=True)
        if not any(SECRET_NAME.search(k) for k, _ in pairs):
            return query
        return urlencode([(k, REDACTED if SECRET_NAME.search(k) else v) for k, v in pairs])

    netloc = parts.netloc.rsplit("@", 1)[-1]
    query, fragment = clean(parts.query), clean(parts.fragment)
    if (netloc, query, fragment) == (parts.netloc, parts.query, parts.fragment):
        return url
    return urlunsplit((parts.scheme, netloc, parts.path, clean(parts.query), clean(parts.fragment)))


def redact_fields(fields: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``fields`` with the string values of secret-named keys redacted."""
    return {k: REDACTED if isinstance(v, str) and v and SECRET_NAME.search(k) else v for k, v in fields.items()}


def redact_check(request: CheckInput) -> CheckInput:
    """The check as it may be logged."""
    url = redact_url(request.url)
    return request if url == request.url else dataclasses.replace(request, url=url)


# --- times ------------------------------------------------------------------------------------

_DURATION = re.compile(r"^(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)$")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_since(text: str, now_ms: int) -> int:
    """``10m``, ``2h``, ``1d`` (ago) or an ISO 8601 time → unix ms.

    Raises:
        InvalidArgumentError: neither a duration nor an ISO time.
    """
    text = text.strip()
    match = _DURATION.match(text)
    if match:
        try:
            return now_ms - int(float(match.group(1)) * _UNIT_MS[match.group(2)])
        except OverflowError:  # more days than a float holds
            raise InvalidArgumentError("since", f"{text!r} is longer than any log") from None
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidArgumentError("since", f"{text!r} is neither a duration (10m, 2h, 1d) nor an ISO time") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return int(when.timestamp() * 1000)


def when(ms: int) -> str:
    """Unix ms as ``YYYY-MM-DD HH:MM:SS.mmmZ`` (``never`` for 0)."""
    if not ms:
        return "never"
    stamp = datetime.fromtimestamp(ms / 1000, tz=UTC)
    return stamp.strftime("%Y-%m-%d %H:%M:%S.") + f"{ms % 1000:03d}Z"


# --- explain ----------------------------------------------------------------------------------


def one_line(record: DecisionRecord) -> str:
    """One decision on one line, for ``handrail authz decisions``."""
    r, d = record.request, record.decision
    what = r.element_name or r.window_title or r.url
    result = "ALLOW" if d.allow else f"DENY {d.reason}"
    extra = f"  policies={','.join(d.policies)}" if d.policies else ""
    if d.approval_id:
        extra += f"  approval={d.approval_id}"
    if d.shadow_policies:
        extra += f"  shadow-would-deny={','.join(d.shadow_policies)}"
    return (
        f"{d.decision_id}  {when(record.at_ms)}  {result:24}  {r.principal} {r.verb} "
        f"{r.target} epoch {r.lease_epoch}  {what!r}  by {record.caller or '(unknown token)'}"
        f"{extra}"
    )


def explain_text(record: DecisionRecord, grants: Sequence[GrantInfo], engine: PolicyEngine | None = None) -> str:
    """A readable account of one decision: request, lease, grants and why, policies, result.

    Args:
        record: the logged decision.
        grants: the grants it considered, as stored now (their state at the time of the
            decision is worked out from their timestamps).
        engine: the policies in force now, to say where a policy that fired lives.
    """
    r, d = record.request, record.decision
    lines = [f"decision {d.decision_id} at {when(record.at_ms)}"]
    lines.append(f"  result: {'ALLOW' if d.allow else 'DENY'} — {d.reason}: {d.message}")
    lines.append("request:")
    lines.append(
        f"  caller {record.caller or '(unknown token)'} asked for agent {r.principal}: "
        f"{r.verb} on {r.target} under lease epoch {r.lease_epoch}"
    )
    for label, value in (
        ("url", r.url),
        ("element", f"{r.element_role} {r.element_name!r}" if r.element_role or r.element_name else ""),
        ("window", f"{r.window_class} {r.window_title!r}" if r.window_class or r.window_title else ""),
        ("password field", "yes" if r.password_field else ""),
        ("in dialog", repr(r.context.dialog_title) if r.context.dialog_title else ""),
        ("in form", repr(r.context.form_name) if r.context.form_name else ""),
        ("under heading", repr(r.context.heading) if r.context.heading else ""),
        ("described as", repr(r.context.description) if r.context.description else ""),
        ("showing", repr(r.context.visible_text) if r.context.visible_text else ""),
        ("document load", "yes: the browser was about to load this URL" if r.document_load else ""),
        ("action id", r.action_id),
        ("observation", r.observation_id),
        ("fingerprint", r.fingerprint),
    ):
        if value:
            lines.append(f"  {label}: {value}")
    lines.append("lease at the time:")
    lease = record.lease
    if lease is None:
        lines.append(f"  {r.target} had never been leased")
    elif not lease.holder_kind:
        lines.append(f"  free at epoch {lease.epoch}")
    else:
        state = "live" if lease.expires_at_ms > record.at_ms else "lapsed"
        lines.append(
            f"  {lease.holder_kind} {lease.holder} at epoch {lease.epoch}, {state} "
            f"(expires {when(lease.expires_at_ms)})"
        )
    if lease is not None and lease.next_holder:
        lines.append(f"  reserved for {lease.next_holder}")
    lines.append(f"grants considered ({len(grants)}):")
    try:
        origin = url_origin("url", r.url)
    except InvalidArgumentError:
        origin = ""
    path = url_path(r.url)
    if not grants:
        lines.append(f"  none: {r.principal} had no grant on {r.target}")
    for grant in grants:
        mismatch = grant_mismatch(grant, r, origin, path)
        state = grant.state_at(record.at_ms)
        if mismatch is not None:
            verdict = f"does not cover it: {mismatch}"
        elif state != GrantState.ACTIVE:
            verdict = f"covers it but was {state}"
        else:
            verdict = "covers it and was active"
        if grant.grant_id == d.grant_id:
            verdict += " ← decided on" + (" (consumed: single use)" if d.grant_consumed else "")
        lines.append(f"  {grant.grant_id} ({_grant_summary(grant)}): {verdict}")
    lines.append("policies:")
    if d.policies:
        for pid in d.policies:
            info = engine.info(pid) if engine is not None else None
            where = f" ({info.file}:{info.line})" if info is not None else " (no longer loaded)"
            lines.append(f"  fired: {pid}{where}")
    elif d.reason in _POLICIES_PASSED:
        lines.append("  no forbid fired")
    else:
        lines.append("  not evaluated (the lease or the grants decided first)")
    if d.shadow_policies:
        lines.append(f"  shadow (not enforced) would deny: {', '.join(d.shadow_policies)}")
    if d.approval_id:
        lines.append(f"approval: {d.approval_id}")
    lines.append(f"current epoch at the time: {d.lease_epoch}")
    return "\n".join(lines)


#: Reasons given only after every policy was evaluated and no hard forbid fired.
_POLICIES_PASSED = frozenset({Reason.ALLOW, Reason.APPROVAL_REQUIRED, Reason.APPROVAL_DENIED, Reason.APPROVAL_EXPIRED})


def _grant_summary(grant: GrantInfo) -> str:
    parts = [",".join(grant.verbs)]
    parts.append(", ".join(grant.origins) or "any origin")
    for label, values in (
        ("paths", grant.path_globs),
        ("roles", grant.role_patterns),
        ("names", grant.name_patterns),
        ("window classes", grant.window_class_patterns),
        ("window titles", grant.window_title_patterns),
        ("approval for", grant.require_approval_verbs),
    ):
        if values:
            parts.append(f"{label} {', '.join(values)}")
    if grant.single_use:
        parts.append("single use")
    if grant.task_id:
        parts.append(f"task {grant.task_id}")
    if grant.allow_password_input:
        parts.append("password input")
    if grant.expires_at_ms:
        parts.append(f"until {when(grant.expires_at_ms)}")
    parts.append(f"by {grant.granted_by}")
    return "; ".join(parts)


def approval_request(request: CheckInput, verdict: Verdict, decision: Decision, now: int) -> ApprovalInfo:
    """The pending approval a check asks for (its URL redacted of secrets)."""
    redacted = redact_check(request)
    return ApprovalInfo(
        approval_id=uuid.uuid4().hex,
        principal=request.principal,
        target=request.target,
        fingerprint=request.fingerprint,
        status=ApprovalStatus.PENDING.value,
        deadline_ms=now + verdict.approval_timeout_ms,
        lease_epoch=request.lease_epoch,
        verb=request.verb,
        url=redacted.url,
        element_role=request.element_role,
        element_name=request.element_name,
        window_class=request.window_class,
        window_title=request.window_title,
        observation_id=request.observation_id,
        action_id=request.action_id,
        grant_id=decision.grant_id,
        policies=verdict.approval_policies,
        created_at_ms=now,
        decision_id=decision.decision_id,
    )
