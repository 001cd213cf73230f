"""The clients' calls: one builder per RPC, the only place a client request is made.

Each builder is named after its RPC's Python method and returns a :class:`Call`: the RPC's
name on the stub, the request built from plain arguments, and the function that reads the
response back into plain types. :class:`~handrail.authz.AuthzClient` and
:class:`~handrail.authz.AsyncAuthzClient` only choose the builder and send what it made
(blocking or awaited), so the two cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from google.protobuf.message import Message

from handrail.authz._models import (
    ApprovalInfo,
    CheckInput,
    Decision,
    DecisionRecord,
    ElementContext,
    GrantInfo,
    LeaseInfo,
    PrincipalInfo,
)
from handrail.authz._wire import (
    approval_from_pb,
    check_request_to_pb,
    decision_from_pb,
    grant_from_pb,
    grant_to_pb,
    lease_from_msg,
    lease_from_pb,
    principal_from_pb,
    reason_to_pb,
    record_from_pb,
    role_from_pb,
    status_to_pb,
)
from handrail.proto.authz.v1 import authz_pb2 as pb

_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class Call(Generic[_T]):
    """One unary call, ready to send.

    Attributes:
        rpc: the method's name on the ``Authz`` stub (``"Check"`` ...).
        request: the request message.
        decode: reads the response message into plain types.
    """

    rpc: str
    request: Message
    decode: Callable[[Any], _T]


# --- checks and grants ------------------------------------------------------------------------


def check(
    principal: str,
    target: str,
    lease_epoch: int,
    verb: str,
    *,
    url: str = "",
    element_role: str = "",
    element_name: str = "",
    password_field: bool = False,
    action_id: str = "",
    window_class: str = "",
    window_title: str = "",
    fingerprint: str = "",
    observation_id: str = "",
    context: ElementContext | None = None,
    document_load: bool = False,
    approval_asked: str = "",
) -> Call[Decision]:
    """``Check``: may ``principal`` do ``verb`` on ``target`` under ``lease_epoch``?"""
    request = CheckInput(
        principal=principal,
        target=target,
        lease_epoch=lease_epoch,
        verb=verb,
        url=url,
        element_role=element_role,
        element_name=element_name,
        window_class=window_class,
        window_title=window_title,
        password_field=password_field,
        action_id=action_id,
        fingerprint=fingerprint,
        observation_id=observation_id,
        context=context or ElementContext(),
        document_load=document_load,
        approval_asked=approval_asked,
    )
    return Call("Check", check_request_to_pb(request), decision_from_pb)


def grant(
    principal: str,
    target: str,
    verbs: Iterable[str],
    origins: Iterable[str],
    expires_at_ms: int = 0,
    note: str = "",
    scope: Mapping[str, Any] | None = None,
    ttl_ms: int = 0,
) -> Call[GrantInfo]:
    """``Grant``; ``scope`` sets the other fields of :class:`GrantInfo` by name (lists are
    taken as tuples); ``ttl_ms``: the lifetime, on the sidecar's clock."""
    fields: dict[str, Any] = {k: tuple(v) if isinstance(v, list | tuple) else v for k, v in (scope or {}).items()}
    info = GrantInfo(
        "",
        principal,
        target,
        tuple(verbs),
        tuple(origins),
        expires_at_ms,
        note=note,
        **fields,
    )
    return Call("Grant", pb.GrantRequest(grant=grant_to_pb(info), ttl_ms=ttl_ms), _grant_of)


def revoke(grant_id: str) -> Call[GrantInfo]:
    """``Revoke``."""
    return Call("Revoke", pb.RevokeRequest(grant_id=grant_id), _grant_of)


def list_grants(principal: str = "", target: str = "", include_inactive: bool = False) -> Call[list[GrantInfo]]:
    """``ListGrants``."""
    request = pb.ListGrantsRequest(principal=principal, target=target, include_inactive=include_inactive)
    return Call("ListGrants", request, _grants_of)


