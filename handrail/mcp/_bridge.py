"""One Handrail session per MCP session, and the guarded action path every write tool takes.

The bridge holds one ``AsyncExecutorClient`` (the agent's token) and opens a Handrail
session, lazily, for each MCP session that calls a tool (keyed by the SDK's
connection behind each request: one per stdio process, one per ``Mcp-Session-Id`` over
streamable HTTP). Everything goes through the SDK client, so every write is observed,
checked, authorized and recorded by the executor exactly as for an SDK agent.

Two checks of its own sit in front of the executor's, both before anything is sent:

- **What the agent saw.** Actions cite the session's latest observation (the executor
  refuses any other). When that observation is not the last one whose refs the agent was
  shown (a screenshot or a lease status took a newer one and the page had changed), the
  action is refused: the agent would be citing a ref it has not seen.
- **The element description.** A ref action names its element in words (Playwright MCP's
  ``element``); when the cited element has an accessible name, the description must
  contain it (case and spacing aside), so a ref that now means another element than the
  one the agent described is refused instead of clicked.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
import weakref
from dataclasses import dataclass, field
from typing import Any

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError

from handrail._vocabulary import ActionKind, Outcome, Reason
from handrail.executor import (
    ActionResult,
    ActResponse,
    AsyncExecutorClient,
    AsyncSession,
    Element,
    ExecutorError,
    InvalidArgumentError,
    Observation,
)

from ._render import page_state, refusal_text
from ._rounds import ROUNDS, Steps, awaiting, resumed, uses_rounds

__all__ = ["Bridge", "McpSettings", "SessionState"]


@dataclass(frozen=True)
class McpSettings:
    """How ``handrail mcp`` reaches the executor and what it opens.

    Attributes:
        executor: the executor's ``HOST:PORT``.
        token: the agent's bearer token.
        target: the lease target each session opens (``browser:NAME``).
        start_url: the page a new session starts on ("" = about:blank).
        console_url: the operator console's base URL; approvals are elicited in URL
            mode pointing at ``{console_url}/approvals/{approval_id}`` ("" = no console).
        approval_wait_s: how long an action waits for an operator after a client
            accepted the approval page (URL elicitation).
        check_descriptions: refuse a ref action whose description does not contain the
            element's accessible name.
        timeout_s: the deadline of each executor call.
        state_key: the secret (32 bytes or more) the ``request_state`` of an approval
            awaited across rounds is sealed under, shared by replicas ("" = a key of this
            process's own).
        root_certificates: PEM CA certificates: speak TLS to the executor and trust these
            (None: plaintext).
        server_name: the name in the executor's certificate, when not the host of ``executor``.
    """

    executor: str
    token: str
    target: str
    start_url: str = ""
    console_url: str = ""
    approval_wait_s: float = 120.0
    check_descriptions: bool = True
    timeout_s: float = 60.0
    state_key: str = ""
    root_certificates: bytes | None = None
    server_name: str | None = None


#: What makes two tool calls the same action: the tool, the action kind, the cited
#: observation and every argument (``repr``: lists are not hashable).
Signature = tuple[str, str, str, tuple[tuple[str, str], ...]]


@dataclass
class SessionState:
    """A Handrail session and what its MCP client was last shown."""

    session: AsyncSession
    shown_digest: str = ""  # the digest of the last observation whose refs the agent saw
    last_refusal: str = ""  # reason of the last refusal, for handrail_lease_status
    unanswered: tuple[Signature, str] | None = None  # the last action refused AUTHZ_UNAVAILABLE, and its key
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    def key_for(self, signature: Signature) -> str:
        """The idempotency key to send an action under: that of the last action, when it
        was refused ``AUTHZ_UNAVAILABLE`` and this one is the same call again, else a new one.

        The sidecar may have committed that refused action's allow (a single-use grant
        consumed) with its answer lost; the executor answers the same key with the same
        parameters with that allow instead of ``GRANT_EXHAUSTED``. Forgotten here: only the
        very next action may reuse it, and only an ``AUTHZ_UNAVAILABLE`` remembers it again.
        """
        unanswered, self.unanswered = self.unanswered, None
        if unanswered is not None and unanswered[0] == signature:
            return unanswered[1]
        return uuid.uuid4().hex

    @property
    def latest(self) -> Observation:
        obs = self.session.latest
        if obs is None:  # open_session observes first; a session has one from the start
            raise ToolError("no observation yet. Next: take a snapshot (browser_snapshot).")
        return obs

    def shown(self) -> None:
        """The agent was just shown the latest observation's refs."""
        self.shown_digest = self.latest.digest


