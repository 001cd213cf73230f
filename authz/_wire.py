"""Converting between the protobuf messages and the plain types, both ways.

The wire adapter is three modules, and they are the only ones of :mod:`handrail.authz` that
build or read a message: this one converts the records (checks, decisions, grants, leases,
approvals, logged decisions, Watch events) and the enums; :mod:`._wire_calls` builds each
RPC's request for the clients and reads its response; :mod:`._wire_responses` builds the
servicer's responses. Verbs, roles and statuses are lowercase or uppercase strings (the
values of :class:`~handrail.Verb`, :class:`Role` ...) everywhere else.

The wire enums are derived from the vocabulary, never listed again: ``tests/test_vocabulary.py``
pins the vocabulary to the ``.proto`` enums. The authz wire's ``Reason`` holds only the
decision reasons (:data:`handrail.DECISION_REASONS`): an executor-only reason is never
encoded here.
"""

from __future__ import annotations

from typing import cast

from handrail._vocabulary import DECISION_REASONS, Verb
from handrail.authz._errors import InvalidArgumentError
from handrail.authz._models import (
    ApprovalInfo,
    ApprovalStatus,
    CheckInput,
    Decision,
    DecisionRecord,
    ElementContext,
    GrantInfo,
    GrantState,
    HolderKind,
    LeaseInfo,
    PrincipalInfo,
    PrincipalState,
    Role,
    WatchEventInfo,
)
from handrail.proto.authz.v1 import authz_pb2 as pb

_VERB_TO_PB = {v.value: cast("pb.Verb", pb.Verb.Value(f"VERB_{v.name}")) for v in Verb}
_PB_TO_VERB = {v: k for k, v in _VERB_TO_PB.items()}

_ROLE_TO_PB = {r.value: cast("pb.Role", pb.Role.Value(f"ROLE_{r.name}")) for r in Role}
_PB_TO_ROLE = {v: k for k, v in _ROLE_TO_PB.items()}

_STATUS_TO_PB: dict[str, pb.ApprovalStatus] = {
    "": pb.APPROVAL_STATUS_UNSPECIFIED,
    **{
        s.value: cast("pb.ApprovalStatus", pb.ApprovalStatus.Value(f"APPROVAL_STATUS_{s.name}")) for s in ApprovalStatus
    },
}
_PB_TO_STATUS = {v: k for k, v in _STATUS_TO_PB.items()}

_KIND_TO_PB: dict[str, pb.HolderKind] = {
    HolderKind.NONE.value: pb.HOLDER_KIND_UNSPECIFIED,
    HolderKind.AGENT.value: pb.HOLDER_AGENT,
    HolderKind.HUMAN.value: pb.HOLDER_HUMAN,
}
_PB_TO_KIND = {v: k for k, v in _KIND_TO_PB.items()}

_REASON_TO_PB = {r.value: cast("pb.Reason", pb.Reason.Value(r.value)) for r in DECISION_REASONS}
_PB_TO_REASON: dict[int, str] = {v: k for k, v in _REASON_TO_PB.items()}

_GRANT_STATE_TO_PB = {s.value: cast("pb.GrantState", pb.GrantState.Value(f"GRANT_STATE_{s.name}")) for s in GrantState}
_PRINCIPAL_STATE_TO_PB = {
    s.value: cast("pb.PrincipalState", pb.PrincipalState.Value(f"PRINCIPAL_STATE_{s.name}")) for s in PrincipalState
}
#: Watch event kinds and changes: the words of WatchEventInfo, and their wire enums.
EVENT_KINDS = ("lease", "grant", "approval", "policy")
EVENT_CHANGES = (
    "acquire",
    "renew",
    "release",
    "takeover",
    "handback",
    "activity",
    "expire",
    "resync",
    "grant",
    "revoke",
    "consume",
    "close",
    "create",
    "approve",
    "deny",
    "use",
    "reload",
)
_KIND_EVENT_TO_PB = {k: cast("pb.EventKind", pb.EventKind.Value(f"EVENT_KIND_{k.upper()}")) for k in EVENT_KINDS}
_PB_TO_KIND_EVENT = {v: k for k, v in _KIND_EVENT_TO_PB.items()}
_CHANGE_TO_PB = {c: cast("pb.Change", pb.Change.Value(f"CHANGE_{c.upper()}")) for c in EVENT_CHANGES}
_PB_TO_CHANGE = {v: k for k, v in _CHANGE_TO_PB.items()}