def close_task(task_id: str) -> Call[list[GrantInfo]]:
    """``CloseTask``."""
    return Call("CloseTask", pb.CloseTaskRequest(task_id=task_id), _grants_of)


def _grant_of(response: Any) -> GrantInfo:
    return grant_from_pb(response.grant)


def _grants_of(response: Any) -> list[GrantInfo]:
    return [grant_from_pb(g) for g in response.grants]


# --- leases -----------------------------------------------------------------------------------


def acquire(target: str, holder: str = "", ttl_ms: int = 0) -> Call[LeaseInfo]:
    """``Acquire``."""
    return Call("Acquire", pb.AcquireRequest(target=target, holder=holder, ttl_ms=ttl_ms), lease_from_pb)


def renew(target: str, epoch: int, holder: str = "", ttl_ms: int = 0) -> Call[LeaseInfo]:
    """``Renew``."""
    request = pb.RenewRequest(target=target, holder=holder, epoch=epoch, ttl_ms=ttl_ms)
    return Call("Renew", request, lease_from_pb)


def release(target: str, epoch: int, holder: str = "") -> Call[LeaseInfo]:
    """``Release``."""
    return Call("Release", pb.ReleaseRequest(target=target, holder=holder, epoch=epoch), lease_from_pb)


def take_over(target: str, ttl_ms: int = 0, note: str = "") -> Call[LeaseInfo]:
    """``TakeOver``."""
    return Call("TakeOver", pb.TakeOverRequest(target=target, ttl_ms=ttl_ms, note=note), lease_from_pb)


def hand_back(target: str, epoch: int, next_holder: str = "") -> Call[LeaseInfo]:
    """``HandBack``."""
    request = pb.HandBackRequest(target=target, epoch=epoch, next_holder=next_holder)
    return Call("HandBack", request, lease_from_pb)


def get_lease(target: str) -> Call[LeaseInfo]:
    """``GetLease``."""
    return Call("GetLease", pb.GetLeaseRequest(target=target), lease_from_pb)


def report_activity(target: str, note: str = "", ttl_ms: int = 0) -> Call[LeaseInfo]:
    """``ReportActivity``."""
    request = pb.ReportActivityRequest(target=target, note=note, ttl_ms=ttl_ms)
    return Call("ReportActivity", request, lease_from_pb)


def expire_lease(target: str) -> Call[LeaseInfo]:
    """``ExpireLease``."""
    return Call("ExpireLease", pb.ExpireLeaseRequest(target=target), lease_from_pb)


def check_human_input(
    person: str, target: str, lease_epoch: int, verb: str, *, url: str = "", action_id: str = ""
) -> Call[Decision]:
    """``CheckHumanInput``: may the person (the caller) send this input under ``lease_epoch``?"""
    request = CheckInput(
        principal=person, target=target, lease_epoch=lease_epoch, verb=verb, url=url, action_id=action_id
    )
    return Call("CheckHumanInput", check_request_to_pb(request), decision_from_pb)


def list_leases() -> Call[list[LeaseInfo]]:
    """``ListLeases``: every target's lease."""
    return Call("ListLeases", pb.ListLeasesRequest(), _leases_of)


def _leases_of(response: Any) -> list[LeaseInfo]:
    return [lease_from_msg(lease) for lease in response.leases]


def who_am_i() -> Call[tuple[str, str]]:
    """``WhoAmI``: ``(principal, role)``."""
    return Call("WhoAmI", pb.WhoAmIRequest(), _who_of)


def _who_of(response: Any) -> tuple[str, str]:
    return response.principal, role_from_pb(response.role)


# --- principals -------------------------------------------------------------------------------


def list_principals() -> Call[list[PrincipalInfo]]:
    """``ListPrincipals``."""
    return Call("ListPrincipals", pb.ListPrincipalsRequest(), _principals_of)


def revoke_principal(name: str) -> Call[PrincipalInfo]:
    """``RevokePrincipal``."""
    return Call("RevokePrincipal", pb.RevokePrincipalRequest(name=name), _principal_of)


