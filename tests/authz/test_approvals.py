"""Approvals: bound to the exact action and its epoch, one use, a timeout is a deny."""

from __future__ import annotations

import pytest

from handrail.authz import AuthzRpcError, InvalidArgumentError, _cli
from tests.authz.conftest import MakeSidecar, Sidecar, policies_dir

TARGET = "browser:1"
ORIGIN = "https://shop.test"
ASK_PURCHASES = (
    '@id("purchases-need-approval")\n@approval("required")\n@approval_timeout_s("60")\n'
    'forbid (principal, action == Action::"purchase", resource);\n'
)


def _setup(s: Sidecar, **grant: object) -> int:
    epoch = s.client("exe").acquire(TARGET, holder="agent-a", ttl_ms=3_600_000).epoch
    s.client("op").grant("agent-a", TARGET, ["submit", "purchase"], [ORIGIN], **grant)
    return epoch


def _check(s: Sidecar, epoch: int, fingerprint: str = "fp-1", verb: str = "purchase", action_id: str = "act-1"):  # type: ignore[no-untyped-def]
    return s.client("exe").check(
        "agent-a",
        TARGET,
        epoch,
        verb,
        url=ORIGIN + "/checkout?session_token=abc123",
        element_role="button",
        element_name="Buy now",
        fingerprint=fingerprint,
        observation_id="obs-1",
        action_id=action_id,
    )


def test_grant_requires_approval_then_one_use(sidecar: Sidecar) -> None:
    epoch = _setup(sidecar, require_approval_verbs=["purchase"])
    first = _check(sidecar, epoch)
    assert (first.allow, first.reason) == (False, "APPROVAL_REQUIRED") and first.approval_id
    again = _check(sidecar, epoch)
    assert again.reason == "APPROVAL_REQUIRED" and again.approval_id == first.approval_id
    # an ordinary verb of the same grant needs no approval
    assert _check(sidecar, epoch, verb="submit").allow

    pending = sidecar.client("exe").get_approval(first.approval_id)
    assert pending.status == "PENDING" and pending.fingerprint == "fp-1"
    assert pending.deadline_ms == sidecar.clock.now + 300_000  # the default five minutes
    assert pending.verb == "purchase" and pending.element_name == "Buy now"
    assert "abc123" not in pending.url and pending.lease_epoch == epoch

    approved = sidecar.client("op").approve(first.approval_id, note="ok once")
    assert approved.status == "APPROVED" and approved.decided_by == "op"
    # a different action never matches the approval
    other = _check(sidecar, epoch, fingerprint="fp-2")
    assert other.reason == "APPROVAL_REQUIRED" and other.approval_id != first.approval_id
    allowed = _check(sidecar, epoch)
    assert allowed.allow and allowed.approval_id == first.approval_id
    used = sidecar.client("op").get_approval(first.approval_id)
    assert used.status == "USED" and used.used_by_decision_id == allowed.decision_id
    # one use: another action like it asks anew (the same check sent again, its answer
    # lost, gets that allow again: tests/authz/test_check_replay.py)
    later = _check(sidecar, epoch, action_id="act-2")
    assert later.reason == "APPROVAL_REQUIRED" and later.approval_id not in (
        first.approval_id,
        "",
    )


def test_cedar_approval_policy(make_sidecar: MakeSidecar, tmp_path) -> None:  # type: ignore[no-untyped-def]
    s = make_sidecar(policies_dir=policies_dir(tmp_path, **{"ask.cedar": ASK_PURCHASES}))
    epoch = _setup(s)
    d = _check(s, epoch)
    assert d.reason == "APPROVAL_REQUIRED" and d.policies == ("purchases-need-approval",)
    approval = s.client("op").get_approval(d.approval_id)
    assert approval.deadline_ms == s.clock.now + 60_000
    assert approval.policies == ("purchases-need-approval",)
    assert _check(s, epoch, verb="submit").allow


def test_approval_timeout_is_a_deny(sidecar: Sidecar) -> None:
    epoch = _setup(sidecar, require_approval_verbs=["purchase"], approval_timeout_ms=10_000)
    d = _check(sidecar, epoch)
    sidecar.clock.advance(10_000)
    late = _check(sidecar, epoch)
    assert (late.allow, late.reason, late.approval_id) == (
        False,
        "APPROVAL_EXPIRED",
        d.approval_id,
    )
    assert sidecar.client("op").get_approval(d.approval_id).status == "EXPIRED"
    with pytest.raises(AuthzRpcError) as err:
        sidecar.client("op").approve(d.approval_id)
    assert err.value.code_name == "FAILED_PRECONDITION" and "expired" in err.value.details
    assert _check(sidecar, epoch).reason == "APPROVAL_EXPIRED"  # still no, and no new one
    assert len(sidecar.client("op").list_approvals()) == 1


