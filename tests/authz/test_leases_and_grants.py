"""Leases, grants and who may call what, over gRPC."""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc
import pytest

from handrail.authz import (
    AsyncAuthzClient,
    AuthzClient,
    AuthzRpcError,
    AuthzUnavailableError,
    serve,
)
from handrail.proto.authz.v1 import authz_pb2, authz_pb2_grpc
from tests.authz.conftest import Sidecar, granted

TARGET = "desktop:1"


def test_renew_keeps_the_epoch(sidecar: Sidecar) -> None:
    agent = sidecar.client("agent-a")
    lease = agent.acquire(TARGET, ttl_ms=1_000)
    assert (lease.holder_kind, lease.holder, lease.epoch) == ("agent", "agent-a", 1)
    sidecar.clock.advance(500)
    renewed = agent.renew(TARGET, lease.epoch, ttl_ms=1_000)
    assert renewed.epoch == 1 and renewed.expires_at_ms == sidecar.clock.now + 1_000
    again = agent.acquire(TARGET)  # acquiring one's own lease renews it
    assert again.epoch == 1
    with pytest.raises(AuthzRpcError) as err:
        agent.renew(TARGET, 7)
    assert err.value.code_name == "FAILED_PRECONDITION"
    with pytest.raises(AuthzRpcError) as err:
        sidecar.client("agent-b").renew(TARGET, 1)
    assert err.value.code_name == "FAILED_PRECONDITION"


def test_release_frees_and_bumps(sidecar: Sidecar) -> None:
    exe = sidecar.client("exe")
    lease = exe.acquire(TARGET, holder="agent-a")
    with pytest.raises(AuthzRpcError):
        exe.acquire(TARGET, holder="agent-b")
    freed = exe.release(TARGET, lease.epoch, holder="agent-a")
    assert freed.holder_kind == "" and freed.epoch == 2
    taken = exe.acquire(TARGET, holder="agent-b")
    assert taken.epoch == 3 and taken.holder == "agent-b"
    assert sidecar.client("agent-a").get_lease(TARGET) == taken


def test_expired_lease_can_be_acquired_by_another(sidecar: Sidecar) -> None:
    sidecar.client("agent-a").acquire(TARGET, ttl_ms=100)
    sidecar.clock.advance(100)
    assert sidecar.client("agent-a").get_lease(TARGET).holder_kind == ""
    assert sidecar.client("agent-b").acquire(TARGET).epoch == 2


def test_lease_ttl_bounds(sidecar: Sidecar) -> None:
    with pytest.raises(AuthzRpcError) as err:
        sidecar.client("agent-a").acquire(TARGET, ttl_ms=3_600_001)
    assert err.value.code_name == "INVALID_ARGUMENT" and err.value.details.startswith("ttl_ms:")
    human = sidecar.client("op").take_over(TARGET)
    assert human.expires_at_ms == sidecar.clock.now + 600_000


def test_agent_acts_for_itself_only(sidecar: Sidecar) -> None:
    with pytest.raises(AuthzRpcError) as err:
        sidecar.client("agent-a").acquire(TARGET, holder="agent-b")
    assert err.value.code_name == "PERMISSION_DENIED"
    with pytest.raises(AuthzRpcError) as err:
        sidecar.client("exe").acquire(TARGET)  # an executor must name the agent
    assert err.value.code_name == "INVALID_ARGUMENT"


def test_agent_cannot_grant_revoke_take_over_or_hand_back(sidecar: Sidecar) -> None:
    agent = sidecar.client("agent-a")
    calls = [
        lambda: agent.grant("agent-a", TARGET, ["submit"], []),
        lambda: agent.revoke("x"),
        lambda: agent.take_over(TARGET),
        lambda: agent.hand_back(TARGET, 0),
    ]
    for call in calls:
        with pytest.raises(AuthzRpcError) as err:
            call()
        assert err.value.code_name == "PERMISSION_DENIED"
        assert "role agent" in err.value.details
    with pytest.raises(AuthzRpcError) as err:
        sidecar.client("exe").grant("agent-a", TARGET, ["submit"], [])
    assert err.value.code_name == "PERMISSION_DENIED" and "role executor" in err.value.details