class Bridge:
    """The executor client of ``handrail mcp`` and its sessions, one per MCP session."""

    def __init__(self, settings: McpSettings) -> None:
        self.settings = settings
        self._client: AsyncExecutorClient | None = None
        self._sessions: dict[int, tuple[weakref.ref[Any], SessionState]] = {}
        self._opening = asyncio.Lock()
        self._steps = Steps()

    async def state(self, ctx: Context) -> SessionState:
        """The Handrail session of the calling MCP session, opened on its first call."""
        owner = _connection(ctx)
        key = id(owner)
        entry = self._sessions.get(key)
        if entry is not None and entry[0]() is owner:
            return entry[1]
        async with self._opening:
            entry = self._sessions.get(key)
            if entry is not None and entry[0]() is owner:
                return entry[1]
            await self._sweep()
            if self._client is None:
                self._client = AsyncExecutorClient(
                    self.settings.executor,
                    self.settings.token,
                    timeout_s=self.settings.timeout_s,
                    root_certificates=self.settings.root_certificates,
                    server_name=self.settings.server_name,
                )
            try:
                session = await self._client.open_session(
                    target=self.settings.target, start_url=self.settings.start_url
                )
            except ExecutorError as exc:
                raise ToolError(
                    f"could not open a Handrail session on {self.settings.target}: {exc}. "
                    "Next: ask an operator (the executor's address, the agent's token and its grant)."
                ) from None
            state = SessionState(session)
            self._sessions[key] = (weakref.ref(owner), state)
            return state

    async def _sweep(self) -> None:
        """Close the Handrail sessions of MCP sessions that are gone."""
        for key, (ref, state) in list(self._sessions.items()):
            if ref() is None:
                del self._sessions[key]
                with contextlib.suppress(ExecutorError):
                    await state.session.close()

    async def close(self) -> None:
        """Close every session and the executor channel (server shutdown)."""
        for _, state in self._sessions.values():
            with contextlib.suppress(ExecutorError):
                await state.session.close()
        self._sessions.clear()
        if self._client is not None:
            await self._client.close()
            self._client = None

    # -- the write path -------------------------------------------------------------

    def element(self, state: SessionState, arg: str, ref: str, description: str) -> Element:
        """The element ``ref`` names in the latest observation, checked against what the
        agent saw and how it described it."""
        if not ref:
            raise ToolError(f"{arg}: required: the [ref=...] of an element in the latest browser_snapshot.")
        if state.shown_digest != state.latest.digest:
            raise ToolError(
                f"{arg}: the page changed since the snapshot you last saw (a newer observation was taken). "
                "Next: take a new snapshot (browser_snapshot) and act on the refs it shows."
            )
        found = next((e for e in state.session.elements if e.ref == ref), None)
        if found is None:
            raise ToolError(
                f"{arg}: {ref!r} is no element of the latest snapshot (refs are the [ref=...] of its nodes; "
                "text on the page is not a ref). "
                "Next: take a new snapshot (browser_snapshot) and act on the refs it shows."
            )
        if self.settings.check_descriptions and found.name and not _mentions(description, found.name):
            raise ToolError(
                f"{_described_by(arg)}: {ref} is {found.role} {found.name!r}, which the description {description!r} "
                "does not name. "
                "Next: take a new snapshot (browser_snapshot) and describe the element by its name."
            )
        return found

    async def act(
        self, ctx: Context, state: SessionState, tool: str, kind: ActionKind, **kw: Any
    ) -> ActResponse | None:
        """Send one action through the executor; a refusal is a ``ToolError`` with the next step.

        An action that needs an operator's approval is awaited across rounds of the tool
        call when the client's protocol asks for input by ``input_required`` (``_rounds``:
        raises ``AwaitingInput``); for an earlier protocol it is elicited in URL mode
        (console page) when the client supports it, then waited for. Otherwise the tool
        error says the agent is waiting for an operator and names the approval.

        None: the action was done by an earlier round of this tool call (not sent again).
        """
        cited = state.latest
        rounds = uses_rounds(ctx)
        step = self._steps.next(_connection(ctx), ctx)
        earlier = resumed(ctx) if rounds else None
        if earlier is not None and step < earlier.step:
            return None
        awaited = earlier if earlier is not None and step == earlier.step else None  # this action's round
        if awaited is not None and awaited.declined:
            raise ToolError(
                f"Waiting for an operator: approval {awaited.approval_id} is pending and the approval page "
                "was not opened. Next: ask an operator to approve it, then call the tool again with the same "
                "arguments."
            )
        signature = _signature(tool, kind, cited, kw)
        key = state.key_for(signature)  # one key for every send of this action (approval: twice)
        try:
            wait_ms = int(self.settings.approval_wait_s * 1000 / ROUNDS) if awaited else 0
            response = await state.session.act(
                kind, observation=cited, approval_wait_ms=wait_ms, idempotency_key=key, **kw
            )
            result = response.result
            needs_approval = result.outcome is Outcome.REFUSED and result.reason == Reason.APPROVAL_REQUIRED
            if needs_approval and result.approval_id and rounds:
                round_ = awaited.round + 1 if awaited is not None else 0
                if round_ <= ROUNDS:
                    why = result.message or result.approval_id
                    raise awaiting(ctx, self.settings.console_url, tool, result.approval_id, why, step, round_)
            elif needs_approval and result.approval_id and await self._elicit_approval(ctx, tool, result):
                wait_ms = int(self.settings.approval_wait_s * 1000)
                response = await state.session.act(
                    kind, observation=cited, approval_wait_ms=wait_ms, idempotency_key=key, **kw
                )
        except InvalidArgumentError as exc:
            raise ToolError(f"the executor refused the arguments: {exc}") from None
        except ExecutorError as exc:
            raise ToolError(
                f"{exc}. Next: take a new snapshot (browser_snapshot); if it fails too, ask an operator."
            ) from None
        result = response.result
        if result.outcome is Outcome.REFUSED and result.reason == Reason.AUTHZ_UNAVAILABLE:
            # Only then: after any other outcome an intent may exist, and the same key
            # would replay it instead of acting.
            state.unanswered = (signature, key)
        if result.outcome not in (Outcome.DONE, Outcome.RECONCILED):
            state.last_refusal = result.reason or result.outcome.value
            text = refusal_text(result)
            if result.reason == Reason.APPROVAL_REQUIRED:
                text = "Waiting for an operator: " + text
            raise ToolError(text)
        state.last_refusal = ""
        return response

    async def _elicit_approval(self, ctx: Context, tool: str, result: ActionResult) -> bool:
        """Point the user at the console's approval page; True when they went there."""
        console = self.settings.console_url.rstrip("/")
        caps = ctx.client_capabilities
        if not console or caps is None or caps.elicitation is None or caps.elicitation.url is None:
            return False
        why = result.message or result.approval_id
        answer = await ctx.elicit_url(
            message=f"{tool} needs an operator's approval ({why}). Approve or deny it in the console.",
            url=f"{console}/approvals/{result.approval_id}",
            elicitation_id=result.approval_id,
        )
        return answer.action == "accept"

    def done(self, state: SessionState, line: str, response: ActResponse | None) -> str:
        """A write tool's result: its line, then the page as the re-observation shows it."""
        if response is None:
            return f"{line} (done in an earlier round of this call)"
        result = response.result
        text = f"{line} (action {result.action_id}, {result.outcome.value}, evidence {result.evidence.value})"
        if result.message:
            text += f": {result.message}"
        if response.observation is None:
            return text
        state.shown()
        return text + "\n" + page_state(state.latest, state.session.snapshot)