def verb_to_pb(field: str, verb: str) -> pb.Verb:
    """``"submit"`` → ``VERB_SUBMIT``; raises InvalidArgumentError for an unknown verb."""
    try:
        return _VERB_TO_PB[verb.lower()]
    except KeyError:
        known = ", ".join(_VERB_TO_PB)
        raise InvalidArgumentError(field, f"unknown verb {verb!r} (known: {known})") from None


def verb_from_pb(field: str, value: int) -> str:
    """``VERB_SUBMIT`` → ``"submit"``; raises for unspecified or unknown values."""
    if value == pb.VERB_UNSPECIFIED:
        raise InvalidArgumentError(field, "must be specified")
    try:
        return _PB_TO_VERB[value]  # type: ignore[index]
    except KeyError:
        raise InvalidArgumentError(field, f"unknown verb value {value}") from None


def role_to_pb(role: str) -> pb.Role:
    """``"agent"`` → ``ROLE_AGENT``."""
    return _ROLE_TO_PB.get(role, pb.ROLE_UNSPECIFIED)


def role_from_pb(value: int) -> str:
    """``ROLE_AGENT`` → ``"agent"`` (``""`` when unspecified)."""
    return _PB_TO_ROLE.get(value, "")  # type: ignore[call-overload, no-any-return]


def status_to_pb(status: str) -> pb.ApprovalStatus:
    """``"PENDING"`` → ``APPROVAL_STATUS_PENDING`` (case-insensitive)."""
    try:
        return _STATUS_TO_PB[status.upper()]
    except KeyError:
        known = ", ".join(k.lower() for k in _STATUS_TO_PB if k)
        raise InvalidArgumentError("status", f"unknown approval status {status!r} (known: {known})") from None


def status_from_pb(value: int) -> str:
    """``APPROVAL_STATUS_PENDING`` → ``"PENDING"`` (``""`` when unspecified)."""
    return _PB_TO_STATUS.get(value, "")  # type: ignore[call-overload, no-any-return]


def status_filter_from_pb(value: int) -> str:
    """A request's approval-status filter: ``""`` for unspecified; INVALID_ARGUMENT
    naming ``status`` for a number the enum does not list."""
    if value == pb.APPROVAL_STATUS_UNSPECIFIED:
        return ""
    status = _PB_TO_STATUS.get(value)  # type: ignore[call-overload]
    if not status:
        raise InvalidArgumentError("status", f"unknown approval status value {value}")
    return str(status)


def reason_filter_from_pb(value: int) -> str:
    """A request's reason filter: ``""`` for unspecified; INVALID_ARGUMENT naming
    ``reason`` for a number that is not a decision reason."""
    if value == pb.REASON_UNSPECIFIED:
        return ""
    reason = _PB_TO_REASON.get(value)
    if reason is None:
        raise InvalidArgumentError("reason", f"unknown reason value {value}")
    return reason


def reason_to_pb(reason: str) -> pb.Reason:
    """``"ALLOW"`` → ``ALLOW`` (case-insensitive); raises InvalidArgumentError for anything
    but a decision reason (an executor-only reason has no value on this wire)."""
    value = _REASON_TO_PB.get(reason.upper())
    if value is None:
        raise InvalidArgumentError("reason", f"unknown reason {reason!r}")
    return value


def reason_from_pb(value: int) -> str:
    """``ALLOW`` → ``"ALLOW"`` (``""`` when unspecified)."""
    return "" if value == pb.REASON_UNSPECIFIED else _reason_name(value)


