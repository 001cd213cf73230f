"""The agent SDK: a typed, synchronous client of the executor.

with ExecutorClient("127.0.0.1:7701", token) as client:
    session = client.open_session(target="browser:demo", start_url=url)
    obs = session.observe()
    result = session.click(session.find("button", "Turn off auto-renew"))
"""

from __future__ import annotations

import uuid
from types import TracebackType

import grpc
from handrail.executor import _convert
from handrail.executor._models import (
    ActionKind,
    ActionSpec,
    ActResponse,
    Expectation,
    Observation,
    SessionInfo,
)
from handrail.executor._snapshot import parse_refs
from handrail.proto.executor.v1 import executor_pb2 as pb
from handrail.proto.executor.v1 import executor_pb2_grpc as pb_grpc


class ExecutorClient:
    """A connection to an executor, authenticated as one agent.

    Args:
        address: ``HOST:PORT`` of the executor.
        token: the agent's bearer token (the sidecar knows it).
        timeout_s: the deadline of each call.
    """

    def __init__(self, address: str, token: str, *, timeout_s: float = 60.0) -> None:
        self._channel = grpc.insecure_channel(address)
        self._stub = pb_grpc.ExecutorStub(self._channel)  # type: ignore[no-untyped-call]
        self._metadata = (("authorization", f"Bearer {token}"),)
        self._timeout = timeout_s

    def open_session(self, *, target: str, start_url: str = "", agent: str = "") -> BrowserSession:
        """Open a browser session on ``target`` at ``start_url`` for this agent."""
        msg = self._stub.OpenSession(
            pb.OpenSessionRequest(
                target=target, backend=pb.BACKEND_BROWSER, start_url=start_url, agent=agent
            ),
            metadata=self._metadata,
            timeout=self._timeout,
        )
        return BrowserSession(self, _convert.session_from_pb(msg))

    def _observe(self, session_id: str, screenshot: bool) -> Observation:
        msg = self._stub.Observe(
            pb.ObserveRequest(session_id=session_id, screenshot=screenshot),
            metadata=self._metadata,
            timeout=self._timeout,
        )
        return _convert.observation_from_pb(msg)

    def _act(self, session_id: str, spec: ActionSpec) -> ActResponse:
        msg = self._stub.Act(
            _convert.act_request_pb(session_id, spec),
            metadata=self._metadata,
            timeout=self._timeout,
        )
        return _convert.act_response_from_pb(msg)

    def _close_session(self, session_id: str) -> None:
        self._stub.CloseSession(
            pb.CloseSessionRequest(session_id=session_id),
            metadata=self._metadata,
            timeout=self._timeout,
        )

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> ExecutorClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class BrowserSession:
    """One open session. Actions cite the latest observation unless told otherwise."""

    def __init__(self, client: ExecutorClient, info: SessionInfo) -> None:
        self._client = client
        self.info = info
        self.latest: Observation | None = None

    @property
    def session_id(self) -> str:
        return self.info.session_id

    def observe(self, *, screenshot: bool = False) -> Observation:
        """Take a fresh observation; it becomes the one actions cite."""
        self.latest = self._client._observe(self.session_id, screenshot)
        return self.latest

    def find(self, role: str, name: str, observation: Observation | None = None) -> str:
        """The ref of the element with this role and accessible name in an observation.

        Raises:
            LookupError: no element, or more than one, has that role and name.
        """
        obs = observation or self.latest or self.observe()
        hits = [
            i.ref for i in parse_refs(obs.snapshot).values() if i.role == role and i.name == name
        ]
        if len(hits) != 1:
            raise LookupError(f"{len(hits)} elements are {role} {name!r} in {obs.observation_id}")
        return hits[0]

    def act(
        self,
        kind: ActionKind,
        *,
        ref: str = "",
        text: str = "",
        key: str = "",
        values: tuple[str, ...] = (),
        url: str = "",
        idempotency_key: str | None = None,
        expect_text: str = "",
        expect_url: str = "",
        observation: Observation | None = None,
        timeout_ms: int = 0,
    ) -> ActResponse:
        """Ask for one write action; the response carries the re-observation when it ran."""
        obs = observation or self.latest
        if obs is None:
            raise RuntimeError("observe() before acting: every action cites an observation")
        spec = ActionSpec(
            kind=kind,
            observation_id=obs.observation_id,
            idempotency_key=idempotency_key or uuid.uuid4().hex,
            ref=ref,
            text=text,
            key=key,
            values=values,
            url=url,
            expect=Expectation(expect_text, expect_url),
            timeout_ms=timeout_ms,
        )
        response = self._client._act(self.session_id, spec)
        if response.observation is not None:
            self.latest = response.observation
        return response

    def click(self, ref: str, **kw: object) -> ActResponse:
        return self.act(ActionKind.CLICK, ref=ref, **kw)  # type: ignore[arg-type]

    def fill(self, ref: str, text: str, **kw: object) -> ActResponse:
        return self.act(ActionKind.FILL, ref=ref, text=text, **kw)  # type: ignore[arg-type]

    def type(self, ref: str, text: str, **kw: object) -> ActResponse:
        return self.act(ActionKind.TYPE, ref=ref, text=text, **kw)  # type: ignore[arg-type]

    def press(self, ref: str, key: str, **kw: object) -> ActResponse:
        return self.act(ActionKind.PRESS, ref=ref, key=key, **kw)  # type: ignore[arg-type]

    def select(self, ref: str, *values: str, **kw: object) -> ActResponse:
        return self.act(ActionKind.SELECT, ref=ref, values=values, **kw)  # type: ignore[arg-type]

    def navigate(self, url: str, **kw: object) -> ActResponse:
        return self.act(ActionKind.NAVIGATE, url=url, **kw)  # type: ignore[arg-type]

    def close(self) -> None:
        self._client._close_session(self.session_id)