def _signature(tool: str, kind: ActionKind, cited: Observation, kw: dict[str, Any]) -> Signature:
    return (tool, kind.value, cited.observation_id, tuple(sorted((k, repr(v)) for k, v in kw.items())))


def _described_by(arg: str) -> str:
    """The argument that describes the element of ref argument ``arg`` (startRef: startElement)."""
    return arg[: -len("Ref")] + "Element" if arg.endswith("Ref") else "element"


def _connection(ctx: Context) -> object:
    """The MCP session a request belongs to: the SDK's per-connection ``Connection``.

    The SDK (2.x) builds a ``ServerSession`` per request; the connection behind it is one
    per stdio process and one per ``Mcp-Session-Id``. From protocol 2026-07-28 there are
    no sessions: the SDK builds a ``Connection`` per request, and what stays is its
    outbound channel — one per stdio process, and one for every request over streamable
    HTTP (the protocol keeps no state between them; this server serves one agent on one
    target, so they share one Handrail session). Neither has a public accessor yet, so
    this reads the private attributes, falling back to the request's session.
    """
    session = ctx.request_context.session
    connection: object = getattr(session, "_connection", None) or session
    if uses_rounds(ctx):
        connection = getattr(connection, "outbound", None) or connection
    return connection


def _mentions(description: str, name: str) -> bool:
    def fold(s: str) -> str:
        return " ".join(s.split()).casefold()

    return fold(name) in fold(description)
