"""The pure decision function and validation, without I/O."""

from __future__ import annotations

import pytest
from handrail.authz import InvalidArgumentError
from handrail.authz._core import (
    CheckInput,
    GrantInfo,
    LeaseInfo,
    PolicyResult,
    decide,
    normalize_origin,
    url_origin,
)

NOW = 1_000_000
REQ = CheckInput("a", "t", 3, "submit", url="https://shop.test/cart")
LEASE = LeaseInfo("t", "agent", "a", 3, NOW + 1)
GRANT = GrantInfo("g1", "a", "t", ("submit",), ("https://shop.test",))


def _decide(
    lease: LeaseInfo | None = LEASE,
    grants: tuple[GrantInfo, ...] = (GRANT,),
    policy: PolicyResult = PolicyResult(),  # noqa: B008
    req: CheckInput = REQ,
) -> str:
    return decide(req, url_origin("url", req.url), lease, grants, policy, NOW).reason


def test_order_of_reasons() -> None:
    assert _decide() == "ALLOW"
    assert _decide(lease=None) == "NO_LEASE"
    assert _decide(lease=LeaseInfo("t", "agent", "a", 3, NOW)) == "NO_LEASE"  # expired
    assert _decide(lease=LeaseInfo("t", "human", "op", 3, NOW + 1)) == "HELD_BY_HUMAN"
    assert _decide(lease=LeaseInfo("t", "agent", "b", 3, NOW + 1)) == "NO_LEASE"
    assert _decide(lease=LeaseInfo("t", "agent", "a", 4, NOW + 1)) == "STALE_EPOCH"
    assert _decide(grants=()) == "OUT_OF_SCOPE"
    forbid = PolicyResult(True, ("p",))
    # the lease and the grants are judged before the policies
    assert _decide(grants=(), policy=forbid) == "OUT_OF_SCOPE"
    assert _decide(policy=forbid) == "POLICY_FORBID"


def test_grant_states() -> None:
    revoked = GrantInfo("g2", "a", "t", ("submit",), (), revoked=True)
    expired = GrantInfo("g3", "a", "t", ("submit",), (), expires_at_ms=NOW)
    assert _decide(grants=(revoked,)) == "GRANT_REVOKED"
    assert _decide(grants=(expired,)) == "GRANT_EXPIRED"
    assert _decide(grants=(revoked, expired, GRANT)) == "ALLOW"
    other_origin = GrantInfo("g4", "a", "t", ("submit",), ("https://other.test",))
    assert _decide(grants=(other_origin,)) == "OUT_OF_SCOPE"


def test_origins() -> None:
    assert url_origin("u", "HTTPS://Shop.Test:443/a?b") == "https://shop.test"
    assert url_origin("u", "http://127.0.0.1:8000/x") == "http://127.0.0.1:8000"
    assert url_origin("u", "") == ""
    assert normalize_origin("o", "http://[::1]:80") == "http://[::1]"
    for bad in ("nohost", "http://", "http://h:notaport"):
        with pytest.raises(InvalidArgumentError):
            url_origin("u", bad)
    for bad in ("http://h/path", "h:80", ""):
        with pytest.raises(InvalidArgumentError):
            normalize_origin("o", bad)
