"""The pure decision function and validation, without I/O."""

from __future__ import annotations

import dataclasses

import pytest

from handrail.authz import InvalidArgumentError
from handrail.authz._core import (
    ApprovalInfo,
    CheckInput,
    GrantInfo,
    LeaseInfo,
    PolicyResult,
    normalize_origin,
    url_origin,
    validate_grant,
)
from handrail.authz._decide import decide, grant_mismatch

NOW = 1_000_000
REQ = CheckInput("a", "t", 3, "submit", url="https://shop.test/cart", fingerprint="fp")
LEASE = LeaseInfo("t", "agent", "a", 3, NOW + 1)
GRANT = GrantInfo("g1", "a", "t", ("submit",), ("https://shop.test",))
ALLOWED = PolicyResult()


def _verdict(
    lease: LeaseInfo | None = LEASE,
    grants: tuple[GrantInfo, ...] = (GRANT,),
    policy: PolicyResult = ALLOWED,
    req: CheckInput = REQ,
    approval: ApprovalInfo | None = None,
):  # type: ignore[no-untyped-def]
    return decide(
        req,
        url_origin("url", req.url),
        lease,
        grants,
        lambda g: policy,
        NOW,
        approval=lambda: approval,
    )


def _decide(**kw: object) -> str:
    return _verdict(**kw).decision.reason  # type: ignore[arg-type, no-any-return]


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
    revoked = GrantInfo("g2", "a", "t", ("submit",), (), revoked=True, revoked_at_ms=NOW - 1)
    expired = GrantInfo("g3", "a", "t", ("submit",), (), expires_at_ms=NOW)
    used = GrantInfo("g5", "a", "t", ("submit",), (), single_use=True, used_at_ms=NOW - 5)
    closed = GrantInfo("g6", "a", "t", ("submit",), (), task_id="x", closed_at_ms=NOW - 5)
    assert _decide(grants=(revoked,)) == "GRANT_REVOKED"
    assert _decide(grants=(expired,)) == "GRANT_EXPIRED"
    assert _decide(grants=(used,)) == "GRANT_EXHAUSTED"
    assert _decide(grants=(closed,)) == "GRANT_EXPIRED"
    assert _decide(grants=(revoked, expired, GRANT)) == "ALLOW"
    other_origin = GrantInfo("g4", "a", "t", ("submit",), ("https://other.test",))
    assert _decide(grants=(other_origin,)) == "OUT_OF_SCOPE"


def test_reusable_grant_is_preferred_over_single_use() -> None:
    once = dataclasses.replace(GRANT, grant_id="once", single_use=True)
    v = _verdict(grants=(once, GRANT))
    assert v.decision.grant_id == "g1" and not v.consume
    v = _verdict(grants=(once,))
    assert v.decision.grant_id == "once" and v.consume and v.decision.grant_consumed


def test_policy_is_asked_per_grant_until_one_allows() -> None:
    plain = GRANT
    destructive = dataclasses.replace(GRANT, grant_id="d", verbs=("submit", "delete"))

    def evaluate(g: GrantInfo) -> PolicyResult:
        return ALLOWED if "delete" in g.verbs else PolicyResult(True, ("destructive",))

    origin = url_origin("u", REQ.url)
    v = decide(REQ, origin, LEASE, (plain, destructive), evaluate, NOW)
    assert v.decision.allow and v.decision.grant_id == "d"
    v = decide(REQ, origin, LEASE, (plain,), evaluate, NOW)
    assert v.decision.reason == "POLICY_FORBID" and v.decision.policies == ("destructive",)


def test_scope_patterns() -> None:
    req = CheckInput(
        "a",
        "browser:7",
        1,
        "submit",
        url="https://shop.test/account/close?x=1",
        element_role="button",
        element_name="Pause plan",
        window_class="Firefox",
        window_title="Shop — Mozilla Firefox",
    )
    origin, path = "https://shop.test", "/account/close"
    base = GrantInfo("g", "a", "browser:*", ("submit",))
    assert grant_mismatch(base, req, origin, path) is None
    cases = {
        "path_globs": (("/account/*",), ("/cart/*",)),
        "role_patterns": (("BUTTON",), ("link",)),
        "name_patterns": (("pause*",), ("delete*",)),
        "window_class_patterns": (("firefox",), ("xterm",)),
        "window_title_patterns": (("*mozilla*",), ("*chrome*",)),
    }
    for name, (good, bad) in cases.items():
        assert grant_mismatch(dataclasses.replace(base, **{name: good}), req, origin, path) is None
        why = grant_mismatch(dataclasses.replace(base, **{name: bad}), req, origin, path)
        assert why is not None and "matches none" in why, name
    assert "does not cover" in (grant_mismatch(dataclasses.replace(base, target="desktop:*"), req, origin, path) or "")


