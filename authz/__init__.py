"""The authorization sidecar: scope grants, control leases, approvals, Cedar policies, decisions.

Run it with ``handrail authz serve``; talk to it with :class:`AuthzClient` or
:class:`AsyncAuthzClient`. The operator's guide is ``docs/authz.md``.
"""

from __future__ import annotations

from handrail._vocabulary import VERBS, Reason
from handrail.authz._async_client import AsyncAuthzClient
from handrail.authz._authorizer import Authorizer
from handrail.authz._client import AuthzClient
from handrail.authz._errors import (
    AuthzError,
    AuthzRpcError,
    AuthzUnavailableError,
    InvalidArgumentError,
    LeaseConflictError,
    NotFoundError,
    PermissionDeniedError,
    PolicyError,
    UnauthenticatedError,
)
from handrail.authz._models import (
    ApprovalInfo,
    ApprovalStatus,
    Decision,
    DecisionRecord,
    GrantInfo,
    LeaseInfo,
    WatchEventInfo,
)
from handrail.authz._policies import PolicyEngine
from handrail.authz._service import AuthzServer, serve
from handrail.authz._sqlite import SqliteStore, Store
from handrail.authz._store import AuthzStore

__all__ = [
    "VERBS",
    "ApprovalInfo",
    "ApprovalStatus",
    "AsyncAuthzClient",
    "Authorizer",
    "AuthzClient",
    "AuthzError",
    "AuthzRpcError",
    "AuthzServer",
    "AuthzStore",
    "AuthzUnavailableError",
    "Decision",
    "DecisionRecord",
    "GrantInfo",
    "InvalidArgumentError",
    "LeaseConflictError",
    "LeaseInfo",
    "NotFoundError",
    "PermissionDeniedError",
    "PolicyEngine",
    "PolicyError",
    "Reason",
    "SqliteStore",
    "Store",
    "UnauthenticatedError",
    "WatchEventInfo",
    "serve",
]