def test_hand_back_needs_current_epoch(sidecar: Sidecar) -> None:
    op = sidecar.client("op")
    lease = op.take_over(TARGET)
    with pytest.raises(AuthzRpcError) as err:
        op.hand_back(TARGET, lease.epoch - 1)
    assert err.value.code_name == "FAILED_PRECONDITION"


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (("", TARGET, ["submit"], []), "grant.principal"),
        (("agent-a", "", ["submit"], []), "grant.target"),
        (("agent-a", TARGET, [], []), "grant.verbs"),
        (("agent-a", TARGET, ["submit"], ["ftp:/nohost"]), "grant.origins[0]"),
        (
            ("agent-a", TARGET, ["submit"], ["http://a.test", "http://b.test/path"]),
            "grant.origins[1]",
        ),
    ],
)
def test_grant_validation_names_the_field(sidecar: Sidecar, args: tuple, field: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(AuthzRpcError) as err:
        sidecar.client("op").grant(*args)
    assert err.value.code_name == "INVALID_ARGUMENT"
    assert err.value.details.startswith(f"{field}: ")


def test_grant_in_the_past_is_invalid(sidecar: Sidecar) -> None:
    with pytest.raises(AuthzRpcError) as err:
        sidecar.client("op").grant("agent-a", TARGET, ["read"], [], sidecar.clock.now - 1)
    assert err.value.details.startswith("grant.expires_at_ms: ")


def test_grant_round_trip_and_listing(sidecar: Sidecar) -> None:
    op = sidecar.client("op")
    g = op.grant("agent-a", TARGET, ["submit", "input"], ["HTTP://Example.test:80"], note="why")
    assert g.granted_by == "op" and g.origins == ("http://example.test",)
    assert g.verbs == ("submit", "input") and g.created_at_ms == sidecar.clock.now
    op.grant("agent-b", TARGET, ["read"], [])
    assert [x.grant_id for x in granted(op.list_grants(principal="agent-a"))] == [g.grant_id]
    assert len(granted(op.list_grants(target=TARGET))) == 2
    # an agent sees its own grants only
    assert {x.principal for x in sidecar.client("agent-b").list_grants()} == {"agent-b"}
    with pytest.raises(AuthzRpcError) as err:
        op.revoke("no-such-grant")
    assert err.value.code_name == "NOT_FOUND"


def test_who_am_i_with_own_or_other_token(sidecar: Sidecar) -> None:
    exe = sidecar.client("exe")
    assert exe.who_am_i() == ("exe", "executor")
    assert exe.who_am_i(token=sidecar.tokens["agent-a"]) == ("agent-a", "agent")
    with pytest.raises(AuthzRpcError) as err:
        exe.who_am_i(token="")
    assert err.value.code_name == "UNAUTHENTICATED"


def test_async_client(sidecar: Sidecar) -> None:
    async def run() -> None:
        async with AsyncAuthzClient(sidecar.address, sidecar.tokens["exe"]) as exe:
            assert await exe.who_am_i(token=sidecar.tokens["agent-a"]) == ("agent-a", "agent")
            lease = await exe.acquire(TARGET, holder="agent-a")
            d = await exe.check("agent-a", TARGET, lease.epoch, "input")
            assert d.reason == "OUT_OF_SCOPE"
            with pytest.raises(AuthzRpcError):
                await exe.grant("agent-a", TARGET, ["input"], [])

    asyncio.run(run())


def test_unreachable_sidecar_raises_unavailable() -> None:
    with (
        AuthzClient("127.0.0.1:1", "t", timeout_s=0.5) as client,
        pytest.raises(AuthzUnavailableError),
    ):
        client.check("a", "t", 1, "submit")


def test_unknown_verb_is_refused_client_side(sidecar: Sidecar) -> None:
    from handrail.authz import InvalidArgumentError

    with pytest.raises(InvalidArgumentError, match=r"^verb: "):
        sidecar.client("exe").check("agent-a", TARGET, 1, "explode")


def test_every_rpc_is_implemented(sidecar: Sidecar) -> None:
    methods = authz_pb2.DESCRIPTOR.services_by_name["Authz"].methods
    assert len(methods) == 27
    with grpc.insecure_channel(sidecar.address) as channel:
        stub = authz_pb2_grpc.AuthzStub(channel)
        metadata = (("authorization", f"Bearer {sidecar.tokens['admin']}"),)
        for method in methods:
            request_cls = getattr(authz_pb2, method.input_type.name)
            try:
                reply = getattr(stub, method.name)(request_cls(), metadata=metadata, timeout=0.5)
                if method.server_streaming:
                    list(reply)  # runs until the deadline
            except grpc.RpcError as exc:
                if method.server_streaming and exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED:  # type: ignore[attr-defined]
                    continue
                assert exc.code() != grpc.StatusCode.UNIMPLEMENTED, method.name  # type: ignore[attr-defined]
                assert exc.code() != grpc.StatusCode.INTERNAL, (method.name, exc)  # type: ignore[attr-defined]


def test_second_sidecar_on_the_same_port_fails(sidecar: Sidecar, tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="cannot listen"):
        serve(tmp_path / "other", sidecar.address)
