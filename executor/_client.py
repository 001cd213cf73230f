"""The agent SDK: typed clients of the executor, synchronous and asyncio.

    with ExecutorClient("127.0.0.1:7701", token) as client:
        session = client.open_session(target="browser:shop", start_url=url)
        session.observe()
        session.click(session.find("button", "Turn off auto-renew")).raise_for_outcome()

    async with AsyncExecutorClient("127.0.0.1:7701", token) as client:
        session = await client.open_session(target="browser:shop", start_url=url)
        await session.observe()
        result = (await session.click(session.find("button", "Pay"))).result

``open_session`` takes the first observation too (``session.latest``), so the session can
act at once. Every action cites the session's latest observation unless told otherwise,
and takes a fresh idempotency key unless given one. Results come back as data;
``strict=True`` (or ``ActResponse.raise_for_outcome()``) raises one typed error per reason
code instead, whatever the outcome (a FAILED action with STALE_REF raises
``StaleRefError``). Requests are built by ``_wire``; the clients only send them. A call the
executor answers with an error status raises an ``ExecutorRpcError`` that is also the
error of its code (``NotFoundError``, ``InvalidArgumentError`` with ``.field``,
``LeaseHeldError`` ...); ``ExecutorUnavailableError`` when it cannot be reached in time.
Never a raw ``grpc.RpcError`` — though, for one release, each is also one with ``code()``.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from types import TracebackType
from typing import Any, TypeVar

import grpc

from handrail._rpc import channel_args
from handrail.executor import _wire, _wire_console
from handrail.executor._elements import Element
from handrail.executor._elements import find as find_element
from handrail.executor._errors import raise_for_outcome
from handrail.executor._live import PersonRequest
from handrail.executor._models import (
    ActionKind,
    ActionResult,
    ActionSpec,
    ActResponse,
    BatchResult,
    DesktopTarget,
    Expectation,
    Observation,
    PointSpace,
    SessionInfo,
    Verdict,
    WaitFor,
)
from handrail.executor._snapshot import apply_diff
from handrail.proto.executor.v1 import executor_pb2_grpc as pb_grpc

_T = TypeVar("_T")
# An observation of a page of thousands of controls carries thousands of elements: more
# than gRPC's default 4 MB a client takes.
CHANNEL_OPTIONS = (("grpc.max_receive_message_length", 64 * 1024 * 1024),)


def open_channel(address: str, root_certificates: bytes | None = None, server_name: str | None = None) -> grpc.Channel:
    """A channel to the executor at ``address``: TLS trusting ``root_certificates`` (PEM)
    and checking ``server_name`` in its certificate (None: the host of ``address``) when
    given, else plaintext. A name without certificates is a ValueError (nothing would
    check it)."""
    credentials, options = channel_args(root_certificates, server_name)
    if credentials is None:
        return grpc.insecure_channel(address, options=[*CHANNEL_OPTIONS, *options])
    return grpc.secure_channel(address, credentials, options=[*CHANNEL_OPTIONS, *options])


def open_aio_channel(
    address: str, root_certificates: bytes | None = None, server_name: str | None = None
) -> grpc.aio.Channel:
    """:func:`open_channel` for asyncio."""
    credentials, options = channel_args(root_certificates, server_name)
    if credentials is None:
        return grpc.aio.insecure_channel(address, options=[*CHANNEL_OPTIONS, *options])
    return grpc.aio.secure_channel(address, credentials, options=[*CHANNEL_OPTIONS, *options])


_EXPECT_KEYS = {
    "expect_text": "text_visible",
    "expect_url": "url_matches",
    "expect_role": "role",
    "expect_name": "name",
    "expect_gone": "gone",
    "expect_field": "field_ref",
    "expect_value": "field_value",
    "expect_within_ms": "within_ms",
}


def _ref_and(kind: ActionKind, field: str, args: tuple[str, ...], kw: dict[str, Any]) -> dict[str, Any]:
    """The keywords of ``type(text)`` / ``type(ref, text)`` (``press`` alike with ``key``).

    On a desktop there are no refs: ``session.type("hello")`` types into the bound window.
    """
    if len(args) > 2:
        raise TypeError(f"{kind.value}() takes ({field}) or (ref, {field}), not {len(args)} arguments")
    if len(args) == 2:
        kw["ref"], kw[field] = args
    elif len(args) == 1:
        if field in kw:
            raise TypeError(f"{kind.value}() got {field} twice")
        kw[field] = args[0]
    if not kw.get(field):
        raise TypeError(f"{kind.value}() needs the {field}")
    return kw


class _SessionBase:
    """What sync and async sessions share: observations, their elements, building actions."""

    def __init__(self, info: SessionInfo, strict: bool) -> None:
        self.info = info
        self.strict = strict
        self.latest: Observation | None = None
        self._full_snapshot = ""
        self._elements: Sequence[Element] = ()

    @property
    def session_id(self) -> str:
        return self.info.session_id

    def _took(self, obs: Observation) -> Observation:
        # A diff observation is rebuilt into a full one so that find() keeps working.
        if obs.is_diff:
            self._full_snapshot = apply_diff(self._full_snapshot, obs.diff)
            if obs.elements or obs.elements_gone:
                changed = {e.ref: e for e in obs.elements}
                gone = set(obs.elements_gone)
                kept = [changed.pop(e.ref, e) for e in self._elements if e.ref not in gone]
                self._elements = (*kept, *changed.values())
        else:
            self._full_snapshot = obs.snapshot
            self._elements = obs.elements
        self.latest = obs
        return obs

    @property
    def snapshot(self) -> str:
        """The full snapshot of the latest observation (diffs applied)."""
        return self._full_snapshot

    @property
    def elements(self) -> Sequence[Element]:
        """The structured element list of the latest observation (diffs applied)."""
        return self._elements

    def find_element(
        self,
        role: str,
        name: str,
        observation: Observation | None = None,
        *,
        within: tuple[str, str] | None = None,
    ) -> Element:
        """The one element with this role and accessible name (see ``find``)."""
        if observation is not None and not observation.is_diff:
            elements, where = observation.elements, observation.observation_id
        elif observation is None or observation is self.latest:
            elements, where = self._elements, self.latest.observation_id if self.latest else "-"
        else:
            raise LookupError("find() on an older diff observation: pass a full one")
        return find_element(elements, role, name, within=within, where=f"observation {where}")

    def find(
        self,
        role: str,
        name: str,
        observation: Observation | None = None,
        *,
        within: tuple[str, str] | None = None,
    ) -> str:
        """The ref of the one element with this role and accessible name.

        Looked up in the observation's structured element list (the latest one unless
        ``observation`` is given), never in its text. ``within=(role, name)`` keeps the
        elements that sit in a container of that role — a row, a list item, a dialog, a
        form, any ancestor — or under a heading, whose name is ``name`` or holds it as
        whole words: ``find("button", "Cancel", within=("row", "Plan E"))``.

        Raises:
            ElementNotFoundError: no element has that role and name (there); the message
                says where such elements are, if anywhere.
            AmbiguousElementError: more than one has; the message lists them (``refs``).
            Both are ``LookupError``s.
        """
        return self.find_element(role, name, observation, within=within).ref

    def _spec(self, kind: ActionKind, kw: dict[str, Any]) -> ActionSpec:
        obs = kw.pop("observation", None) or self.latest
        if obs is None:
            raise RuntimeError("observe() before acting: every action cites an observation")
        expect = {field: kw.pop(arg) for arg, field in _EXPECT_KEYS.items() if arg in kw}
        wait = kw.pop("wait_for", None)
        key = kw.pop("idempotency_key", None) or uuid.uuid4().hex
        if "values" in kw:
            kw["values"] = tuple(kw["values"])
        for name in ("files", "keys"):
            if name in kw:
                kw[name] = tuple(kw[name])
        return ActionSpec(
            kind=kind,
            observation_id=obs.observation_id,
            idempotency_key=key,
            expect=Expectation(**expect),
            wait_for=wait or WaitFor(),
            **kw,
        )

    def _done(self, response: ActResponse) -> ActResponse:
        if response.observation is not None:
            self._took(response.observation)
        if self.strict:
            response.raise_for_outcome()
        return response


class ExecutorClient:
    """A connection to an executor, authenticated as one agent.

    Args:
        address: ``HOST:PORT`` of the executor.
        token: the agent's bearer token (the sidecar knows it).
        timeout_s: the deadline of each call.
        strict: raise a typed error for every action that is not DONE.
        root_certificates: PEM CA certificates: speak TLS to an executor that serves it
            (``executor serve --tls-cert``) and trust these (None: plaintext).
        server_name: the name to expect in the executor's certificate, when it is not the
            host of ``address`` (needs ``root_certificates``).
    """

    def __init__(
        self,
        address: str,
        token: str,
        *,
        timeout_s: float = 60.0,
        strict: bool = False,
        root_certificates: bytes | None = None,
        server_name: str | None = None,
    ) -> None:
        self._channel = open_channel(address, root_certificates, server_name)
        self._stub = pb_grpc.ExecutorStub(self._channel)  # type: ignore[no-untyped-call]
        self._metadata = (("authorization", f"Bearer {token}"),)
        self._timeout = timeout_s
        self._strict = strict

    def _call(self, call: _wire.Call[_T], timeout: float | None = None) -> _T:
        method, request, decode = call
        try:
            response = getattr(self._stub, method)(request, metadata=self._metadata, timeout=timeout or self._timeout)
        except grpc.RpcError as exc:
            raise _wire.rpc_error(exc) from None
        return decode(response)

    def open_session(
        self,
        *,
        target: str,
        start_url: str = "",
        agent: str = "",
        desktop: DesktopTarget | None = None,
        session_ttl_ms: int = 0,
        observe: bool = True,
    ) -> Session:
        """Open a session on ``target``: a browser at ``start_url``, or a desktop window.

        With ``observe`` (the default) the first observation is taken at once and is
        ``session.latest``. ``session.info.lease_epoch`` 0 means no lease is held
        (``session.info.lease_reason`` says why). ``session_ttl_ms``: how long the session
        lives without a call (0: the executor's default, ten minutes).

        Raises:
            LeaseHeldError: another agent holds the target's lease.
            PermissionDeniedError: the token is not an agent's.
        """
        info = self._call(_wire.open_session(target, start_url, agent, desktop, session_ttl_ms))
        session = Session(self, info, self._strict)
        if observe:
            session.observe()
        return session

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


class Session(_SessionBase):
    """One open session (browser or desktop) of a synchronous client."""

    def __init__(self, client: ExecutorClient, info: SessionInfo, strict: bool) -> None:
        super().__init__(info, strict)
        self._client = client

    def observe(
        self,
        *,
        screenshot: bool = False,
        screenshot_scale: float = 0.0,
        viewport_only: bool = False,
        depth: int = 0,
        diff: bool = False,
    ) -> Observation:
        """Take a fresh observation; it becomes the one actions cite."""
        call = _wire.observe(self.session_id, screenshot, screenshot_scale, viewport_only, depth, diff)
        return self._took(self._client._call(call))

    def act(self, kind: ActionKind, **kw: Any) -> ActResponse:
        """Ask for one action; the response carries the re-observation when it ran."""
        spec = self._spec(kind, kw)
        return self._done(self._client._call(_wire.act(self.session_id, spec)))

    def batch(self, *actions: tuple[ActionKind, dict[str, Any]]) -> BatchResult:
        """Run ``(kind, kwargs)`` actions in order, all citing the latest observation."""
        specs = [self._spec(kind, dict(kw)) for kind, kw in actions]
        result = self._client._call(_wire.act_batch(self.session_id, specs))
        if result.observation is not None:
            self._took(result.observation)
        if self.strict:
            for r in result.results:
                raise_for_outcome(r)
        return result

    def reconcile(self, action_id: str, verdict: Verdict | str, evidence: str) -> ActionResult:
        """Record what the real state shows of an UNKNOWN action (it happened, or not)."""
        return self._client._call(_wire.reconcile(self.session_id, action_id, verdict, evidence))

    def close(self) -> None:
        self._client._call(_wire.close_session(self.session_id))

    def ask_for_person(self, reason: str = "", *, wait_ms: int = 0, request_id: str = "") -> PersonRequest:
        """Hand the target to a person: ``reason`` says what they must do.

        Waits up to ``wait_ms`` for the person to take over and hand back (``status`` is
        then ``HANDED_BACK``); with ``request_id``, waits on an earlier request instead of
        asking anew. After a hand-back, observe again: the old refs are stale.
        """
        call = _wire_console.ask_for_person(self.session_id, reason, wait_ms, request_id)
        return self._client._call(call, timeout=max(self._client._timeout, wait_ms / 1000 + 10))

    # The actions, by name.
    def click(self, ref: str = "", **kw: Any) -> ActResponse:
        return self.act(ActionKind.CLICK, ref=ref, **kw)

    def double_click(self, ref: str = "", **kw: Any) -> ActResponse:
        return self.act(ActionKind.DOUBLE_CLICK, ref=ref, **kw)

    def hover(self, ref: str, **kw: Any) -> ActResponse:
        return self.act(ActionKind.HOVER, ref=ref, **kw)

    def drag_to(self, ref: str, to_ref: str, **kw: Any) -> ActResponse:
        """Drag the element ``ref`` onto ``to_ref`` (both of the cited observation, both checked)."""
        return self.act(ActionKind.DRAG, ref=ref, to_ref=to_ref, **kw)

    def fill(self, ref: str, text: str, **kw: Any) -> ActResponse:
        return self.act(ActionKind.FILL, ref=ref, text=text, **kw)

    def type(self, *args: str, **kw: Any) -> ActResponse:
        """``type(text)`` on a desktop (into the bound window), ``type(ref, text)`` on a page."""
        return self.act(ActionKind.TYPE, **_ref_and(ActionKind.TYPE, "text", args, kw))

    def press(self, *args: str, **kw: Any) -> ActResponse:
        """``press(key)`` on a desktop, ``press(ref, key)`` on a page."""
        return self.act(ActionKind.PRESS, **_ref_and(ActionKind.PRESS, "key", args, kw))

    def hotkey(self, *keys: str, **kw: Any) -> ActResponse:
        return self.act(ActionKind.HOTKEY, keys=keys, **kw)

    def select(self, ref: str, *values: str, **kw: Any) -> ActResponse:
        return self.act(ActionKind.SELECT, ref=ref, values=values, **kw)

    def check(self, ref: str, **kw: Any) -> ActResponse:
        return self.act(ActionKind.CHECK, ref=ref, **kw)

    def uncheck(self, ref: str, **kw: Any) -> ActResponse:
        return self.act(ActionKind.UNCHECK, ref=ref, **kw)

    def scroll(self, delta_x: int = 0, delta_y: int = 0, **kw: Any) -> ActResponse:
        return self.act(ActionKind.SCROLL, delta_x=delta_x, delta_y=delta_y, **kw)

    def navigate(self, url: str, **kw: Any) -> ActResponse:
        return self.act(ActionKind.NAVIGATE, url=url, **kw)

    def back(self, **kw: Any) -> ActResponse:
        return self.act(ActionKind.BACK, **kw)

    def upload(self, ref: str, *files: str, **kw: Any) -> ActResponse:
        return self.act(ActionKind.UPLOAD, ref=ref, files=files, **kw)

    def wait_for(self, **condition: Any) -> ActResponse:
        timeout_ms = condition.pop("timeout_ms", 0)
        return self.act(ActionKind.WAIT_FOR, wait_for=WaitFor(**condition), timeout_ms=timeout_ms)

    def open_tab(self, url: str, **kw: Any) -> ActResponse:
        return self.act(ActionKind.TAB_OPEN, url=url, **kw)

    def switch_tab(self, tab_id: str, **kw: Any) -> ActResponse:
        return self.act(ActionKind.TAB_SWITCH, tab_id=tab_id, **kw)

    def close_tab(self, tab_id: str, **kw: Any) -> ActResponse:
        return self.act(ActionKind.TAB_CLOSE, tab_id=tab_id, **kw)

    def accept_dialog(self, text: str = "", **kw: Any) -> ActResponse:
        return self.act(ActionKind.DIALOG_ACCEPT, text=text, **kw)

    def dismiss_dialog(self, **kw: Any) -> ActResponse:
        return self.act(ActionKind.DIALOG_DISMISS, **kw)

    def move(self, x: int, y: int, **kw: Any) -> ActResponse:
        return self.act(ActionKind.MOVE, x=x, y=y, **kw)

    def drag(self, x: int, y: int, to_x: int, to_y: int, **kw: Any) -> ActResponse:
        return self.act(ActionKind.DRAG, x=x, y=y, to_x=to_x, to_y=to_y, **kw)

    def activate(self, **kw: Any) -> ActResponse:
        return self.act(ActionKind.ACTIVATE, **kw)

    # Browser actions at a point of a screenshot (``observation=``, default the latest):
    # x, y in its screenshot's pixels, or CSS pixels of the viewport with ``css=True``.
    def click_at(self, x: int, y: int, *, css: bool = False, **kw: Any) -> ActResponse:
        """Click at (x, y) (``button="right"``, ``click_count=3`` ...), guarded as a ref click."""
        return self.act(ActionKind.CLICK, **_at(x, y, css, kw))

    def double_click_at(self, x: int, y: int, *, css: bool = False, **kw: Any) -> ActResponse:
        return self.act(ActionKind.DOUBLE_CLICK, **_at(x, y, css, kw))

    def move_to(self, x: int, y: int, *, css: bool = False, **kw: Any) -> ActResponse:
        return self.act(ActionKind.MOVE, **_at(x, y, css, kw))

    def drag_at(self, x: int, y: int, to_x: int, to_y: int, *, css: bool = False, **kw: Any) -> ActResponse:
        return self.act(ActionKind.DRAG, to_x=to_x, to_y=to_y, **_at(x, y, css, kw))

    def scroll_at(
        self, x: int, y: int, delta_x: int = 0, delta_y: int = 0, *, css: bool = False, **kw: Any
    ) -> ActResponse:
        return self.act(ActionKind.SCROLL, delta_x=delta_x, delta_y=delta_y, **_at(x, y, css, kw))

    def type_at(self, x: int, y: int, text: str, *, css: bool = False, **kw: Any) -> ActResponse:
        """Click the field at (x, y), then type ``text`` into it (every key guarded)."""
        return self.act(ActionKind.TYPE, text=text, **_at(x, y, css, kw))


# The name the foundation used for a browser session.
BrowserSession = Session


class AsyncExecutorClient:
    """The asyncio twin of ``ExecutorClient`` (``grpc.aio``), with the same arguments."""

    def __init__(
        self,
        address: str,
        token: str,
        *,
        timeout_s: float = 60.0,
        strict: bool = False,
        root_certificates: bytes | None = None,
        server_name: str | None = None,
    ) -> None:
        self._channel = open_aio_channel(address, root_certificates, server_name)
        self._stub = pb_grpc.ExecutorStub(self._channel)  # type: ignore[no-untyped-call]
        self._metadata = (("authorization", f"Bearer {token}"),)
        self._timeout = timeout_s
        self._strict = strict

    async def _call(self, call: _wire.Call[_T], timeout: float | None = None) -> _T:
        method, request, decode = call
        try:
            response = await getattr(self._stub, method)(
                request, metadata=self._metadata, timeout=timeout or self._timeout
            )
        except grpc.RpcError as exc:
            raise _wire.rpc_error(exc) from None
        return decode(response)

    async def open_session(
        self,
        *,
        target: str,
        start_url: str = "",
        agent: str = "",
        desktop: DesktopTarget | None = None,
        session_ttl_ms: int = 0,
        observe: bool = True,
    ) -> AsyncSession:
        """See ``ExecutorClient.open_session``."""
        info = await self._call(_wire.open_session(target, start_url, agent, desktop, session_ttl_ms))
        session = AsyncSession(self, info, self._strict)
        if observe:
            await session.observe()
        return session

    async def close(self) -> None:
        await self._channel.close(None)

    async def __aenter__(self) -> AsyncExecutorClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()


class AsyncSession(_SessionBase):
    """One open session of an asyncio client; the same actions as ``Session``, awaited."""

    def __init__(self, client: AsyncExecutorClient, info: SessionInfo, strict: bool) -> None:
        super().__init__(info, strict)
        self._client = client

    async def observe(
        self,
        *,
        screenshot: bool = False,
        screenshot_scale: float = 0.0,
        viewport_only: bool = False,
        depth: int = 0,
        diff: bool = False,
    ) -> Observation:
        call = _wire.observe(self.session_id, screenshot, screenshot_scale, viewport_only, depth, diff)
        return self._took(await self._client._call(call))

    async def act(self, kind: ActionKind, **kw: Any) -> ActResponse:
        spec = self._spec(kind, kw)
        return self._done(await self._client._call(_wire.act(self.session_id, spec)))

    async def reconcile(self, action_id: str, verdict: Verdict | str, evidence: str) -> ActionResult:
        return await self._client._call(_wire.reconcile(self.session_id, action_id, verdict, evidence))

    async def close(self) -> None:
        await self._client._call(_wire.close_session(self.session_id))

    async def ask_for_person(self, reason: str = "", *, wait_ms: int = 0, request_id: str = "") -> PersonRequest:
        """See ``Session.ask_for_person``."""
        call = _wire_console.ask_for_person(self.session_id, reason, wait_ms, request_id)
        return await self._client._call(call, timeout=max(self._client._timeout, wait_ms / 1000 + 10))

    async def click(self, ref: str = "", **kw: Any) -> ActResponse:
        return await self.act(ActionKind.CLICK, ref=ref, **kw)

    async def fill(self, ref: str, text: str, **kw: Any) -> ActResponse:
        return await self.act(ActionKind.FILL, ref=ref, text=text, **kw)

    async def drag_to(self, ref: str, to_ref: str, **kw: Any) -> ActResponse:
        return await self.act(ActionKind.DRAG, ref=ref, to_ref=to_ref, **kw)

    async def type(self, *args: str, **kw: Any) -> ActResponse:
        """``type(text)`` on a desktop (into the bound window), ``type(ref, text)`` on a page."""
        return await self.act(ActionKind.TYPE, **_ref_and(ActionKind.TYPE, "text", args, kw))

    async def press(self, *args: str, **kw: Any) -> ActResponse:
        """``press(key)`` on a desktop, ``press(ref, key)`` on a page."""
        return await self.act(ActionKind.PRESS, **_ref_and(ActionKind.PRESS, "key", args, kw))

    async def select(self, ref: str, *values: str, **kw: Any) -> ActResponse:
        return await self.act(ActionKind.SELECT, ref=ref, values=values, **kw)

    async def navigate(self, url: str, **kw: Any) -> ActResponse:
        return await self.act(ActionKind.NAVIGATE, url=url, **kw)

    async def click_at(self, x: int, y: int, *, css: bool = False, **kw: Any) -> ActResponse:
        """See ``Session.click_at``."""
        return await self.act(ActionKind.CLICK, **_at(x, y, css, kw))

    async def type_at(self, x: int, y: int, text: str, *, css: bool = False, **kw: Any) -> ActResponse:
        return await self.act(ActionKind.TYPE, text=text, **_at(x, y, css, kw))


def _at(x: int, y: int, css: bool, kw: dict[str, Any]) -> dict[str, Any]:
    """The keyword arguments of an action at the point (x, y)."""
    return {"x": x, "y": y, "point_space": PointSpace.CSS if css else PointSpace.SCREENSHOT, **kw}
