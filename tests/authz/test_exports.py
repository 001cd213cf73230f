"""The public names of handrail.authz are pinned."""

from __future__ import annotations

import handrail.authz


def test_all() -> None:
    assert sorted(handrail.authz.__all__) == [
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
        "VERBS",
        "serve",
    ]
    for name in handrail.authz.__all__:
        assert hasattr(handrail.authz, name)
