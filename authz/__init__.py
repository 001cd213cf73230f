"""The authorization sidecar: scope grants, control leases, Cedar policies and decisions.

Run it with ``handrail authz serve``; talk to it with :class:`AuthzClient` or
:class:`AsyncAuthzClient`.
"""

from __future__ import annotations

from handrail.authz._client import AsyncAuthzClient, AuthzClient
from handrail.authz._core import VERBS, Decision, GrantInfo, LeaseInfo, Reason
from handrail.authz._errors import (
    AuthzError,
    AuthzRpcError,
    AuthzUnavailableError,
    InvalidArgumentError,
    LeaseConflictError,
    PermissionDeniedError,
    PolicyError,
    UnauthenticatedError,
)
from handrail.authz._policies import PolicyEngine
from handrail.authz._service import AuthzServer, serve
from handrail.authz._store import Store

__all__ = [
    "VERBS",
    "AsyncAuthzClient",
    "AuthzClient",
    "AuthzError",
    "AuthzRpcError",
    "AuthzServer",
    "AuthzUnavailableError",
    "Decision",
    "GrantInfo",
    "InvalidArgumentError",
    "LeaseConflictError",
    "LeaseInfo",
    "PermissionDeniedError",
    "PolicyEngine",
    "PolicyError",
    "Reason",
    "Store",
    "UnauthenticatedError",
    "serve",
]
