"""The operator console's client of an executor (asyncio): sessions, live view, a person's input.

Every call carries the signed-in operator's bearer token; the executor asks the sidecar
who that is and answers operators (and admins) only. Errors come back as
``ExecutorRpcError`` (``ExecutorUnavailableError`` when the executor cannot be reached).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import grpc

from handrail.executor import _wire, _wire_console
from handrail.executor._client import open_aio_channel
from handrail.executor._live import HumanInput, ScreenBox, ScreenFrame, SessionSummary, TimelineItem
from handrail.executor._models import ActionResult
from handrail.proto.executor.v1 import executor_pb2 as pb
from handrail.proto.executor.v1 import executor_pb2_grpc as pb_grpc

__all__ = ["ActionDescription", "ConsoleClient"]


class ActionDescription(dict[str, Any]):
    """What ``DescribeAction`` answers, as a mapping (kind, params, observation, snapshot ...)."""


class ConsoleClient:
    """One executor, as an operator sees it.

    Args:
        address: ``HOST:PORT`` of the executor.
        timeout_s: the deadline of each unary call (streams have none).
        root_certificates: PEM CA certificates: speak TLS to the executor and trust these
            (None: plaintext).
        server_name: the name in the executor's certificate, when not the host of ``address``.
    """

    def __init__(
        self,
        address: str,
        *,
        timeout_s: float = 10.0,
        root_certificates: bytes | None = None,
        server_name: str | None = None,
    ) -> None:
        self.address = address
        self._channel = open_aio_channel(address, root_certificates, server_name)
        self._stub = pb_grpc.ExecutorStub(self._channel)  # type: ignore[no-untyped-call]
        self._timeout = timeout_s

    @staticmethod
    def _metadata(token: str) -> tuple[tuple[str, str]]:
        return (("authorization", f"Bearer {token}"),)

    async def _unary(self, rpc: str, request: Any, token: str) -> Any:
        try:
            return await getattr(self._stub, rpc)(request, metadata=self._metadata(token), timeout=self._timeout)
        except grpc.RpcError as exc:
            raise _wire.rpc_error(exc) from None

    async def list_sessions(self, token: str, session_id: str = "") -> list[SessionSummary]:
        """The open sessions; with ``session_id``, that one only, with its latest snapshot."""
        response = await self._unary("ListSessions", pb.ListSessionsRequest(session_id=session_id), token)
        return [_wire_console.summary_from_pb(s) for s in response.sessions]

    async def human_input(self, token: str, session_id: str, spec: HumanInput) -> ActionResult:
        request = _wire_console.human_input_pb(session_id, spec)
        return _wire_console.human_result_from_pb(await self._unary("HumanInput", request, token))

    async def locate(self, token: str, session_id: str, role: str, name: str) -> ScreenBox:
        request = pb.LocateRequest(session_id=session_id, role=role, name=name)
        return _wire_console.box_from_pb(await self._unary("Locate", request, token))

    async def describe_action(self, token: str, session_id: str, action_id: str) -> ActionDescription:
        request = pb.DescribeActionRequest(session_id=session_id, action_id=action_id)
        m = await self._unary("DescribeAction", request, token)
        return ActionDescription(
            action_id=m.action_id,
            kind=m.kind,
            params_json=m.params_json,
            observation_id=m.observation_id,
            url=m.url,
            title=m.title,
            snapshot=m.snapshot,
            element_context=m.element_context,
            screenshot_png=m.screenshot_png,
        )

    async def watch_screen(
        self, token: str, session_id: str, max_width: int = 0, max_height: int = 0, quality: int = 0
    ) -> AsyncIterator[ScreenFrame]:
        request = pb.WatchScreenRequest(
            session_id=session_id, max_width=max_width, max_height=max_height, quality=quality
        )
        call = self._stub.WatchScreen(request, metadata=self._metadata(token))
        try:
            async for frame in call:
                yield _wire_console.frame_from_pb(frame)
        except grpc.RpcError as exc:
            if exc.code() != grpc.StatusCode.CANCELLED:
                raise _wire.rpc_error(exc) from None
        finally:
            call.cancel()

    async def watch_timeline(self, token: str, session_id: str, since_seq: int = 0) -> AsyncIterator[TimelineItem]:
        request = pb.WatchTimelineRequest(session_id=session_id, since_seq=since_seq)
        call = self._stub.WatchTimeline(request, metadata=self._metadata(token))
        try:
            async for item in call:
                yield _wire_console.item_from_pb(item)
        except grpc.RpcError as exc:
            if exc.code() != grpc.StatusCode.CANCELLED:
                raise _wire.rpc_error(exc) from None
        finally:
            call.cancel()

    async def close(self) -> None:
        await self._channel.close(None)
