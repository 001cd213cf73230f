"""The executor service's console RPCs: thin, like the rest of the servicer.

Each operator RPC asks the sidecar who the caller is (``ConsoleDesk.operator``), then
decodes, calls the core and encodes. ``AskForPerson`` is the agent's, on its own session.
Errors map to status codes in ``_service`` (``_run``); a stream's errors the same way.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import grpc

from handrail._errors import HandrailError
from handrail.authz import AuthzRpcError
from handrail.executor import _wire_console as wire
from handrail.executor._errors import NotFoundError
from handrail.executor._guard import GuardedExecutor
from handrail.executor._session import Session
from handrail.proto.executor.v1 import executor_pb2 as pb

_T = TypeVar("_T")
Context = grpc.aio.ServicerContext[Any, Any]


class ConsoleRpcs:
    """The console's RPCs of ``ExecutorServicer`` (a mixin: it provides ``_core`` and ``_run``)."""

    _core: GuardedExecutor
    _run: Callable[..., Awaitable[Any]]
    _session: Callable[[str, Context], Awaitable[Session]]
    _token: Callable[[Context], str]

    async def _operator_session(self, context: Context, session_id: str) -> tuple[str, str, Session]:
        token = self._token(context)
        person = await self._core.console.operator(token)
        return token, person, self._core.sessions.find(wire.session_id_of(session_id))

    async def ListSessions(self, request: pb.ListSessionsRequest, context: Context) -> pb.ListSessionsResponse:
        async def call() -> pb.ListSessionsResponse:
            await self._core.console.operator(self._token(context))
            wanted = wire.session_id_of(request.session_id) if request.session_id else ""
            summaries = await self._core.console.summaries(wanted)
            if wanted and not summaries:
                raise NotFoundError("session_id", f"no open session {wanted!r}")
            return pb.ListSessionsResponse(sessions=[wire.summary_pb(s) for s in summaries])

        result: pb.ListSessionsResponse = await self._run(context, call)
        return result

    async def WatchScreen(self, request: pb.WatchScreenRequest, context: Context) -> AsyncIterator[pb.ScreenFrame]:
        async def start() -> tuple[Session, tuple[int, int, int]]:
            args = wire.screen_args(request)
            _, _, session = await self._operator_session(context, request.session_id)
            return session, args

        session, (width, height, quality) = await self._run(context, start)
        frames = await self._run(context, self._frames(session, width, height, quality))
        async for frame in _until_closed(session, frames):
            yield wire.frame_pb(frame)

    def _frames(self, session: Session, width: int, height: int, quality: int) -> Callable[[], Awaitable[Any]]:
        async def call() -> Any:
            return self._core.console.frames(session, width, height, quality)

        return call

    async def WatchTimeline(
        self, request: pb.WatchTimelineRequest, context: Context
    ) -> AsyncIterator[pb.TimelineEntry]:
        async def start() -> tuple[Session, int]:
            since = wire.timeline_args(request)
            _, _, session = await self._operator_session(context, request.session_id)
            return session, since

        session, since = await self._run(context, start)
        async for item in self._core.console.timeline(session, since):
            yield wire.item_pb(item)

    async def HumanInput(self, request: pb.HumanInputRequest, context: Context) -> pb.HumanInputResponse:
        async def call() -> pb.HumanInputResponse:
            spec = wire.human_input_from_pb(request)
            token = self._token(context)
            desk = self._core.console
            person, unasked = await desk.person_of(token)
            try:
                session = self._core.sessions.find(wire.session_id_of(request.session_id))
            except NotFoundError:
                if unasked:
                    await desk.operator(token)  # a token the sidecar refuses hears that first
                raise
            return wire.human_result_pb(await desk.human_input(token, person, unasked, session, spec))

        result: pb.HumanInputResponse = await self._run(context, call)
        return result

    async def Locate(self, request: pb.LocateRequest, context: Context) -> pb.LocateResponse:
        async def call() -> pb.LocateResponse:
            role, name = wire.locate_args(request)
            _, _, session = await self._operator_session(context, request.session_id)
            return wire.box_pb(await self._core.console.locate(session, role, name))

        result: pb.LocateResponse = await self._run(context, call)
        return result

    async def DescribeAction(self, request: pb.DescribeActionRequest, context: Context) -> pb.DescribeActionResponse:
        async def call() -> pb.DescribeActionResponse:
            action_id = wire.describe_args(request)
            _, _, session = await self._operator_session(context, request.session_id)
            params, snapshot, context_lines = self._core.console.describe(session, action_id)
            obs_id = str(params.get("observation_id", ""))
            latest = session.latest if session.latest and session.latest.observation_id == obs_id else None
            return pb.DescribeActionResponse(
                action_id=action_id,
                kind=str(params.get("kind", "")),
                params_json=json.dumps(params, ensure_ascii=False, sort_keys=True),
                observation_id=obs_id,
                url=latest.url if latest else str(params.get("url", "")),
                title=latest.title if latest else "",
                snapshot=snapshot,
                element_context=context_lines,
                screenshot_png=latest.screenshot_png if latest else b"",
            )

        result: pb.DescribeActionResponse = await self._run(context, call)
        return result

    async def AskForPerson(self, request: pb.AskForPersonRequest, context: Context) -> pb.AskForPersonResponse:
        async def call() -> pb.AskForPersonResponse:
            reason, wait_ms, request_id = wire.ask_args(request)
            session = await self._session(request.session_id, context)
            session.attached += 1  # waiting for a person is not being gone: no TTL meanwhile
            try:
                asked = await self._core.console.persons.ask(session, reason, wait_ms, request_id)
            finally:
                session.attached -= 1
                session.touch()
            return pb.AskForPersonResponse(request=wire.person_pb(asked))

        result: pb.AskForPersonResponse = await self._run(context, call)
        return result


async def _until_closed(session: Session, frames: AsyncIterator[_T]) -> AsyncIterator[_T]:
    """The frames until the session closes (then the stream ends: OK)."""
    try:
        async for frame in frames:
            if session.closed:
                return
            yield frame
    except (HandrailError, AuthzRpcError):
        return
    finally:
        closer = getattr(frames, "aclose", None)
        if closer is not None:
            await closer()