def test_denied_stays_denied(sidecar: Sidecar) -> None:
    epoch = _setup(sidecar, require_approval_verbs=["purchase"])
    d = _check(sidecar, epoch)
    denied = sidecar.client("op").deny(d.approval_id, note="not today")
    assert denied.status == "DENIED" and denied.note == "not today"
    assert _check(sidecar, epoch).reason == "APPROVAL_DENIED"
    with pytest.raises(AuthzRpcError):
        sidecar.client("op").approve(d.approval_id)
    assert sidecar.client("op").deny(d.approval_id).status == "DENIED"  # idempotent


def test_approval_is_bound_to_the_epoch(sidecar: Sidecar) -> None:
    epoch = _setup(sidecar, require_approval_verbs=["purchase"])
    d = _check(sidecar, epoch)
    sidecar.client("op").approve(d.approval_id)
    op = sidecar.client("op")
    lease = op.take_over(TARGET)
    op.hand_back(TARGET, lease.epoch, next_holder="agent-a")
    new_epoch = sidecar.client("exe").acquire(TARGET, holder="agent-a").epoch
    again = _check(sidecar, new_epoch)
    assert again.reason == "APPROVAL_REQUIRED" and again.approval_id != d.approval_id


def test_no_fingerprint_no_approval(sidecar: Sidecar) -> None:
    epoch = _setup(sidecar, require_approval_verbs=["purchase"])
    d = _check(sidecar, epoch, fingerprint="")
    assert d.reason == "APPROVAL_REQUIRED" and d.approval_id == "" and "fingerprint" in d.message


def test_who_may_see_and_decide(sidecar: Sidecar) -> None:
    epoch = _setup(sidecar, require_approval_verbs=["purchase"])
    d = _check(sidecar, epoch)
    assert sidecar.client("agent-a").get_approval(d.approval_id).principal == "agent-a"
    with pytest.raises(AuthzRpcError) as err:
        sidecar.client("agent-b").get_approval(d.approval_id)
    assert err.value.code_name == "NOT_FOUND"  # another principal's id reads as an unknown one
    with pytest.raises(AuthzRpcError) as unknown:
        sidecar.client("agent-b").get_approval("no-such-approval")
    assert unknown.value.details.replace("no-such-approval", d.approval_id) == err.value.details
    assert sidecar.client("agent-b").list_approvals() == []
    for who in ("agent-a", "exe"):
        with pytest.raises(AuthzRpcError) as err:
            sidecar.client(who).approve(d.approval_id)
        assert err.value.code_name == "PERMISSION_DENIED"
    with pytest.raises(AuthzRpcError) as err:
        sidecar.client("op").get_approval("nope")
    assert err.value.code_name == "NOT_FOUND"


def test_list_approvals_by_status(sidecar: Sidecar) -> None:
    epoch = _setup(sidecar, require_approval_verbs=["purchase"])
    a = _check(sidecar, epoch, fingerprint="a").approval_id
    b = _check(sidecar, epoch, fingerprint="b").approval_id
    op = sidecar.client("op")
    op.approve(a)
    assert [x.approval_id for x in op.list_approvals("pending")] == [b]
    assert [x.approval_id for x in op.list_approvals("approved")] == [a]
    assert {x.approval_id for x in op.list_approvals()} == {a, b}
    with pytest.raises(InvalidArgumentError, match=r"^status: "):
        op.list_approvals("bogus")  # refused client-side, like an unknown verb


def test_cli_approve_deny_and_list(sidecar: Sidecar, capsys: pytest.CaptureFixture[str]) -> None:
    epoch = _setup(sidecar, require_approval_verbs=["purchase"])
    a = _check(sidecar, epoch, fingerprint="a").approval_id
    b = _check(sidecar, epoch, fingerprint="b").approval_id
    remote = ["--authz", sidecar.address, "--token", sidecar.tokens["op"]]
    assert _cli.main(["approvals", "--status", "pending", *remote]) == 0
    out = capsys.readouterr().out
    assert a in out and b in out and "Buy now" in out
    assert _cli.main(["approve", a, "--note", "fine", *remote]) == 0
    assert "APPROVED" in capsys.readouterr().out
    assert _cli.main(["deny", b, *remote]) == 0
    assert "DENIED" in capsys.readouterr().out
    assert _cli.main(["approve", b, *remote]) == 1
    assert "denied, not pending" in capsys.readouterr().err
    assert _check(sidecar, epoch, fingerprint="a").allow
