"""The servicer's responses: each RPC's answer built from the authorizer's plain result.

:class:`~handrail.authz._service.AuthzServicer` reads its requests' plain fields itself and
decodes the structured ones with :mod:`._wire`; what it sends back is built here, so the
servicer never makes a message. ``Check`` answers with :func:`._wire.decision_to_pb`, the
lease calls with :func:`._wire.lease_to_pb`, ``Watch`` with :func:`._wire.event_to_pb`.
"""

from __future__ import annotations

from collections.abc import Iterable

from handrail.authz._models import ApprovalInfo, DecisionRecord, GrantInfo, Principal, PrincipalInfo
from handrail.authz._wire import approval_to_pb, grant_to_pb, principal_to_pb, record_to_pb, role_to_pb
from handrail.proto.authz.v1 import authz_pb2 as pb


def grant_response(grant: GrantInfo, now_ms: int) -> pb.GrantResponse:
    """``Grant``: the stored grant, with its state at ``now_ms``."""
    return pb.GrantResponse(grant=grant_to_pb(grant, now_ms))


def revoke_response(grant: GrantInfo, now_ms: int) -> pb.RevokeResponse:
    """``Revoke``: the revoked grant."""
    return pb.RevokeResponse(grant=grant_to_pb(grant, now_ms))


def list_grants_response(grants: Iterable[GrantInfo], now_ms: int) -> pb.ListGrantsResponse:
    """``ListGrants``."""
    return pb.ListGrantsResponse(grants=[grant_to_pb(g, now_ms) for g in grants])


def close_task_response(grants: Iterable[GrantInfo], now_ms: int) -> pb.CloseTaskResponse:
    """``CloseTask``: the grants it ended."""
    return pb.CloseTaskResponse(grants=[grant_to_pb(g, now_ms) for g in grants])


def who_am_i_response(caller: Principal) -> pb.WhoAmIResponse:
    """``WhoAmI``."""
    return pb.WhoAmIResponse(principal=caller.name, role=role_to_pb(caller.role), expires_at_ms=caller.expires_at_ms)


def list_principals_response(principals: Iterable[PrincipalInfo], now_ms: int) -> pb.ListPrincipalsResponse:
    """``ListPrincipals``."""
    return pb.ListPrincipalsResponse(principals=[principal_to_pb(p, now_ms) for p in principals])


def principal_response(info: PrincipalInfo, now_ms: int, token: str = "") -> pb.PrincipalResponse:
    """``RevokePrincipal`` and ``RotateToken`` (which alone sends the new token)."""
    return pb.PrincipalResponse(principal=principal_to_pb(info, now_ms), token=token)


def approval_response(approval: ApprovalInfo) -> pb.ApprovalResponse:
    """``Approve``, ``Deny`` and ``GetApproval``."""
    return pb.ApprovalResponse(approval=approval_to_pb(approval))


def list_approvals_response(approvals: Iterable[ApprovalInfo]) -> pb.ListApprovalsResponse:
    """``ListApprovals``."""
    return pb.ListApprovalsResponse(approvals=[approval_to_pb(a) for a in approvals])


def reload_policies_response(
    policy_ids: Iterable[str], shadow_policy_ids: Iterable[str], loaded_at_ms: int
) -> pb.ReloadPoliciesResponse:
    """``ReloadPolicies``: the ids now enforced, the shadow ones, and when."""
    return pb.ReloadPoliciesResponse(
        policy_ids=list(policy_ids),
        shadow_policy_ids=list(shadow_policy_ids),
        loaded_at_ms=loaded_at_ms,
    )


def explain_decision_response(record: DecisionRecord, text: str) -> pb.ExplainDecisionResponse:
    """``ExplainDecision``."""
    return pb.ExplainDecisionResponse(decision=record_to_pb(record), text=text)


def list_decisions_response(records: Iterable[DecisionRecord]) -> pb.ListDecisionsResponse:
    """``ListDecisions``."""
    return pb.ListDecisionsResponse(decisions=[record_to_pb(r) for r in records])