def _reason_name(value: int) -> str:
    # REASON_UNSPECIFIED, which no sidecar sends, reads as its enum name, as it always did
    return _PB_TO_REASON.get(value) or pb.Reason.Name(value)


def _decision_reason(reason: str) -> pb.Reason:
    value = _REASON_TO_PB.get(reason)
    if value is None:
        raise _not_a_decision_reason(reason)
    return value


def _not_a_decision_reason(reason: str) -> ValueError:
    # a bug, never a request's fault: the servicer answers INTERNAL
    return ValueError(f"{reason!r} is not a decision reason; the authz wire cannot carry it")


def _resource(request: CheckInput) -> pb.Resource:
    return pb.Resource(
        url=request.url,
        element_role=request.element_role,
        element_name=request.element_name,
        window_class=request.window_class,
        window_title=request.window_title,
        password_field=request.password_field,
        dialog_title=request.context.dialog_title,
        form_name=request.context.form_name,
        heading=request.context.heading,
        description=request.context.description,
        document_load=request.document_load,
        visible_text=request.context.visible_text,
    )


_NO_CONTEXT = ElementContext()


def _context(res: pb.Resource) -> ElementContext:
    dialog_title, form_name, heading = res.dialog_title, res.form_name, res.heading
    description, visible_text = res.description, res.visible_text
    if not (dialog_title or form_name or heading or description or visible_text):
        return _NO_CONTEXT  # the usual element: no dialog, form, heading or description
    return ElementContext(dialog_title, form_name, heading, description, visible_text)


def check_request_to_pb(request: CheckInput) -> pb.CheckRequest:
    """Encode a check (the verb must be known)."""
    return pb.CheckRequest(
        principal=request.principal,
        target=request.target,
        lease_epoch=request.lease_epoch,
        verb=verb_to_pb("verb", request.verb),
        resource=_resource(request),
        action_id=request.action_id,
        fingerprint=request.fingerprint,
        observation_id=request.observation_id,
        approval_asked=request.approval_asked,
    )


def check_request_from_pb(msg: pb.CheckRequest) -> CheckInput:
    """Decode a check; raises InvalidArgumentError for an unspecified or unknown verb."""
    res = msg.resource
    return CheckInput(
        principal=msg.principal,
        target=msg.target,
        lease_epoch=msg.lease_epoch,
        verb=verb_from_pb("verb", msg.verb),
        url=res.url,
        element_role=res.element_role,
        element_name=res.element_name,
        window_class=res.window_class,
        window_title=res.window_title,
        password_field=res.password_field,
        action_id=msg.action_id,
        fingerprint=msg.fingerprint,
        observation_id=msg.observation_id,
        context=_context(res),
        document_load=res.document_load,
        approval_asked=msg.approval_asked,
    )


def decision_to_pb(decision: Decision) -> pb.CheckResponse:
    """Encode a decision."""
    reason = _REASON_TO_PB.get(decision.reason)  # _decision_reason, inline: every check
    if reason is None:
        raise _not_a_decision_reason(decision.reason)
    msg = pb.CheckResponse(
        allow=decision.allow,
        reason=reason,
        message=decision.message,
        decision_id=decision.decision_id,
        grant_id=decision.grant_id,
        lease_epoch=decision.lease_epoch,
    )
    # The fields most decisions leave empty, only when set (a default is not sent anyway).
    if decision.approval_id:
        msg.approval_id = decision.approval_id
    if decision.grant_consumed:
        msg.grant_consumed = True
    if decision.idempotency_header:
        msg.idempotency_header = True
    if decision.replayed:
        msg.replayed = True
    if decision.policies:
        msg.policies.extend(decision.policies)
    if decision.shadow_policies:
        msg.shadow_policies.extend(decision.shadow_policies)
    return msg


