"""An MCP agent's action survives the sidecar's answer being lost after it committed the allow.

The sidecar commits an allow that consumes a single-use grant and its answer never
arrives: the tool call is refused ``AUTHZ_UNAVAILABLE``. The agent calls the same tool
again with the same arguments, as the refusal tells it; the bridge sends it under the
refused action's idempotency key, so the executor re-sends the lost check and the
sidecar answers with the allow it had committed: done, once.

Before, the bridge let the SDK draw a new key for every call, and the retry was refused
``GRANT_EXHAUSTED``: the grant was spent by an allow nobody received.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from mcp.server.mcpserver.exceptions import ToolError

from handrail._vocabulary import ActionKind, Evidence, Outcome, Reason
from handrail.executor import ActionResult, ActResponse, Observation
from handrail.mcp import Bridge, McpSettings, SessionState
from handrail.scenarios import SubscriptionApp, start_executor
from tests.conftest import Stack
from tests.mcp.client import mcp_args, ref_of, stdio_session, text
from tests.tcp_proxy import TcpProxy, _shut

# -- the bridge's keys, against a scripted session (milliseconds) ----------------------


class ScriptedSession:
    """A Handrail session that answers each ``act`` with the next outcome of its script and
    records the idempotency key it was sent under."""

    def __init__(self, *script: tuple[Outcome, str]) -> None:
        self.script = list(script)
        self.keys: list[str] = []
        self.latest = Observation("obs-1", "s-1", 1, 1, "https://app.test/", "App", "", "d-1", 0)

    async def act(self, kind: ActionKind, *, idempotency_key: str = "", **kw: Any) -> ActResponse:
        idempotency_key = idempotency_key or uuid.uuid4().hex  # as the SDK's session does
        self.keys.append(idempotency_key)
        outcome, reason = self.script.pop(0)
        result = ActionResult(f"a-{len(self.keys)}", outcome, reason, "", False, Evidence.NONE, idempotency_key)
        return ActResponse(result)


LOST = (Outcome.REFUSED, Reason.AUTHZ_UNAVAILABLE)
DONE = (Outcome.DONE, "")


def _ctx(n: int) -> Any:
    """A tool call's context, as much of it as the bridge reads (an earlier protocol)."""
    return SimpleNamespace(
        protocol_version="2025-11-25",
        request_state=None,
        input_responses=None,
        client_capabilities=None,
        request_id=n,
        request_context=SimpleNamespace(session=_CONNECTION),
    )


_CONNECTION = object()


def _calls(session: ScriptedSession, *calls: tuple[str, ActionKind, dict[str, Any]]) -> list[str]:
    """Make the tool calls through a bridge; each one's outcome ("DONE" or the refusal's reason)."""
    bridge = Bridge(McpSettings("127.0.0.1:1", "token", "browser:t"))
    state = SessionState(session)  # type: ignore[arg-type]
    said: list[str] = []

    async def run() -> None:
        for n, (tool, kind, kw) in enumerate(calls):
            try:
                await bridge.act(_ctx(n), state, tool, kind, **kw)
                said.append("DONE")
            except ToolError as exc:
                said.append(str(exc).split(" (", 1)[0])

    asyncio.run(run())
    return said


CLICK = ("browser_click", ActionKind.CLICK, {"ref": "e4"})


def test_the_same_call_after_authz_unavailable_is_sent_under_the_same_key() -> None:
    session = ScriptedSession(LOST, DONE, DONE)
    assert _calls(session, CLICK, CLICK, CLICK) == ["REFUSED AUTHZ_UNAVAILABLE", "DONE", "DONE"]
    first, retry, later = session.keys
    assert retry == first  # the lost check's key: the executor re-sends that check
    assert later != first  # after DONE the key is not used again


def test_another_call_after_authz_unavailable_gets_a_key_of_its_own() -> None:
    other_ref = ("browser_click", ActionKind.CLICK, {"ref": "e5"})
    other_kind = ("browser_click", ActionKind.DOUBLE_CLICK, {"ref": "e4"})
    other_arg = ("browser_click", ActionKind.CLICK, {"ref": "e4", "button": "right"})
    other_tool = ("browser_hover", ActionKind.CLICK, {"ref": "e4"})
    for other in (other_ref, other_kind, other_arg, other_tool):
        session = ScriptedSession(LOST, DONE, DONE)
        _calls(session, CLICK, other, CLICK)
        assert len(set(session.keys)) == 3, (other, session.keys)  # and the click after it is new too


