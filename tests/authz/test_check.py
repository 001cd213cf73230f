"""Check over gRPC: the allow and every deny reason, in the order the sidecar judges them."""

from __future__ import annotations

import pytest

from handrail.authz import AuthzClient, AuthzRpcError, ElementContext
from tests.authz.conftest import Sidecar, granted

TARGET = "browser:1"
ORIGIN = "http://127.0.0.1:8000"
URL = ORIGIN + "/account"


def _setup(s: Sidecar, verbs: tuple[str, ...] = ("submit", "input")) -> tuple[int, str]:
    """agent-a holds the lease of TARGET and a grant for ``verbs`` on ORIGIN."""
    lease = s.client("exe").acquire(TARGET, holder="agent-a")
    grant = s.client("op").grant("agent-a", TARGET, list(verbs), [ORIGIN], note="test")
    return lease.epoch, grant.grant_id


def _check(s: Sidecar, epoch: int, verb: str = "submit", **kw: object) -> object:
    return s.client("exe").check("agent-a", TARGET, epoch, verb, url=URL, **kw)  # type: ignore[arg-type]


def test_allow(sidecar: Sidecar) -> None:
    epoch, grant_id = _setup(sidecar)
    d = sidecar.client("exe").check(
        "agent-a", TARGET, epoch, "submit", url=URL, element_role="button", element_name="Save"
    )
    assert d.allow and d.reason == "ALLOW"
    assert d.grant_id == grant_id
    assert d.lease_epoch == epoch == 1
    assert len(d.decision_id) == 32 and int(d.decision_id, 16)
    assert d.policies == ()


def test_agent_may_check_for_itself_only(sidecar: Sidecar) -> None:
    epoch, _ = _setup(sidecar)
    assert sidecar.client("agent-a").check("agent-a", TARGET, epoch, "submit", url=URL).allow
    with pytest.raises(AuthzRpcError) as err:
        sidecar.client("agent-b").check("agent-a", TARGET, epoch, "submit", url=URL)
    assert err.value.code_name == "PERMISSION_DENIED"


def test_operator_may_not_check(sidecar: Sidecar) -> None:
    with pytest.raises(AuthzRpcError) as err:
        sidecar.client("op").check("agent-a", TARGET, 1, "submit", url=URL)
    assert err.value.code_name == "PERMISSION_DENIED"
    assert "operator" in err.value.details


def test_unknown_token_is_unauthenticated(sidecar: Sidecar) -> None:
    _setup(sidecar)
    with AuthzClient(sidecar.address, "not-a-token") as bad:
        with pytest.raises(AuthzRpcError) as err:
            bad.check("agent-a", TARGET, 1, "submit", url=URL)
        assert err.value.code_name == "UNAUTHENTICATED"
        with pytest.raises(AuthzRpcError) as err:
            bad.get_lease(TARGET)
        assert err.value.code_name == "UNAUTHENTICATED"
    with AuthzClient(sidecar.address, "") as empty:
        with pytest.raises(AuthzRpcError) as err:
            empty.who_am_i()
        assert err.value.code_name == "UNAUTHENTICATED"
    # the refused check is logged too
    rows = _decisions(sidecar)
    assert [r[1] for r in rows] == ["UNAUTHENTICATED"]


def test_no_lease(sidecar: Sidecar) -> None:
    sidecar.client("op").grant("agent-a", TARGET, ["submit"], [ORIGIN])
    d = _check(sidecar, 0)
    assert not d.allow and d.reason == "NO_LEASE"  # type: ignore[attr-defined]


def test_expired_lease_is_no_lease(sidecar: Sidecar) -> None:
    epoch, _ = _setup(sidecar)
    sidecar.clock.advance(30_001)
    assert _check(sidecar, epoch).reason == "NO_LEASE"  # type: ignore[attr-defined]


def test_lease_held_by_other_agent_is_no_lease(sidecar: Sidecar) -> None:
    sidecar.client("op").grant("agent-a", TARGET, ["submit"], [ORIGIN])
    lease = sidecar.client("agent-b").acquire(TARGET)
    assert _check(sidecar, lease.epoch).reason == "NO_LEASE"  # type: ignore[attr-defined]


def test_stale_epoch(sidecar: Sidecar) -> None:
    epoch, _ = _setup(sidecar)
    d = _check(sidecar, epoch + 5)
    assert d.reason == "STALE_EPOCH" and d.lease_epoch == epoch  # type: ignore[attr-defined]