def decision_from_pb(msg: pb.CheckResponse) -> Decision:
    """Decode a decision."""
    return Decision(
        allow=msg.allow,
        reason=_reason_name(msg.reason),
        message=msg.message,
        decision_id=msg.decision_id,
        policies=tuple(msg.policies),
        grant_id=msg.grant_id,
        lease_epoch=msg.lease_epoch,
        approval_id=msg.approval_id,
        shadow_policies=tuple(msg.shadow_policies),
        grant_consumed=msg.grant_consumed,
        idempotency_header=msg.idempotency_header,
        replayed=msg.replayed,
    )


def grant_to_pb(grant: GrantInfo, now_ms: int = 0) -> pb.Grant:
    """Encode a grant (verbs must be known); with ``now_ms``, its state then."""
    return pb.Grant(
        path_globs=list(grant.path_globs),
        role_patterns=list(grant.role_patterns),
        name_patterns=list(grant.name_patterns),
        window_class_patterns=list(grant.window_class_patterns),
        window_title_patterns=list(grant.window_title_patterns),
        allow_password_input=grant.allow_password_input,
        idempotency_header=grant.idempotency_header,
        single_use=grant.single_use,
        task_id=grant.task_id,
        require_approval_verbs=[
            verb_to_pb(f"grant.require_approval_verbs[{i}]", v) for i, v in enumerate(grant.require_approval_verbs)
        ],
        approval_timeout_ms=grant.approval_timeout_ms,
        revoked_at_ms=grant.revoked_at_ms,
        used_at_ms=grant.used_at_ms,
        closed_at_ms=grant.closed_at_ms,
        state=grant.state(now_ms) if now_ms else "",
        grant_state=_GRANT_STATE_TO_PB[grant.state(now_ms)] if now_ms else pb.GRANT_STATE_UNSPECIFIED,
        grant_id=grant.grant_id,
        principal=grant.principal,
        target=grant.target,
        verbs=[verb_to_pb(f"grant.verbs[{i}]", v) for i, v in enumerate(grant.verbs)],
        origins=list(grant.origins),
        expires_at_ms=grant.expires_at_ms,
        granted_by=grant.granted_by,
        note=grant.note,
        created_at_ms=grant.created_at_ms,
        revoked=grant.revoked,
    )


def grant_from_pb(msg: pb.Grant) -> GrantInfo:
    """Decode a grant; raises InvalidArgumentError naming a bad verb."""
    return GrantInfo(
        grant_id=msg.grant_id,
        principal=msg.principal,
        target=msg.target,
        verbs=tuple(verb_from_pb(f"grant.verbs[{i}]", v) for i, v in enumerate(msg.verbs)),
        origins=tuple(msg.origins),
        expires_at_ms=msg.expires_at_ms,
        granted_by=msg.granted_by,
        note=msg.note,
        created_at_ms=msg.created_at_ms,
        revoked=msg.revoked,
        path_globs=tuple(msg.path_globs),
        role_patterns=tuple(msg.role_patterns),
        name_patterns=tuple(msg.name_patterns),
        window_class_patterns=tuple(msg.window_class_patterns),
        window_title_patterns=tuple(msg.window_title_patterns),
        allow_password_input=msg.allow_password_input,
        idempotency_header=msg.idempotency_header,
        single_use=msg.single_use,
        task_id=msg.task_id,
        require_approval_verbs=tuple(
            verb_from_pb(f"grant.require_approval_verbs[{i}]", v) for i, v in enumerate(msg.require_approval_verbs)
        ),
        approval_timeout_ms=msg.approval_timeout_ms,
        revoked_at_ms=msg.revoked_at_ms,
        used_at_ms=msg.used_at_ms,
        closed_at_ms=msg.closed_at_ms,
    )


def lease_msg(lease: LeaseInfo) -> pb.Lease:
    """Encode a lease."""
    return pb.Lease(
        target=lease.target,
        holder_kind=_KIND_TO_PB[lease.holder_kind],
        holder=lease.holder,
        epoch=lease.epoch,
        expires_at_ms=lease.expires_at_ms,
        next_holder=lease.next_holder,
    )


