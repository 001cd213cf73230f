"""The wire: one request builder (``_wire``), request checks (``_validate``), errors at one edge.

The SDK's requests round-trip through the servicer's checks to the very data they were
built from; an SDK call against an in-process executor (fake backend, real sidecar and
ledger) goes through every layer but the browser; a gRPC error becomes ``ExecutorRpcError``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc
import pytest

from handrail import ActionKind, Evidence, Outcome, Reason, Verdict
from handrail.executor import (
    ActionResult,
    ActionSpec,
    AsyncExecutorClient,
    DesktopState,
    ExecutorClient,
    ExecutorRpcError,
    ExecutorUnavailableError,
    Expectation,
    Observation,
    WaitFor,
    WindowInfo,
    _validate,
    _wire,
)
from handrail.executor._service import ExecutorServicer
from handrail.proto.executor.v1 import executor_pb2_grpc as pb_grpc
from tests.executor.inproc import Sidecar, running, start_sidecar


def test_an_action_round_trips_through_the_builder_and_the_checks() -> None:
    spec = ActionSpec(
        kind=ActionKind.DRAG,
        observation_id="s_1:3",
        idempotency_key="k-1",
        x=10,
        y=20,
        to_x=30,
        to_y=40,
        button="right",
        expect=Expectation(text_visible="Moved", within_ms=500),
        timeout_ms=2_000,
        approval_wait_ms=1_000,
        skip_reobserve=True,
    )
    method, request, _ = _wire.act("s_1", spec)
    assert method == "Act"
    assert _validate.action_spec(request) == spec
    wait = ActionSpec(
        kind=ActionKind.WAIT_FOR,
        observation_id="s_1:3",
        idempotency_key="k-2",
        wait_for=WaitFor(text="Done", gone=True),
    )
    assert _validate.action_spec(_wire.act("s_1", wait)[1]) == wait


def test_a_batch_is_checked_action_by_action() -> None:
    good = ActionSpec(kind=ActionKind.CLICK, observation_id="s_1:3", idempotency_key="a", ref="e4")
    bad = ActionSpec(kind=ActionKind.CLICK, observation_id="s_1:3", idempotency_key="b", ref="button#pay")
    _, request, _ = _wire.act_batch("s_1", [good, bad])
    with pytest.raises(_validate.InvalidArgumentError, match=r"^actions\[1\]\.ref: "):
        _validate.batch_specs(request)


def test_observations_and_results_round_trip() -> None:
    window = WindowInfo(7, 42, "Notes", "Notes", 1, 2, 300, 200)
    obs = Observation(
        observation_id="s_1:3",
        session_id="s_1",
        generation=3,
        lease_epoch=5,
        url="",
        title="Notes",
        snapshot="- window",
        digest="d",
        taken_at_ms=1,
        desktop=DesktopState(800, 600, window, None, (window,), True, 1, 2),
    )
    assert _wire.observation_from_pb(_wire.observation_pb(obs)) == obs
    result = ActionResult("a_1", Outcome.REFUSED, Reason.STALE_REF, "gone", False, Evidence.NONE, "k", policies=("p",))
    back = _wire.result_from_pb(_wire.result_pb(result))
    assert back == result and back.reason is Reason.STALE_REF


def test_an_unreachable_executor_is_an_executor_error_and_still_a_grpc_error() -> None:
    with (
        ExecutorClient("127.0.0.1:9", "token", timeout_s=2.0) as client,
        pytest.raises(ExecutorUnavailableError) as info,
    ):
        client.open_session(target="browser:x")
    assert isinstance(info.value, grpc.RpcError)  # for one release, as before
    assert info.value.code() == grpc.StatusCode.UNAVAILABLE  # type: ignore[attr-defined]
    assert info.value.reason == "UNAVAILABLE"


def test_the_sdk_through_the_servicer_to_the_core_without_a_browser(tmp_path: Path) -> None:
    sidecar: Sidecar = start_sidecar(tmp_path / "authz")

    async def body() -> None:
        async with running(sidecar, tmp_path / "ledger.sqlite") as rig:
            server = grpc.aio.server()
            pb_grpc.add_ExecutorServicer_to_server(ExecutorServicer(rig.core), server)  # type: ignore[no-untyped-call]
            port = server.add_insecure_port("127.0.0.1:0")
            await server.start()
            try:
                async with AsyncExecutorClient(f"127.0.0.1:{port}", rig.token, strict=True) as client:
                    session = await client.open_session(target=rig.target)
                    obs = await session.observe()
                    assert obs.url == rig.backend.url
                    done = await session.click(session.find("button", "Pay"))
                    assert done.result.outcome is Outcome.DONE
                    with pytest.raises(ExecutorRpcError) as info:
                        await session.reconcile("a_nope", Verdict.HAPPENED, "x")
                    assert info.value.code_name == "NOT_FOUND" and "action_id" in info.value.details()
                    assert isinstance(info.value, grpc.RpcError)
                    await session.close()
            finally:
                await server.stop(None)

    try:
        asyncio.run(body())
    finally:
        sidecar.stop()


def test_a_target_gone_for_good_is_its_own_error_through_the_sdk(tmp_path: Path) -> None:
    """TARGET_GONE: an action refused for it and an observe that fails for it say so; neither
    is UNAVAILABLE, which would invite a retry."""
    from handrail.executor import TargetGoneError, TargetGoneRefusedError

    sidecar: Sidecar = start_sidecar(tmp_path / "authz")

    async def body() -> None:
        async with running(sidecar, tmp_path / "ledger.sqlite") as rig:
            server = grpc.aio.server()
            pb_grpc.add_ExecutorServicer_to_server(ExecutorServicer(rig.core), server)  # type: ignore[no-untyped-call]
            port = server.add_insecure_port("127.0.0.1:0")
            await server.start()
            try:
                async with AsyncExecutorClient(f"127.0.0.1:{port}", rig.token, strict=True) as client:
                    session = await client.open_session(target=rig.target)
                    await session.observe()
                    rig.backend.refuse_next_check(Reason.TARGET_GONE, "the target window 0x1 was destroyed")
                    with pytest.raises(TargetGoneRefusedError) as refused:
                        await session.click(session.find("button", "Pay"))
                    assert isinstance(refused.value, TargetGoneError) and refused.value.reason == "TARGET_GONE"
                    rig.backend.observe_error = TargetGoneError("the target window 0x1 was destroyed")
                    with pytest.raises(TargetGoneError) as gone:
                        await session.observe()
                    error = gone.value
                    assert isinstance(error, ExecutorRpcError) and not isinstance(error, ExecutorUnavailableError)
                    assert error.code_name == "FAILED_PRECONDITION" and error.reason == "TARGET_GONE"
                    assert "destroyed" in error.details()
                    await session.close()
            finally:
                await server.stop(None)

    try:
        asyncio.run(body())
    finally:
        sidecar.stop()
