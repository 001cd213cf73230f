"""The public names of handrail.authz are pinned."""

from __future__ import annotations

import handrail.authz


def test_all() -> None:
    assert sorted(handrail.authz.__all__) == [
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
        "VERBS",
        "WatchEventInfo",
        "serve",
    ]
    for name in handrail.authz.__all__:
        assert hasattr(handrail.authz, name)