def test_only_authz_unavailable_keeps_a_key() -> None:
    for refusal in ((Outcome.REFUSED, Reason.GRANT_EXHAUSTED), (Outcome.UNKNOWN, ""), (Outcome.FAILED, "")):
        session = ScriptedSession(refusal, DONE)
        _calls(session, CLICK, CLICK)
        assert session.keys[0] != session.keys[1], refusal
    session = ScriptedSession(LOST, LOST, DONE)  # lost twice: the same key each time
    _calls(session, CLICK, CLICK, CLICK)
    assert len(set(session.keys)) == 1


def test_a_call_elsewhere_in_between_forgets_the_key() -> None:
    session = ScriptedSession(LOST, DONE, DONE)
    _calls(session, CLICK, ("browser_press_key", ActionKind.PRESS, {"key": "Tab"}), CLICK)
    assert len(set(session.keys)) == 3


def test_the_refusal_says_to_call_again_with_the_same_arguments() -> None:
    said = _calls(ScriptedSession(LOST), CLICK)
    assert said == ["REFUSED AUTHZ_UNAVAILABLE"]
    bridge = Bridge(McpSettings("127.0.0.1:1", "token", "browser:t"))
    state = SessionState(ScriptedSession(LOST))  # type: ignore[arg-type]
    with pytest.raises(ToolError, match="call this tool again in a few seconds with the same arguments"):
        asyncio.run(bridge.act(_ctx(0), state, *CLICK[:2], **CLICK[2]))


# -- the real stack: an executor whose sidecar answers through a proxy that loses one ---