def test_takeover_bumps_epoch_and_old_epoch_is_refused(sidecar: Sidecar) -> None:
    epoch, _ = _setup(sidecar)
    assert _check(sidecar, epoch).allow  # type: ignore[attr-defined]
    lease = sidecar.client("op").take_over(TARGET, note="my turn")
    assert lease.epoch == epoch + 1 and lease.holder_kind == "human" and lease.holder == "op"
    d = _check(sidecar, epoch)
    assert d.reason == "HELD_BY_HUMAN" and d.lease_epoch == epoch + 1  # type: ignore[attr-defined]
    # the agent cannot take it back while the human holds it
    with pytest.raises(AuthzRpcError) as err:
        sidecar.client("agent-a").acquire(TARGET)
    assert err.value.code_name == "FAILED_PRECONDITION" and "'op'" in err.value.details
    # hand back: epoch bumps again; the old epoch is now stale once re-acquired
    freed = sidecar.client("op").hand_back(TARGET, lease.epoch, next_holder="agent-a")
    assert freed.epoch == epoch + 2 and freed.holder_kind == "" and freed.next_holder == "agent-a"
    with pytest.raises(AuthzRpcError):
        sidecar.client("agent-b").acquire(TARGET)  # reserved for agent-a
    again = sidecar.client("agent-a").acquire(TARGET)
    assert again.epoch == epoch + 3
    assert _check(sidecar, epoch).reason == "STALE_EPOCH"  # type: ignore[attr-defined]
    assert _check(sidecar, again.epoch).allow  # type: ignore[attr-defined]


def test_out_of_scope(sidecar: Sidecar) -> None:
    epoch, _ = _setup(sidecar, verbs=("input",))
    assert _check(sidecar, epoch, "submit").reason == "OUT_OF_SCOPE"  # type: ignore[attr-defined]
    other = sidecar.client("exe").check("agent-a", TARGET, epoch, "input", url="https://evil.test/")
    assert other.reason == "OUT_OF_SCOPE"


def test_navigate_checks_destination_origin(sidecar: Sidecar) -> None:
    epoch, _ = _setup(sidecar, verbs=("navigate",))
    exe = sidecar.client("exe")
    assert exe.check("agent-a", TARGET, epoch, "navigate", url=ORIGIN + "/x").allow
    d = exe.check("agent-a", TARGET, epoch, "navigate", url="http://127.0.0.1:9999/x")
    assert d.reason == "OUT_OF_SCOPE"


def test_grant_without_origins_allows_any_origin(sidecar: Sidecar) -> None:
    lease = sidecar.client("exe").acquire(TARGET, holder="agent-a")
    sidecar.client("op").grant("agent-a", TARGET, ["read"], [])
    d = sidecar.client("exe").check("agent-a", TARGET, lease.epoch, "read", url="https://a.test/")
    assert d.allow


def test_grant_expired_on_the_next_check(sidecar: Sidecar) -> None:
    lease = sidecar.client("exe").acquire(TARGET, holder="agent-a", ttl_ms=3_600_000)
    expires = sidecar.clock.now + 1_000
    sidecar.client("op").grant("agent-a", TARGET, ["submit"], [ORIGIN], expires_at_ms=expires)
    assert _check(sidecar, lease.epoch).allow  # type: ignore[attr-defined]
    sidecar.clock.advance(1_000)
    assert _check(sidecar, lease.epoch).reason == "GRANT_EXPIRED"  # type: ignore[attr-defined]


def test_grant_revoked_on_the_next_check(sidecar: Sidecar) -> None:
    epoch, grant_id = _setup(sidecar)
    assert _check(sidecar, epoch).allow  # type: ignore[attr-defined]
    revoked = sidecar.client("op").revoke(grant_id)
    assert revoked.revoked
    d = _check(sidecar, epoch)
    assert d.reason == "GRANT_REVOKED" and d.grant_id == grant_id  # type: ignore[attr-defined]
    assert granted(sidecar.client("op").list_grants("agent-a")) == []
    assert granted(sidecar.client("op").list_grants("agent-a", include_inactive=True))[0].revoked