def test_approvals() -> None:
    needs = PolicyResult(True, ("ask",), approval_only=True, approval_timeout_ms=60_000)
    v = _verdict(policy=needs)
    assert v.decision.reason == "APPROVAL_REQUIRED" and v.approval == "create"
    assert v.approval_timeout_ms == 60_000 and v.decision.policies == ("ask",)
    # without a fingerprint there is nothing to bind an approval to
    v = _verdict(policy=needs, req=dataclasses.replace(REQ, fingerprint=""))
    assert v.decision.reason == "APPROVAL_REQUIRED" and v.approval == ""

    def approval(status: str, deadline: int = NOW + 10) -> ApprovalInfo:
        return ApprovalInfo("ap", "a", "t", "fp", status, deadline, lease_epoch=3)

    v = _verdict(policy=needs, approval=approval("PENDING"))
    assert (v.decision.reason, v.decision.approval_id, v.approval) == (
        "APPROVAL_REQUIRED",
        "ap",
        "",
    )
    v = _verdict(policy=needs, approval=approval("PENDING", deadline=NOW))
    assert v.decision.reason == "APPROVAL_EXPIRED" and not v.decision.allow
    v = _verdict(policy=needs, approval=approval("DENIED"))
    assert v.decision.reason == "APPROVAL_DENIED"
    v = _verdict(policy=needs, approval=approval("APPROVED"))
    assert v.decision.allow and v.approval == "use" and v.decision.approval_id == "ap"
    v = _verdict(policy=needs, approval=approval("USED"))
    assert v.decision.reason == "APPROVAL_REQUIRED" and v.approval == "create"
    # a grant can ask for approval of some verbs
    asking = dataclasses.replace(GRANT, require_approval_verbs=("submit",))
    assert _decide(grants=(asking,)) == "APPROVAL_REQUIRED"
    # a hard forbid wins over an approval
    assert _decide(grants=(asking,), policy=PolicyResult(True, ("no",))) == "POLICY_FORBID"


def test_validate_grant() -> None:
    g = GrantInfo("", "a", "t", ("submit", "submit"), name_patterns=("x", "x"))
    v = validate_grant(g, NOW)
    assert v.verbs == ("submit",) and v.name_patterns == ("x",)
    for field, value in (
        ("path_globs", ("account",)),
        ("role_patterns", ("",)),
        ("require_approval_verbs", ("fly",)),
        ("approval_timeout_ms", -1),
    ):
        with pytest.raises(InvalidArgumentError, match=rf"^grant\.{field}"):
            validate_grant(dataclasses.replace(g, **{field: value}), NOW)


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


def test_a_used_up_grant_still_hears_a_hard_forbid_first() -> None:
    # The executor takes GRANT_EXHAUSTED under the grant its action spent as "within its
    # scope" for the action's effects: a policy that forbids the effect must still say so.
    used = GrantInfo("g5", "a", "t", ("submit",), (), single_use=True, used_at_ms=NOW - 5)
    forbid = PolicyResult(True, ("no-admin",))
    v = _verdict(grants=(used,), policy=forbid)
    assert (v.decision.reason, v.decision.grant_id, v.decision.policies) == ("POLICY_FORBID", "g5", ("no-admin",))
    assert not v.consume
    asked = _verdict(grants=(used,), policy=PolicyResult(True, ("ask",), approval_only=True)).decision
    assert (asked.reason, asked.policies) == ("GRANT_EXHAUSTED", ("ask",))  # named: never stands in for it
    assert _verdict(grants=(used,)).decision.policies == ()
    revoked = dataclasses.replace(used, grant_id="g6", single_use=False, revoked=True, revoked_at_ms=NOW - 1)
    assert _decide(grants=(revoked,), policy=forbid) == "GRANT_REVOKED"  # only a spent grant is asked