def lease_to_pb(lease: LeaseInfo) -> pb.LeaseResponse:
    """Encode a lease as the response all lease calls share."""
    return pb.LeaseResponse(lease=lease_msg(lease))


def lease_from_pb(msg: pb.LeaseResponse) -> LeaseInfo:
    """Decode a lease response."""
    return lease_from_msg(msg.lease)


def lease_from_msg(lease: pb.Lease) -> LeaseInfo:
    """Decode a lease."""
    return LeaseInfo(
        target=lease.target,
        holder_kind=_PB_TO_KIND.get(lease.holder_kind, ""),
        holder=lease.holder,
        epoch=lease.epoch,
        expires_at_ms=lease.expires_at_ms,
        next_holder=lease.next_holder,
    )


def approval_to_pb(a: ApprovalInfo) -> pb.Approval:
    """Encode an approval."""
    return pb.Approval(
        approval_id=a.approval_id,
        principal=a.principal,
        target=a.target,
        fingerprint=a.fingerprint,
        status=status_to_pb(a.status),
        deadline_ms=a.deadline_ms,
        decided_by=a.decided_by,
        note=a.note,
        verb=_VERB_TO_PB.get(a.verb, pb.VERB_UNSPECIFIED),
        resource=pb.Resource(
            url=a.url,
            element_role=a.element_role,
            element_name=a.element_name,
            window_class=a.window_class,
            window_title=a.window_title,
        ),
        lease_epoch=a.lease_epoch,
        observation_id=a.observation_id,
        action_id=a.action_id,
        grant_id=a.grant_id,
        policies=list(a.policies),
        created_at_ms=a.created_at_ms,
        decided_at_ms=a.decided_at_ms,
        used_at_ms=a.used_at_ms,
        decision_id=a.decision_id,
        used_by_decision_id=a.used_by_decision_id,
    )


def approval_from_pb(msg: pb.Approval) -> ApprovalInfo:
    """Decode an approval."""
    res = msg.resource
    return ApprovalInfo(
        approval_id=msg.approval_id,
        principal=msg.principal,
        target=msg.target,
        fingerprint=msg.fingerprint,
        status=status_from_pb(msg.status),
        deadline_ms=msg.deadline_ms,
        lease_epoch=msg.lease_epoch,
        verb=_PB_TO_VERB.get(msg.verb, ""),
        url=res.url,
        element_role=res.element_role,
        element_name=res.element_name,
        window_class=res.window_class,
        window_title=res.window_title,
        observation_id=msg.observation_id,
        action_id=msg.action_id,
        grant_id=msg.grant_id,
        policies=tuple(msg.policies),
        decided_by=msg.decided_by,
        note=msg.note,
        created_at_ms=msg.created_at_ms,
        decided_at_ms=msg.decided_at_ms,
        used_at_ms=msg.used_at_ms,
        decision_id=msg.decision_id,
        used_by_decision_id=msg.used_by_decision_id,
    )


def record_to_pb(record: DecisionRecord) -> pb.DecisionRecord:
    """Encode a logged decision."""
    r, d = record.request, record.decision
    msg = pb.DecisionRecord(
        decision_id=record.decision_id,
        at_ms=record.at_ms,
        caller=record.caller,
        principal=r.principal,
        target=r.target,
        lease_epoch=r.lease_epoch,
        verb=_VERB_TO_PB.get(r.verb, pb.VERB_UNSPECIFIED),
        resource=_resource(r),
        action_id=r.action_id,
        fingerprint=r.fingerprint,
        observation_id=r.observation_id,
        allow=d.allow,
        reason=_decision_reason(d.reason),
        message=d.message,
        policies=list(d.policies),
        grant_id=d.grant_id,
        grant_consumed=d.grant_consumed,
        approval_id=d.approval_id,
        current_epoch=d.lease_epoch,
        shadow_policies=list(d.shadow_policies),
        grants_considered=list(record.grants_considered),
    )
    if record.lease is not None:
        msg.lease.CopyFrom(lease_msg(record.lease))
    return msg


