"""The sidecar against hostile and mistaken callers: identity, grants before leases, the
error rule's codes and details."""

from __future__ import annotations

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from handrail.authz import (
    AuthzClient,
    AuthzRpcError,
    InvalidArgumentError,
    NotFoundError,
    PermissionDeniedError,
    UnauthenticatedError,
)
from handrail.authz._cli import main as authz_cli
from handrail.proto.authz.v1 import authz_pb2 as pb
from handrail.proto.authz.v1 import authz_pb2_grpc
from tests.authz.conftest import MakeSidecar, Sidecar

TARGET = "browser:id"


def _info(exc: grpc.RpcError) -> error_details_pb2.ErrorInfo:
    status = rpc_status.from_call(exc)  # type: ignore[arg-type]
    assert status is not None, "no google.rpc.Status in the details"
    info = error_details_pb2.ErrorInfo()
    assert status.details[0].Unpack(info)
    return info


def test_only_a_grant_holder_may_acquire_a_lease(make_sidecar: MakeSidecar) -> None:
    s = make_sidecar(lease_grants=False)
    for who, holder in (("agent-a", ""), ("exe", "agent-a"), ("op", "agent-b")):
        with pytest.raises(PermissionDeniedError) as err:
            s.client(who).acquire(TARGET, holder=holder, ttl_ms=3_600_000)
        assert err.value.reason == "NO_GRANT"
    assert s.client("op").get_lease(TARGET).holder == ""  # nobody squats it
    s.client("op").grant("agent-a", TARGET, ["read"], [])
    assert s.client("agent-a").acquire(TARGET).holder == "agent-a"
    with pytest.raises(PermissionDeniedError):  # a grant of agent-a is not one of agent-b
        s.client("exe").acquire(TARGET, holder="agent-b")


def test_unknown_principals_are_refused_in_grants_and_hand_backs(sidecar: Sidecar) -> None:
    op = sidecar.client("op")
    with pytest.raises(NotFoundError) as err:
        op.grant("agnet-a", TARGET, ["submit"], [])
    assert err.value.field == "grant.principal"
    with pytest.raises(NotFoundError) as err:
        op.grant("op", TARGET, ["submit"], [])  # an operator is no agent
    epoch = op.take_over(TARGET).epoch
    with pytest.raises(NotFoundError) as err:
        op.hand_back(TARGET, epoch, next_holder="nobody")
    assert err.value.field == "next_holder"
    assert op.hand_back(TARGET, epoch, next_holder="agent-b").next_holder == "agent-b"
    code = authz_cli(
        ["handback", TARGET, "--next", "nobody", "--authz", sidecar.address, "--token", sidecar.tokens["op"]]
    )
    assert code == 1


def test_revocation_and_rotation_act_on_the_next_call(sidecar: Sidecar) -> None:
    agent = sidecar.client("agent-a")
    assert agent.who_am_i() == ("agent-a", "agent")
    admin = sidecar.client("admin")
    _, token = admin.rotate_token("agent-a")
    with pytest.raises(UnauthenticatedError) as err:
        agent.who_am_i()  # the old token: refused at once
    assert err.value.reason == "TOKEN_UNKNOWN"
    assert agent.who_am_i(token) == ("agent-a", "agent")
    admin.revoke_principal("agent-a")
    with pytest.raises(UnauthenticatedError) as err:
        agent.who_am_i(token)
    assert err.value.reason == "TOKEN_REVOKED"
    # An executor's check asserting the revoked agent is refused, and logged.
    d = sidecar.client("exe").check("agent-a", TARGET, 0, "submit")
    assert not d.allow and d.reason == "UNAUTHENTICATED"
    states = {p.name: p.state(sidecar.clock.now) for p in sidecar.client("op").list_principals()}
    assert states["agent-a"] == "revoked" and states["agent-b"] == "active"
    with pytest.raises(PermissionDeniedError):
        sidecar.client("op").revoke_principal("agent-b")  # admins only


def test_expiry_acts_on_the_next_call(sidecar: Sidecar) -> None:
    token = sidecar.server.store.add_principal("short", "agent", expires_at_ms=sidecar.clock.now + 1_000)
    with AuthzClient(sidecar.address, token) as c:
        assert c.who_am_i()[0] == "short"
        sidecar.clock.advance(1_000)
        with pytest.raises(UnauthenticatedError) as err:
            c.who_am_i()
        assert err.value.reason == "TOKEN_EXPIRED"


def test_a_revocation_on_the_file_reaches_the_running_sidecar(sidecar: Sidecar) -> None:
    """``handrail authz principal revoke`` edits the store (the file, or the PostgreSQL
    database every replica reads); the sidecar's remembered token lookups must not outlive it."""
    agent = sidecar.client("agent-b")
    assert agent.who_am_i()[0] == "agent-b"  # remembered now
    assert authz_cli(["authz", "principal", "revoke", "agent-b", *sidecar.store_args]) == 0
    with pytest.raises(UnauthenticatedError):
        agent.who_am_i()


def test_principal_commands(sidecar: Sidecar, capsys: pytest.CaptureFixture[str]) -> None:
    data = sidecar.store_args
    assert authz_cli(["authz", "principal", "add", "cli-agent", "--role", "agent", "--ttl", "60", *data]) == 0
    token = capsys.readouterr().out.strip()
    assert authz_cli(["authz", "principal", "rotate", "cli-agent", *data]) == 0
    new = capsys.readouterr().out.strip()
    assert new != token
    with AuthzClient(sidecar.address, new) as c:
        assert c.who_am_i()[0] == "cli-agent"
    assert authz_cli(["authz", "principal", "list", *data]) == 0
    listing = capsys.readouterr().out
    assert "cli-agent\tagent\tactive" in listing
    assert authz_cli(["authz", "principal", "revoke", "nobody", *data]) == 1
    assert capsys.readouterr().err.count("\n") == 1  # one line, no traceback


