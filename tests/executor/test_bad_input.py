"""Every executor RPC validates its request and names the bad field."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest

from handrail.proto.executor.v1 import executor_pb2 as pb
from handrail.proto.executor.v1 import executor_pb2_grpc as pb_grpc
from handrail.scenarios import SubscriptionApp
from tests.conftest import AgentSetup, Stack

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def raw(stack: Stack) -> Iterator[tuple[pb_grpc.ExecutorStub, tuple[tuple[str, str], ...], str, pb.Observation]]:
    """One session for the whole module: every request here is refused before it acts, so
    the cases share it (a session per case cost half a second each)."""
    principal = stack.add_principal("agent")
    app = SubscriptionApp()
    app.start()
    with stack.operator_client() as ops:  # the start page is judged like any other load
        ops.grant(principal.name, f"browser:{principal.name}", ["navigate"], [app.url])
    channel = grpc.insecure_channel(stack.executor.address)
    stub = pb_grpc.ExecutorStub(channel)
    md = (("authorization", f"Bearer {principal.token}"),)
    try:
        session = stub.OpenSession(
            pb.OpenSessionRequest(target=f"browser:{principal.name}", start_url=app.url + "/"), metadata=md
        )
        obs = stub.Observe(pb.ObserveRequest(session_id=session.session_id), metadata=md)
        yield stub, md, session.session_id, obs
        # nothing above acted: the page is where it was opened and the app took no write
        after = stub.Observe(pb.ObserveRequest(session_id=session.session_id), metadata=md)
        assert after.url == obs.url
        assert not [r for r in app.state()["requests"] if not r.startswith("GET ")]
    finally:
        channel.close()
        stack.close_sessions_of(principal)
        app.stop()


def _code(call: object) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.RpcError) as info:
        call()  # type: ignore[operator]
    err = info.value
    return err.code(), err.details()  # type: ignore[attr-defined]


def _act(obs: pb.Observation, **kw: object) -> pb.ActRequest:
    base: dict[str, object] = {
        "session_id": obs.session_id,
        "observation_id": obs.observation_id,
        "kind": pb.ACTION_CLICK,
        "ref": "e1",
        "idempotency_key": "k",
    }
    base.update(kw)
    return pb.ActRequest(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("change", "code", "field"),
    [
        ({"session_id": ""}, grpc.StatusCode.INVALID_ARGUMENT, "session_id"),
        ({"session_id": "s_nope"}, grpc.StatusCode.NOT_FOUND, "session_id"),
        ({"observation_id": ""}, grpc.StatusCode.INVALID_ARGUMENT, "observation_id"),
        ({"observation_id": "x:1"}, grpc.StatusCode.NOT_FOUND, "observation_id"),
        ({"kind": 0}, grpc.StatusCode.INVALID_ARGUMENT, "kind"),
        ({"kind": 99}, grpc.StatusCode.INVALID_ARGUMENT, "kind"),
        ({"ref": ""}, grpc.StatusCode.INVALID_ARGUMENT, "ref"),
        ({"ref": "button#submit"}, grpc.StatusCode.INVALID_ARGUMENT, "ref"),
        ({"ref": "e99999"}, grpc.StatusCode.NOT_FOUND, "ref"),
        ({"idempotency_key": ""}, grpc.StatusCode.INVALID_ARGUMENT, "idempotency_key"),
        ({"idempotency_key": "k" * 10_000}, grpc.StatusCode.INVALID_ARGUMENT, "idempotency_key"),
        ({"kind": pb.ACTION_FILL, "text": "x" * 70_000}, grpc.StatusCode.INVALID_ARGUMENT, "text"),
        (
            {"kind": pb.ACTION_NAVIGATE, "ref": "", "url": "javascript:alert(1)"},
            grpc.StatusCode.INVALID_ARGUMENT,
            "url",
        ),
        ({"kind": pb.ACTION_NAVIGATE, "ref": ""}, grpc.StatusCode.INVALID_ARGUMENT, "url"),
        ({"timeout_ms": -1}, grpc.StatusCode.INVALID_ARGUMENT, "timeout_ms"),
        (
            {"expect": pb.Expectation(url_matches="(")},
            grpc.StatusCode.INVALID_ARGUMENT,
            "expect.url_matches",
        ),
    ],
)
def test_act_rejects_bad_fields(
    raw: tuple[pb_grpc.ExecutorStub, tuple[tuple[str, str], ...], str, pb.Observation],
    change: dict[str, object],
    code: grpc.StatusCode,
    field: str,
) -> None:
    stub, md, _, obs = raw
    got, details = _code(lambda: stub.Act(_act(obs, **change), metadata=md))
    assert got == code
    assert details.startswith(field + ":"), details


def test_tokens_are_required_and_sessions_are_private(
    raw: tuple[pb_grpc.ExecutorStub, tuple[tuple[str, str], ...], str, pb.Observation], stack: Stack
) -> None:
    stub, _, sid, obs = raw
    code, _ = _code(lambda: stub.Observe(pb.ObserveRequest(session_id=sid)))
    assert code == grpc.StatusCode.UNAUTHENTICATED
    other = stack.add_principal("agent")
    md = (("authorization", f"Bearer {other.token}"),)
    # Another agent's session reads exactly as an unknown one: no existence oracle.
    code, details = _code(lambda: stub.Act(_act(obs), metadata=md))
    assert code == grpc.StatusCode.NOT_FOUND
    unknown_code, unknown = _code(lambda: stub.Act(_act(obs, session_id="s_000000000000"), metadata=md))
    assert unknown_code == code and unknown.replace("s_000000000000", sid) == details
    code, _ = _code(
        lambda: stub.Observe(pb.ObserveRequest(session_id=sid), metadata=(("authorization", "Bearer nope"),))
    )
    assert code == grpc.StatusCode.UNAUTHENTICATED


def test_open_session_validates(stack: Stack, agent: AgentSetup) -> None:
    channel = grpc.insecure_channel(stack.executor.address)
    stub = pb_grpc.ExecutorStub(channel)
    md = (("authorization", f"Bearer {agent.principal.token}"),)
    try:
        for req, field in [
            (pb.OpenSessionRequest(target=""), "target"),
            (pb.OpenSessionRequest(target="t", backend=42), "backend"),  # type: ignore[arg-type]
            (pb.OpenSessionRequest(target="t", start_url="file:///etc/passwd"), "start_url"),
            (pb.OpenSessionRequest(target="t", agent="someone-else"), "agent"),
        ]:
            code, details = _code(lambda req=req: stub.OpenSession(req, metadata=md))
            assert code == grpc.StatusCode.INVALID_ARGUMENT
            assert details.startswith(field + ":"), details
        # An operator's token opens no agent session: the role is wrong, not a field.
        md = (("authorization", f"Bearer {stack.operator.token}"),)
        code, _ = _code(lambda: stub.OpenSession(pb.OpenSessionRequest(target="t"), metadata=md))
        assert code == grpc.StatusCode.PERMISSION_DENIED
    finally:
        channel.close()


def test_every_executor_rpc_is_implemented(stack: Stack) -> None:
    channel = grpc.insecure_channel(stack.executor.address)
    try:
        service = pb.DESCRIPTOR.services_by_name["Executor"]
        for method in service.methods:
            call = channel.unary_unary(
                f"/{service.full_name}/{method.name}",
                request_serializer=lambda m: m.SerializeToString(),
                response_deserializer=lambda b: b,
            )
            req = getattr(pb, method.input_type.name)()
            with pytest.raises(grpc.RpcError) as info:
                call(req, timeout=10)
            assert info.value.code() != grpc.StatusCode.UNIMPLEMENTED, method.name  # type: ignore[attr-defined]
    finally:
        channel.close()


def test_health_and_reflection(stack: Stack) -> None:
    from grpc_health.v1 import health_pb2, health_pb2_grpc
    from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

    channel = grpc.insecure_channel(stack.executor.address)
    try:
        health = health_pb2_grpc.HealthStub(channel)
        resp = health.Check(health_pb2.HealthCheckRequest(service="handrail.executor.v1.Executor"))
        assert resp.status == health_pb2.HealthCheckResponse.SERVING
        refl = reflection_pb2_grpc.ServerReflectionStub(channel)
        answers = list(refl.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")])))
        names = {s.name for s in answers[0].list_services_response.service}
        assert "handrail.executor.v1.Executor" in names
    finally:
        channel.close()