def test_policy_forbid_names_the_policy(sidecar: Sidecar) -> None:
    epoch, grant_id = _setup(sidecar)
    d = _check(sidecar, epoch, element_role="button", element_name="Delete account")
    assert d.reason == "POLICY_FORBID"  # type: ignore[attr-defined]
    assert d.policies == ("destructive-needs-delete-grant",)  # type: ignore[attr-defined]
    assert d.grant_id == grant_id  # type: ignore[attr-defined]
    p = _check(sidecar, epoch, "input", element_role="textbox", password_field=True)
    assert p.policies == ("password-needs-explicit-grant",)  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"principal": ""}, "principal"),
        ({"target": ""}, "target"),
        ({"lease_epoch": -1}, "lease_epoch"),
        ({"url": "not a url"}, "resource.url"),
        ({"url": "http://host:99999/"}, "resource.url"),
        ({"element_name": "x" * 5000}, "resource.element_name"),
        ({"action_id": "x" * 5000}, "action_id"),
        ({"context": ElementContext(dialog_title="x" * 5000)}, "resource.dialog_title"),
        ({"context": ElementContext(visible_text="x" * 5000)}, "resource.visible_text"),
        # a NUL: PostgreSQL's text cannot hold one, and libpq's parameters end at it (the
        # log would have named the agent "agent-a" for "agent-a\0evil")
        ({"principal": "agent-a\0evil"}, "principal"),
        ({"target": TARGET + "\0"}, "target"),
        ({"element_name": "Save\0"}, "resource.element_name"),
        ({"context": ElementContext(heading="\0")}, "resource.heading"),
    ],
)
def test_invalid_check_names_the_field(sidecar: Sidecar, kwargs: dict[str, object], field: str) -> None:
    args: dict[str, object] = {"principal": "agent-a", "target": TARGET, "lease_epoch": 1}
    args.update(kwargs)
    with pytest.raises(AuthzRpcError) as err:
        sidecar.client("exe").check(
            args.pop("principal"),  # type: ignore[arg-type]
            args.pop("target"),  # type: ignore[arg-type]
            args.pop("lease_epoch"),  # type: ignore[arg-type]
            "submit",
            **args,  # type: ignore[arg-type]
        )
    assert err.value.code_name == "INVALID_ARGUMENT"
    assert err.value.details.startswith(f"{field}: ")
    assert sidecar.server.store.count_decisions() == 0  # refused before anything is decided


def test_a_nul_in_any_request_is_invalid_argument_naming_the_field(sidecar: Sidecar) -> None:
    """Every RPC, on both stores: never INTERNAL (PostgreSQL's text cannot hold a NUL)."""
    op = sidecar.client("op")
    calls = {
        "grant.note": lambda: op.grant("agent-a", TARGET, ["submit"], [ORIGIN], note="n\0"),
        "grant.origins": lambda: op.grant("agent-a", TARGET, ["submit"], [ORIGIN, "https://\0.test"]),
        "grant_id": lambda: op.revoke("g\0"),
        "principal": lambda: op.list_grants(principal="agent-a\0"),
        "target": lambda: op.take_over(TARGET + "\0"),
        "targets": lambda: next(iter(op.watch([TARGET, "t\0"]))),
    }
    for field, call in calls.items():
        with pytest.raises(AuthzRpcError) as err:
            call()
        assert (err.value.code_name, err.value.details) == (
            "INVALID_ARGUMENT",
            f"{field}: must not contain NUL (U+0000)",
        )
    assert op.grant("agent-a", TARGET, ["submit"], [ORIGIN], note="fine").note == "fine"  # served on


def test_unspecified_and_unknown_verb(sidecar: Sidecar) -> None:
    from handrail.authz._wire_calls import Call
    from handrail.proto.authz.v1 import authz_pb2 as pb

    client = sidecar.client("exe")
    for verb in (0, 77):
        request = pb.CheckRequest(principal="agent-a", target=TARGET, lease_epoch=1, verb=verb)
        with pytest.raises(AuthzRpcError) as err:
            client._send(Call("Check", request, lambda r: r))
        assert err.value.code_name == "INVALID_ARGUMENT"
        assert err.value.details.startswith("verb: ")


def _decisions(s: Sidecar) -> list[tuple[object, ...]]:
    records = reversed(s.server.store.list_decisions(limit=1000))
    return [
        (
            int(r.decision.allow),
            r.decision.reason,
            list(r.decision.policies),
            r.caller,
            r.request.principal,
            r.request.verb,
        )
        for r in records
    ]


def test_every_decision_is_logged(sidecar: Sidecar) -> None:
    epoch, _ = _setup(sidecar)
    _check(sidecar, epoch)
    _check(sidecar, epoch + 1)
    _check(sidecar, epoch, element_name="delete me")
    sidecar.client("agent-a").check("agent-a", TARGET, epoch, "download", url=URL)
    with pytest.raises(AuthzRpcError):
        _check(sidecar, -1)  # invalid: no decision
    rows = _decisions(sidecar)
    assert [r[1] for r in rows] == ["ALLOW", "STALE_EPOCH", "POLICY_FORBID", "OUT_OF_SCOPE"]
    assert rows[0][0] == 1 and rows[1][0] == 0
    assert rows[2][2] == ["destructive-needs-delete-grant"]
    assert rows[0][3] == "exe" and rows[3][3] == "agent-a"
    assert sidecar.server.store.count_decisions() == 4