def rotate_token(name: str, expires_at_ms: int = 0) -> Call[tuple[PrincipalInfo, str]]:
    """``RotateToken``: (the principal, its new token)."""
    return Call("RotateToken", pb.RotateTokenRequest(name=name, expires_at_ms=expires_at_ms), _rotated_of)


def _principals_of(response: Any) -> list[PrincipalInfo]:
    return [principal_from_pb(p) for p in response.principals]


def _principal_of(response: Any) -> PrincipalInfo:
    return principal_from_pb(response.principal)


def _rotated_of(response: Any) -> tuple[PrincipalInfo, str]:
    return principal_from_pb(response.principal), response.token


# --- approvals --------------------------------------------------------------------------------


def approve(approval_id: str, note: str = "") -> Call[ApprovalInfo]:
    """``Approve``."""
    return Call("Approve", pb.ApproveRequest(approval_id=approval_id, note=note), _approval_of)


def deny(approval_id: str, note: str = "") -> Call[ApprovalInfo]:
    """``Deny``."""
    return Call("Deny", pb.DenyRequest(approval_id=approval_id, note=note), _approval_of)


def get_approval(approval_id: str) -> Call[ApprovalInfo]:
    """``GetApproval``."""
    return Call("GetApproval", pb.GetApprovalRequest(approval_id=approval_id), _approval_of)


def list_approvals(status: str = "", principal: str = "", target: str = "", limit: int = 0) -> Call[list[ApprovalInfo]]:
    """``ListApprovals``; ``status`` is an approval status, any case, or empty for any."""
    request = pb.ListApprovalsRequest(
        status=status_to_pb(status) if status else pb.APPROVAL_STATUS_UNSPECIFIED,
        principal=principal,
        target=target,
        limit=limit,
    )
    return Call("ListApprovals", request, _approvals_of)


def _approval_of(response: Any) -> ApprovalInfo:
    return approval_from_pb(response.approval)


def _approvals_of(response: Any) -> list[ApprovalInfo]:
    return [approval_from_pb(a) for a in response.approvals]


# --- policies and the decision log ------------------------------------------------------------


def reload_policies() -> Call[tuple[tuple[str, ...], tuple[str, ...]]]:
    """``ReloadPolicies``: (enforced ids, shadow ids)."""
    return Call("ReloadPolicies", pb.ReloadPoliciesRequest(), _policy_ids_of)


def _policy_ids_of(response: Any) -> tuple[tuple[str, ...], tuple[str, ...]]:
    return tuple(response.policy_ids), tuple(response.shadow_policy_ids)


def explain_decision(decision_id: str) -> Call[tuple[DecisionRecord, str]]:
    """``ExplainDecision``: (the logged decision, a readable account)."""
    return Call("ExplainDecision", pb.ExplainDecisionRequest(decision_id=decision_id), _explained_of)


def _explained_of(response: Any) -> tuple[DecisionRecord, str]:
    return record_from_pb(response.decision), response.text


def list_decisions(
    principal: str = "", target: str = "", reason: str = "", since_ms: int = 0, limit: int = 0
) -> Call[list[DecisionRecord]]:
    """``ListDecisions``; ``reason`` is a decision reason, any case, or empty for any."""
    request = pb.ListDecisionsRequest(
        principal=principal,
        target=target,
        reason=reason_to_pb(reason) if reason else pb.REASON_UNSPECIFIED,
        since_ms=since_ms,
        limit=limit,
    )
    return Call("ListDecisions", request, _records_of)


def _records_of(response: Any) -> list[DecisionRecord]:
    return [record_from_pb(d) for d in response.decisions]


# --- Watch (server streaming: the client reads each event with _wire.event_from_pb) -----------


def watch_request(targets: Iterable[str] = (), since_seq: int = 0) -> pb.WatchRequest:
    """The request of ``Watch``."""
    return pb.WatchRequest(targets=list(targets), since_seq=since_seq)