class AnswerLoser(TcpProxy):
    """A ``TcpProxy`` that, once :meth:`arm`\\ ed with some bytes, drops the connection at the
    sidecar's answer (its HTTP/2 ``HEADERS`` frame) to the first call whose request carries
    them (a ``Check`` names the element it judges) instead of forwarding it: that call was
    served, its answer is lost. Other calls (the executor's Watch stream, its token checks
    and lease renewals) go through."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.marker = b""
        self.streams: set[int] = set()
        self.dropped = 0
        super().__init__(upstream, on_answer=lambda: None)

    def arm(self, marker: bytes) -> None:
        self.marker = marker

    @staticmethod
    def _frames(buffered: bytes) -> tuple[list[tuple[int, int, bytes]], bytes]:
        """The whole HTTP/2 frames at the start of ``buffered`` (kind, stream, bytes), and the rest."""
        frames = []
        while len(buffered) >= 9 and len(buffered) >= 9 + int.from_bytes(buffered[:3], "big"):
            size = 9 + int.from_bytes(buffered[:3], "big")
            frames.append((buffered[3], int.from_bytes(buffered[5:9], "big") & 0x7FFFFFFF, buffered[:size]))
            buffered = buffered[size:]
        return frames, buffered

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:  # the requests (client to server)
        buffered = b""
        preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                dst.sendall(data)
                buffered += data
                if buffered.startswith(preface):
                    buffered = buffered[len(preface) :]
                frames, buffered = self._frames(buffered)
                for kind, stream, frame in frames:
                    if kind == 0x0 and self.marker and self.marker in frame:
                        self.streams.add(stream)
        _shut(src, dst)

    def _answers(self, server: socket.socket, client: socket.socket) -> None:
        buffered = b""
        with contextlib.suppress(OSError):
            while data := server.recv(65536):
                frames, buffered = self._frames(buffered + data)
                for kind, stream, frame in frames:
                    if kind == 0x1 and stream in self.streams and self.marker:
                        self.marker = b""
                        self.dropped += 1
                        raise OSError("answer dropped")
                    client.sendall(frame)
        _shut(server, client)


@pytest.fixture
def loser(stack: Stack) -> Iterator[AnswerLoser]:
    host, port = stack.authz.address.rsplit(":", 1)
    proxy = AnswerLoser((host, int(port)))
    try:
        yield proxy
    finally:
        proxy.close()


def _posts(app: SubscriptionApp) -> dict[str, int]:
    return {path: n for path, n in app.state()["requests"].items() if path.startswith("POST /")}


async def _until_answered(call: Any) -> Any:
    """The call's result once the executor's channel to the sidecar is back (the proxy
    dropped its connection; a call meanwhile may be refused AUTHZ_UNAVAILABLE again, and
    is sent again under the same key)."""
    for _ in range(20):
        result = await call()
        if "AUTHZ_UNAVAILABLE" not in text(result):
            return result
        await asyncio.sleep(0.5)
    return result


@pytest.mark.slow
@pytest.mark.browser
def test_the_same_tool_call_after_a_lost_answer_is_done_once(
    stack: Stack, app: SubscriptionApp, loser: AnswerLoser, tmp_path: Path
) -> None:
    base = app.url
    agent = stack.add_principal("agent")
    target = f"browser:{agent.name}"
    executor = start_executor(tmp_path / "executor", loser.address, stack.executor_principal.token)
    try:
        with stack.operator_client() as ops:
            ops.grant(agent.name, target, ["navigate", "input"], [base])
            ops.grant(agent.name, target, ["submit"], [base], single_use=True)

        async def run() -> None:
            async with stdio_session(mcp_args(executor.address, agent.token, target, base + "/")) as mcp:
                snap = text(await mcp.call_tool("browser_snapshot", {}))
                pause = {"element": "Pause plan button", "ref": ref_of(snap, "button", "Pause plan")}

                # The sidecar commits the allow (the single-use grant is used); its answer is lost.
                loser.arm(b"Pause plan")
                lost = await mcp.call_tool("browser_click", pause)
                assert lost.is_error and "REFUSED AUTHZ_UNAVAILABLE (nothing was dispatched)" in text(lost), text(lost)
                assert "with the same arguments" in text(lost)
                assert loser.dropped == 1 and _posts(app) == {}

                # The same call again: sent under the lost action's key, the executor re-sends
                # the lost check, the sidecar answers with its allow. Done, once.
                done = await _until_answered(lambda: mcp.call_tool("browser_click", pause))
                assert not done.is_error, text(done)
                assert "Your plan is paused." in text(done)
                assert _posts(app) == {"POST /pause": 1}

        asyncio.run(run())
    finally:
        executor.stop()
        stack.close_sessions_of(agent)


@pytest.mark.slow
@pytest.mark.browser
def test_another_tool_call_after_a_lost_answer_does_not_get_its_allow(
    stack: Stack, app: SubscriptionApp, loser: AnswerLoser, tmp_path: Path
) -> None:
    base = app.url
    agent = stack.add_principal("agent")
    target = f"browser:{agent.name}"
    executor = start_executor(tmp_path / "executor", loser.address, stack.executor_principal.token)
    try:
        with stack.operator_client() as ops:
            ops.grant(agent.name, target, ["navigate", "input"], [base])
            ops.grant(agent.name, target, ["submit"], [base], single_use=True)

        async def run() -> None:
            async with stdio_session(mcp_args(executor.address, agent.token, target, base + "/")) as mcp:
                snap = text(await mcp.call_tool("browser_snapshot", {}))
                pause = {"element": "Pause plan button", "ref": ref_of(snap, "button", "Pause plan")}
                loser.arm(b"Pause plan")
                lost = await mcp.call_tool("browser_click", pause)
                assert "REFUSED AUTHZ_UNAVAILABLE" in text(lost), text(lost)
                assert loser.dropped == 1

                # Another call (a double click): a key of its own (the same key with other
                # parameters would be IDEMPOTENCY_CONFLICT); the grant was used by the lost allow.
                double = {**pause, "doubleClick": True}
                other = await _until_answered(lambda: mcp.call_tool("browser_click", double))
                assert other.is_error and "GRANT_EXHAUSTED" in text(other), text(other)
                # ... and the lost call after it is a new action too: the key was forgotten.
                again = await mcp.call_tool("browser_click", pause)
                assert again.is_error and "GRANT_EXHAUSTED" in text(again), text(again)
                assert _posts(app) == {}

        asyncio.run(run())
    finally:
        executor.stop()
        stack.close_sessions_of(agent)