def test_a_chosen_token_that_begins_with_a_dash_is_refused(
    sidecar: Sidecar, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--token -x`` is a flag with no value to every command line (``handrail mcp``, the
    executor, the CLI): a token one could not pass there is refused when chosen, in both
    stores, and a generated one never begins so (a test token from ``token_urlsafe`` once
    did, and ``handrail mcp`` exited at start)."""
    store = sidecar.server.store
    with pytest.raises(InvalidArgumentError) as err:
        store.add_principal("dash-agent", "agent", "-starts-like-a-flag")
    assert err.value.field == "token"
    store.add_principal("dash-agent", "agent", "fine-token-0123456789")
    with pytest.raises(InvalidArgumentError):
        store.rotate_token("dash-agent", "-also-a-flag", 0)
    assert all(not store.add_principal(f"gen-{i}", "agent").startswith("-") for i in range(64))
    data = sidecar.store_args
    assert authz_cli(["authz", "principal", "add", "cli-dash", "--role", "agent", "--token=-x", *data]) == 1
    said = capsys.readouterr().err
    assert said.count("\n") == 1 and "token" in said


def _raw(
    sidecar: Sidecar, who: str = "admin", scheme: str = "Bearer"
) -> tuple[authz_pb2_grpc.AuthzStub, tuple[tuple[str, str], ...]]:
    channel = grpc.insecure_channel(sidecar.address)
    return authz_pb2_grpc.AuthzStub(channel), (("authorization", f"{scheme} {sidecar.tokens[who]}"),)  # type: ignore[no-untyped-call]


def test_an_unlisted_enum_number_is_invalid_argument_naming_the_field(sidecar: Sidecar) -> None:
    stub, md = _raw(sidecar)
    for call, field in (
        (lambda: stub.ListDecisions(pb.ListDecisionsRequest(reason=99), metadata=md), "reason"),  # type: ignore[arg-type]
        (lambda: stub.ListApprovals(pb.ListApprovalsRequest(status=42), metadata=md), "status"),  # type: ignore[arg-type]
        (lambda: stub.Check(pb.CheckRequest(principal="agent-a", target="t", verb=77), metadata=md), "verb"),  # type: ignore[arg-type]
    ):
        with pytest.raises(grpc.RpcError) as err:
            call()
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT  # type: ignore[attr-defined]
        info = _info(err.value)
        assert (info.reason, info.domain, info.metadata["field"]) == ("INVALID_ARGUMENT", "authz.handrail", field)


def test_bytes_that_are_not_the_message_are_invalid_argument(sidecar: Sidecar) -> None:
    channel = grpc.insecure_channel(sidecar.address)
    raw = channel.unary_unary(
        "/handrail.authz.v1.Authz/GetLease", request_serializer=bytes, response_deserializer=bytes
    )
    for body in (b"\xff\xff\xff", b"\x0a\x03\xff\xfe\xfd", b"\x0a\x80\x80\x80\x80\x10"):
        with pytest.raises(grpc.RpcError) as err:
            raw(body, metadata=(("authorization", f"Bearer {sidecar.tokens['admin']}"),), timeout=5)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, body  # type: ignore[attr-defined]
        assert _info(err.value).reason == "MALFORMED_REQUEST"
    channel.close()


def test_every_error_carries_error_info_and_says_its_code_once(sidecar: Sidecar) -> None:
    stub, md = _raw(sidecar, "agent-a", scheme="bEaReR")  # the scheme in any case
    assert stub.WhoAmI(pb.WhoAmIRequest(), metadata=md).principal == "agent-a"
    cases = [
        (lambda: stub.WhoAmI(pb.WhoAmIRequest()), "UNAUTHENTICATED", "TOKEN_MISSING"),
        (lambda: stub.WhoAmI(pb.WhoAmIRequest(), metadata=(("authorization", "Bearer nope"),)), "UNAUTHENTICATED", "TOKEN_UNKNOWN"),
        (lambda: stub.Grant(pb.GrantRequest(), metadata=md), "PERMISSION_DENIED", "PERMISSION_DENIED"),
        (lambda: stub.GetApproval(pb.GetApprovalRequest(approval_id="x"), metadata=md), "NOT_FOUND", "NOT_FOUND"),
    ]  # fmt: skip
    for call, code, reason in cases:
        with pytest.raises(grpc.RpcError) as err:
            call()
        assert err.value.code().name == code  # type: ignore[attr-defined]
        assert _info(err.value).reason == reason
        assert not err.value.details().startswith(code)  # type: ignore[attr-defined]
    # The client keeps the message as it is: the code, once.
    with pytest.raises(AuthzRpcError) as client_err:
        sidecar.client("agent-a").grant("agent-a", TARGET, ["submit"], [])
    assert str(client_err.value).count("PERMISSION_DENIED") == 1


def test_the_client_maps_each_code_to_its_error(sidecar: Sidecar) -> None:
    with pytest.raises(InvalidArgumentError) as err:
        sidecar.client("op").grant("agent-a", "", ["submit"], [])
    assert isinstance(err.value, AuthzRpcError) and err.value.field == "grant.target"
