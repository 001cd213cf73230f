"""The one module that converts between the protobuf messages and the plain types.

The servicer and both clients go through these functions; verbs and roles are lowercase
strings everywhere else.
"""

from __future__ import annotations

from handrail.authz._core import CheckInput, Decision, GrantInfo, LeaseInfo
from handrail.authz._errors import InvalidArgumentError
from handrail.proto.authz.v1 import authz_pb2 as pb

_VERB_TO_PB = {
    "read": pb.VERB_READ,
    "input": pb.VERB_INPUT,
    "navigate": pb.VERB_NAVIGATE,
    "submit": pb.VERB_SUBMIT,
    "purchase": pb.VERB_PURCHASE,
    "delete": pb.VERB_DELETE,
    "upload": pb.VERB_UPLOAD,
    "download": pb.VERB_DOWNLOAD,
}
_PB_TO_VERB = {v: k for k, v in _VERB_TO_PB.items()}

_ROLE_TO_PB = {
    "agent": pb.ROLE_AGENT,
    "operator": pb.ROLE_OPERATOR,
    "executor": pb.ROLE_EXECUTOR,
    "admin": pb.ROLE_ADMIN,
}
_PB_TO_ROLE = {v: k for k, v in _ROLE_TO_PB.items()}

_KIND_TO_PB = {"": pb.HOLDER_KIND_UNSPECIFIED, "agent": pb.HOLDER_AGENT, "human": pb.HOLDER_HUMAN}
_PB_TO_KIND = {v: k for k, v in _KIND_TO_PB.items()}


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


def check_request_to_pb(request: CheckInput) -> pb.CheckRequest:
    """Encode a check (the verb must be known)."""
    return pb.CheckRequest(
        principal=request.principal,
        target=request.target,
        lease_epoch=request.lease_epoch,
        verb=verb_to_pb("verb", request.verb),
        resource=pb.Resource(
            url=request.url,
            element_role=request.element_role,
            element_name=request.element_name,
            window_class=request.window_class,
            window_title=request.window_title,
            password_field=request.password_field,
        ),
        action_id=request.action_id,
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
    )


def decision_to_pb(decision: Decision) -> pb.CheckResponse:
    """Encode a decision."""
    return pb.CheckResponse(
        allow=decision.allow,
        reason=decision.reason,
        message=decision.message,
        decision_id=decision.decision_id,
        policies=list(decision.policies),
        grant_id=decision.grant_id,
        lease_epoch=decision.lease_epoch,
    )


def decision_from_pb(msg: pb.CheckResponse) -> Decision:
    """Decode a decision."""
    return Decision(
        allow=msg.allow,
        reason=pb.Reason.Name(msg.reason),
        message=msg.message,
        decision_id=msg.decision_id,
        policies=tuple(msg.policies),
        grant_id=msg.grant_id,
        lease_epoch=msg.lease_epoch,
    )


def grant_to_pb(grant: GrantInfo) -> pb.Grant:
    """Encode a grant (verbs must be known)."""
    return pb.Grant(
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
    )


def lease_to_pb(lease: LeaseInfo) -> pb.LeaseResponse:
    """Encode a lease as the response all lease calls share."""
    return pb.LeaseResponse(
        lease=pb.Lease(
            target=lease.target,
            holder_kind=_KIND_TO_PB[lease.holder_kind],
            holder=lease.holder,
            epoch=lease.epoch,
            expires_at_ms=lease.expires_at_ms,
            next_holder=lease.next_holder,
        )
    )


def lease_from_pb(msg: pb.LeaseResponse) -> LeaseInfo:
    """Decode a lease response."""
    lease = msg.lease
    return LeaseInfo(
        target=lease.target,
        holder_kind=_PB_TO_KIND.get(lease.holder_kind, ""),
        holder=lease.holder,
        epoch=lease.epoch,
        expires_at_ms=lease.expires_at_ms,
        next_holder=lease.next_holder,
    )