def record_from_pb(msg: pb.DecisionRecord) -> DecisionRecord:
    """Decode a logged decision."""
    res = msg.resource
    request = CheckInput(
        principal=msg.principal,
        target=msg.target,
        lease_epoch=msg.lease_epoch,
        verb=_PB_TO_VERB.get(msg.verb, ""),
        url=res.url,
        element_role=res.element_role,
        element_name=res.element_name,
        window_class=res.window_class,
        window_title=res.window_title,
        password_field=res.password_field,
        action_id=msg.action_id,
        fingerprint=msg.fingerprint,
        observation_id=msg.observation_id,
        context=_context(res),
        document_load=res.document_load,
    )
    decision = Decision(
        allow=msg.allow,
        reason=reason_from_pb(msg.reason),
        message=msg.message,
        decision_id=msg.decision_id,
        policies=tuple(msg.policies),
        grant_id=msg.grant_id,
        lease_epoch=msg.current_epoch,
        approval_id=msg.approval_id,
        shadow_policies=tuple(msg.shadow_policies),
        grant_consumed=msg.grant_consumed,
    )
    return DecisionRecord(
        decision_id=msg.decision_id,
        at_ms=msg.at_ms,
        caller=msg.caller,
        request=request,
        decision=decision,
        lease=lease_from_msg(msg.lease) if msg.HasField("lease") else None,
        grants_considered=tuple(msg.grants_considered),
    )


def event_to_pb(event: WatchEventInfo) -> pb.WatchEvent:
    """Encode a Watch event."""
    msg = pb.WatchEvent(
        seq=event.seq,
        kind=event.kind,
        target=event.target,
        at_ms=event.at_ms,
        change=event.change,
        event_kind=_KIND_EVENT_TO_PB.get(event.kind, pb.EVENT_KIND_UNSPECIFIED),
        event_change=_CHANGE_TO_PB.get(event.change, pb.CHANGE_UNSPECIFIED),
    )
    if event.lease is not None:
        msg.lease.CopyFrom(lease_msg(event.lease))
    if event.grant is not None:
        msg.grant.CopyFrom(grant_to_pb(event.grant, event.at_ms))
    if event.approval is not None:
        msg.approval.CopyFrom(approval_to_pb(event.approval))
    return msg


def event_from_pb(msg: pb.WatchEvent) -> WatchEventInfo:
    """Decode a Watch event."""
    grant = grant_from_pb(msg.grant) if msg.HasField("grant") else None
    approval = approval_from_pb(msg.approval) if msg.HasField("approval") else None
    return WatchEventInfo(
        seq=msg.seq,
        kind=_PB_TO_KIND_EVENT.get(msg.event_kind, msg.kind),
        target=msg.target,
        change=_PB_TO_CHANGE.get(msg.event_change, msg.change),
        lease=lease_from_msg(msg.lease) if msg.HasField("lease") else None,
        grant_id=grant.grant_id if grant is not None else "",
        approval_id=approval.approval_id if approval is not None else "",
        approval_status=approval.status if approval is not None else "",
        at_ms=msg.at_ms,
        grant=grant,
        approval=approval,
    )


def principal_to_pb(info: PrincipalInfo, now_ms: int) -> pb.Principal:
    """Encode a principal (never a token), with its state at ``now_ms``."""
    return pb.Principal(
        name=info.name,
        role=role_to_pb(info.role),
        created_at_ms=info.created_at_ms,
        expires_at_ms=info.expires_at_ms,
        revoked_at_ms=info.revoked_at_ms,
        state=_PRINCIPAL_STATE_TO_PB[info.state(now_ms)],
    )


def principal_from_pb(msg: pb.Principal) -> PrincipalInfo:
    """Decode a principal."""
    return PrincipalInfo(msg.name, role_from_pb(msg.role), msg.created_at_ms, msg.expires_at_ms, msg.revoked_at_ms)
