"""The executor against hostile and mistaken callers: leases and identity, sessions that
end, the error rule's codes and details, and the SDK's errors."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from handrail.executor import (
    ActionFailedError,
    ActionResult,
    BackendError,
    Evidence,
    ExecutorClient,
    ExecutorUnavailableError,
    LeaseHeldError,
    NotFoundError,
    Outcome,
    PermissionDeniedError,
    StaleRefError,
)
from handrail.executor._errors import raise_for_outcome
from handrail.proto.executor.v1 import executor_pb2 as pb
from handrail.proto.executor.v1 import executor_pb2_grpc as pb_grpc
from handrail.recorder import Ledger
from handrail.scenarios import SubscriptionApp
from tests.conftest import Principal, Stack


def _until(check: Callable[[], bool], timeout: float = 10.0) -> None:
    end = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.05)


def _granted(stack: Stack, app: SubscriptionApp, target: str, *prefixes: str) -> list[Principal]:
    agents = [stack.add_principal("agent", p) for p in prefixes]
    with stack.operator_client() as ops:
        for agent in agents:
            ops.grant(agent.name, target, ["navigate", "submit"], [app.url])  # navigate: the start page
    return agents


def _lease_holder(stack: Stack, target: str) -> str:
    with stack.operator_client() as ops:
        return ops.get_lease(target).holder


def test_a_failed_stale_ref_raises_stale_ref_error() -> None:
    result = ActionResult(
        "a_1", Outcome.FAILED, "STALE_REF", "not dispatched: ref e3 no longer resolves", False, Evidence.NONE, "k"
    )
    with pytest.raises(StaleRefError) as err:
        raise_for_outcome(result)
    assert isinstance(err.value, ActionFailedError)  # and still a failure, for who catches that
    assert str(err.value).count("not dispatched") == 1


def test_an_unreachable_executor_is_an_sdk_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens here once closed
    with (
        ExecutorClient(f"127.0.0.1:{port}", "token", timeout_s=2) as client,
        pytest.raises(ExecutorUnavailableError) as err,
    ):
        client.open_session(target="browser:x")
    assert type(err.value).__module__.startswith("handrail.")  # never grpc._channel's


@pytest.mark.browser
def test_a_second_agent_cannot_squat_a_target_another_holds(stack: Stack, app: SubscriptionApp) -> None:
    target = f"browser:squat-{time.monotonic_ns()}"
    first, second = _granted(stack, app, target, "holder", "squatter")
    with (
        ExecutorClient(stack.executor.address, first.token) as a,
        ExecutorClient(stack.executor.address, second.token) as b,
    ):
        session = a.open_session(target=target, start_url=app.url + "/")
        assert session.info.lease_epoch > 0 and session.latest is not None  # held, observed
        with pytest.raises(LeaseHeldError) as err:
            b.open_session(target=target, start_url=app.url + "/")
        assert err.value.code_name == "FAILED_PRECONDITION" and err.value.reason == "LEASE_HELD"
        # The first agent's hold is untouched: its writes still go.
        r = session.click(session.find("button", "Pause plan"))
        assert r.result.outcome is Outcome.DONE, r.result
        assert _lease_holder(stack, target) == first.name
        session.close()


@pytest.mark.browser
def test_open_session_returns_the_first_observation_and_says_why_no_lease(stack: Stack, app: SubscriptionApp) -> None:
    agent = stack.add_principal("agent", "nogrant")
    with ExecutorClient(stack.executor.address, agent.token) as client:
        session = client.open_session(target=f"browser:{agent.name}", start_url=app.url + "/")
        assert session.info.lease_epoch == 0 and session.info.lease_reason == "OUT_OF_SCOPE"
        # Observed, on its blank tab: with no lease nothing is judged, so the start page is not loaded.
        assert session.latest is not None and "Pause plan" not in session.snapshot
        assert [tab.url for tab in session.latest.tabs] == ["about:blank"]
        r = session.navigate(app.url + "/")  # acting right away works: it cites the first observation
        assert r.result.outcome is Outcome.REFUSED and not r.result.execution_started
        session.close()


@pytest.mark.browser
def test_status_codes_and_details(stack: Stack, app: SubscriptionApp) -> None:
    agent = stack.add_principal("agent", "codes")
    with stack.operator_client() as ops:  # the start page is judged first: granted, it fails to load
        ops.grant(agent.name, "t", ["navigate"], ["http://127.0.0.1:1"])
    channel = grpc.insecure_channel(stack.executor.address)
    stub = pb_grpc.ExecutorStub(channel)  # type: ignore[no-untyped-call]
    md = (("authorization", f"bearer {agent.token}"),)  # the scheme in any case
    try:
        with pytest.raises(grpc.RpcError) as err:
            stub.OpenSession(pb.OpenSessionRequest(target="t", start_url="http://127.0.0.1:1/"), metadata=md)
        assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION  # type: ignore[attr-defined]
        status = rpc_status.from_call(err.value)  # type: ignore[arg-type]
        info = error_details_pb2.ErrorInfo()
        assert status is not None and status.details[0].Unpack(info)
        assert (info.reason, info.domain) == ("BACKEND", "executor.handrail")
        with pytest.raises(grpc.RpcError) as err:
            stub.Observe(pb.ObserveRequest(session_id="x" * 300), metadata=md)
        status = rpc_status.from_call(err.value)  # type: ignore[arg-type]
        assert status is not None and status.details[0].Unpack(info) and info.metadata["field"] == "session_id"
        assert not err.value.details().startswith("INVALID_ARGUMENT")  # type: ignore[attr-defined]
    finally:
        channel.close()
    with ExecutorClient(stack.executor.address, agent.token) as client:
        with pytest.raises(BackendError):
            client.open_session(target="t", start_url="http://127.0.0.1:1/")
        with pytest.raises(NotFoundError) as nf:
            client._call(("Observe", pb.ObserveRequest(session_id="s_nope"), lambda m: m))
        assert nf.value.field == "session_id" and str(nf.value).count("NOT_FOUND") == 1
    with ExecutorClient(stack.executor.address, stack.operator.token) as ops, pytest.raises(PermissionDeniedError):
        ops.open_session(target="t")


@pytest.mark.browser
def test_a_gone_agents_session_ends_and_its_lease_goes_back(stack: Stack, app: SubscriptionApp) -> None:
    target = f"browser:ttl-{time.monotonic_ns()}"
    (agent,) = _granted(stack, app, target, "ttl")
    with ExecutorClient(stack.executor.address, agent.token) as client:
        session = client.open_session(target=target, start_url=app.url + "/", session_ttl_ms=1_000)
        assert _lease_holder(stack, target) == agent.name
        # No call within the TTL: the executor closes it and frees the lease.

        def closes() -> list[object]:
            with Ledger(stack.data_dir / "ledger.sqlite", read_only=True) as ledger:
                return [
                    c.body.get("reason") for c in ledger.entries(session_id=session.session_id, kind="session_close")
                ]

        _until(lambda: closes() == ["ttl"])
        assert _lease_holder(stack, target) == ""
        with pytest.raises(NotFoundError):
            session.observe()


@pytest.mark.browser
def test_an_attach_stream_that_closes_ends_the_session(stack: Stack, app: SubscriptionApp) -> None:
    target = f"browser:attach-{time.monotonic_ns()}"
    (agent,) = _granted(stack, app, target, "attach")
    with ExecutorClient(stack.executor.address, agent.token) as client:
        session = client.open_session(target=target, start_url=app.url + "/", session_ttl_ms=60_000)
    channel = grpc.insecure_channel(stack.executor.address)
    stub = pb_grpc.ExecutorStub(channel)  # type: ignore[no-untyped-call]
    md = (("authorization", f"Bearer {agent.token}"),)
    events = stub.Attach(pb.AttachRequest(session_id=session.session_id), metadata=md)
    assert next(events).kind == pb.SESSION_EVENT_ATTACHED
    events.cancel()  # the agent's process went away
    channel.close()

    def closes() -> list[object]:
        with Ledger(stack.data_dir / "ledger.sqlite", read_only=True) as ledger:
            return [c.body.get("reason") for c in ledger.entries(session_id=session.session_id, kind="session_close")]

    _until(lambda: closes() == ["detached"])
    assert _lease_holder(stack, target) == ""


@pytest.mark.browser
def test_a_lease_change_is_written_once_and_every_session_of_the_target_shows_it(
    stack: Stack, app: SubscriptionApp
) -> None:
    target = f"browser:shared-{time.monotonic_ns()}"
    (agent,) = _granted(stack, app, target, "twice")
    with ExecutorClient(stack.executor.address, agent.token) as client:
        one = client.open_session(target=target, start_url=app.url + "/")
        two = client.open_session(target=target, start_url=app.url + "/")
        with stack.operator_client() as ops:
            ops.take_over(target, note="a person steps in")
        ledger_path = stack.data_dir / "ledger.sqlite"

        def takeovers() -> list[int]:
            with Ledger(ledger_path, read_only=True) as ledger:
                return [
                    e.seq
                    for e in ledger.entries(kind="lease_change")
                    if e.body.get("target") == target and e.body.get("event") == "takeover"
                ]

        _until(lambda: len(takeovers()) == 1)
        (seq,) = takeovers()
        with Ledger(ledger_path, read_only=True) as ledger:
            for session in (one, two):
                assert seq in [e.seq for e in ledger.session_entries(session.session_id)]
        one.close()
        two.close()


@pytest.mark.browser
def test_a_revoked_agent_is_refused_on_its_next_call(stack: Stack, app: SubscriptionApp) -> None:
    from handrail.authz import Store
    from handrail.executor import UnauthenticatedError

    target = f"browser:revoked-{time.monotonic_ns()}"
    (agent,) = _granted(stack, app, target, "revoked")
    with ExecutorClient(stack.executor.address, agent.token) as client:
        session = client.open_session(target=target, start_url=app.url + "/")
        with Store(stack.data_dir / "authz.sqlite") as store:  # as `handrail authz principal revoke` does
            store.revoke_principal(agent.name)
        with pytest.raises(UnauthenticatedError) as err:
            session.observe()
        assert err.value.reason == "TOKEN_REVOKED"
        with pytest.raises(UnauthenticatedError):
            session.click(session.find("button", "Pause plan"))
    assert app.state()["requests"].get("POST /pause", 0) == 0
