"""An agent's action survives the sidecar's answer being lost after it committed the allow.

The executor's one sidecar commits an allow that consumes a single-use grant, and its
answer never arrives (a proxy drops the connection at the answer: as a replica killed
right after its commit, or a connection cut). The act is refused ``AUTHZ_UNAVAILABLE``
and nothing is dispatched. The agent sends the action again with the same idempotency
key: the executor sends the very same check (the lost one's ``action_id``), the sidecar
answers with the allow it had committed (``replayed``), and the click happens once.

Before (executor/_sidechecks.LostChecks, authz/_replay.py) the retry was refused
``GRANT_EXHAUSTED``: the grant was spent by an allow nobody received.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from handrail import Outcome, Reason
from tests.executor import inproc
from tests.executor.inproc import ORIGIN, Sidecar, running


class AnswerDropper:
    """A loopback TCP forwarder (as ``inproc.Proxy``) that, once :meth:`arm`\\ ed, drops the
    connection at the sidecar's first answer to a call (an HTTP/2 HEADERS frame on a
    stream) instead of forwarding it: the call was served, its answer is lost."""

    def __init__(self, upstream: int) -> None:
        self._upstream = upstream
        self._armed = False
        self.dropped = 0
        self._tasks: set[asyncio.Future[Any]] = set()
        self._server: asyncio.Server | None = None

    async def start(self) -> str:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        return f"127.0.0.1:{self._server.sockets[0].getsockname()[1]}"

    def arm(self) -> None:
        self._armed = True

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self._upstream)
        pumps = [
            asyncio.ensure_future(self._requests(reader, up_writer)),
            asyncio.ensure_future(self._answers(up_reader, writer)),
        ]
        self._tasks.update(pumps)
        await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        for task in pumps:
            task.cancel()
        for w in (writer, up_writer):
            w.close()

    @staticmethod
    async def _requests(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError):
            while data := await src.read(65536):
                dst.write(data)
                await dst.drain()

    async def _answers(self, src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            while True:
                head = await src.readexactly(9)
                body = await src.readexactly(int.from_bytes(head[:3], "big"))
                if self._armed and head[3] == 0x1 and int.from_bytes(head[5:9], "big") & 0x7FFFFFFF:
                    self._armed = False
                    self.dropped += 1
                    return  # the answer's HEADERS: dropped with the connection
                dst.write(head + body)
                await dst.drain()

    def pause(self) -> None:  # inproc.Proxy's interface
        pass

    def resume(self) -> None:
        pass

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


def run(body: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(body())  # type: ignore[arg-type]


def test_a_retry_with_the_same_key_gets_the_allow_whose_answer_was_lost(
    sidecar: Sidecar, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(inproc, "Proxy", AnswerDropper)

    async def body() -> None:
        # no Watch stream: the act's first call to the sidecar is its Check
        async with running(sidecar, tmp_path / "ledger.sqlite", via_proxy=True, watch=False, verbs=("input",)) as rig:
            dropper = rig.proxy
            assert isinstance(dropper, AnswerDropper)
            grant = await rig.ops.grant(rig.agent, rig.target, ["submit"], [ORIGIN], single_use=True)
            await rig.observe()
            dropper.arm()
            lost = await rig.act(key="pay-1")
            assert dropper.dropped == 1
            assert lost.result.outcome is Outcome.REFUSED and lost.result.reason == Reason.AUTHZ_UNAVAILABLE
            assert rig.backend.dispatched == []
            assert (await rig.ops.list_grants(rig.agent, include_inactive=True))[-1].used_at_ms  # committed
            retried = await rig.act(key="pay-1")  # the agent sends it again, same key
            assert retried.result.outcome is Outcome.DONE, retried.result
            assert [s.ref for s in rig.backend.dispatched] == ["e4"]  # once
            intent = rig.entries(retried.result.action_id, "intent")[0]
            decision_id = intent.body["params"]["decision_id"]
            record, _ = await rig.ops.explain_decision(decision_id)
            assert record.decision.grant_consumed and record.decision.grant_id == grant.grant_id
            assert record.request.action_id == lost.result.action_id  # the lost check's
            again = await rig.act(key="pay-2")  # another action: the grant allowed one
            assert again.result.outcome is Outcome.REFUSED and again.result.reason == Reason.GRANT_EXHAUSTED
            assert len(rig.backend.dispatched) == 1

    run(body)


def test_a_retry_of_another_action_does_not_get_the_lost_allow(
    sidecar: Sidecar, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only the same key with the same parameters resends the lost check."""
    monkeypatch.setattr(inproc, "Proxy", AnswerDropper)

    async def body() -> None:
        async with running(sidecar, tmp_path / "ledger.sqlite", via_proxy=True, watch=False, verbs=("input",)) as rig:
            dropper = rig.proxy
            assert isinstance(dropper, AnswerDropper)
            await rig.ops.grant(rig.agent, rig.target, ["submit"], [ORIGIN], single_use=True)
            await rig.observe()
            dropper.arm()
            assert (await rig.act(key="pay-1")).result.reason == Reason.AUTHZ_UNAVAILABLE
            other = await rig.act(key="pay-2")  # the same click under another key: another action
            assert other.result.outcome is Outcome.REFUSED and other.result.reason == Reason.GRANT_EXHAUSTED
            assert rig.backend.dispatched == []

    run(body)
