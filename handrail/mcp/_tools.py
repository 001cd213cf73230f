"""The tools of ``handrail mcp``, in Playwright MCP's vocabulary, on the official SDK.

Each tool maps onto what the executor offers (docs/mcp.md has the table); read-only tools
carry ``readOnlyHint``. Arguments are validated by the SDK from the signatures below (a
bad one is a tool error naming it); every write goes through ``Bridge.act``.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from typing import Annotated, Literal, ParamSpec

from mcp.server.mcpserver import Context, Image, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.request_state import RequestStateSecurity
from mcp.types import InputRequiredResult, ToolAnnotations
from pydantic import BaseModel, Field

from handrail._vocabulary import ActionKind, Verdict
from handrail.executor import ExecutorError, WaitFor

from ._bridge import Bridge, McpSettings, SessionState
from ._render import page_state
from ._rounds import AwaitingInput

__all__ = ["FormField", "build_server"]

P = ParamSpec("P")

READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, open_world_hint=True)
WRITE = ToolAnnotations(read_only_hint=False, open_world_hint=True)

Ref = Annotated[str, Field(description="Exact target element reference from the page snapshot ([ref=...])")]
Described = Annotated[
    str,
    Field(
        description="Human-readable element description; it must contain the element's accessible name "
        "(a ref that now means another element is refused)"
    ),
]
INSTRUCTIONS = """Handrail: a guarded browser. Every write cites the latest snapshot you saw and is checked,
authorized and recorded before it goes out. Take a snapshot (browser_snapshot), act on its refs, describe the
element by its name. A refused action is a tool error that says why and the one thing to do next."""


class FormField(BaseModel):
    """One field of ``browser_fill_form`` (Playwright MCP's shape)."""

    name: str = Field(description="Human-readable field name (must contain its accessible name)")
    type: Literal["textbox", "checkbox", "radio", "combobox", "slider"] = Field(description="Type of the field")
    ref: str = Field(description="Exact target field reference from the page snapshot")
    value: str = Field(description="Value to fill; 'true'/'false' for a checkbox; the option label for a combobox")


def answers_rounds(
    tool: Callable[P, Awaitable[str | InputRequiredResult]],
) -> Callable[P, Awaitable[str | InputRequiredResult]]:
    """A write tool whose approval is awaited across rounds of the call (``_rounds``)."""

    @functools.wraps(tool)
    async def call(*args: P.args, **kwargs: P.kwargs) -> str | InputRequiredResult:
        try:
            return await tool(*args, **kwargs)
        except AwaitingInput as waiting:
            return waiting.result

    return call


def build_server(settings: McpSettings) -> tuple[MCPServer, Bridge]:
    """The MCP server of ``handrail mcp`` and its bridge (close the bridge on shutdown)."""
    bridge = Bridge(settings)
    security = RequestStateSecurity(keys=[settings.state_key]) if settings.state_key else None
    server: MCPServer = MCPServer(name="handrail", instructions=INSTRUCTIONS, request_state_security=security)

    async def state_of(ctx: Context) -> SessionState:
        return await bridge.state(ctx)

    # -- reading ------------------------------------------------------------------

    @server.tool(
        title="Page snapshot",
        description="Capture the accessibility snapshot of the current page (refs to act on). Size controls: "
        "viewportOnly, depth, diff (only what changed since the previous snapshot).",
        annotations=READ_ONLY,
    )
    async def browser_snapshot(
        ctx: Context,
        viewportOnly: Annotated[bool, Field(description="Only what is in the viewport")] = False,
        depth: Annotated[int, Field(ge=0, le=1000, description="Limit the depth of the snapshot tree (0 = all)")] = 0,
        diff: Annotated[bool, Field(description="Return a diff against the previous snapshot")] = False,
    ) -> str:
        state = await state_of(ctx)
        async with state.lock:
            try:
                obs = await state.session.observe(viewport_only=viewportOnly, depth=depth, diff=diff)
            except ExecutorError as exc:
                raise ToolError(f"{exc}. Next: ask an operator if it persists.") from None
            state.shown()
            return page_state(obs, obs.diff if obs.is_diff else state.session.snapshot, diff=obs.is_diff)

    @server.tool(
        title="Take a screenshot",
        description="Take a PNG screenshot of the viewport. You can't act on the screenshot: use browser_snapshot.",
        annotations=READ_ONLY,
    )
    async def browser_take_screenshot(
        ctx: Context,
        scale: Annotated[float, Field(gt=0, le=1, description="Scale the image down (0.05 .. 1)")] = 1.0,
    ) -> Image:
        state = await state_of(ctx)
        async with state.lock:
            try:
                obs = await state.session.observe(screenshot=True, screenshot_scale=scale)
            except ExecutorError as exc:
                raise ToolError(str(exc)) from None
            return Image(data=obs.screenshot_png, format="png")

    @server.tool(
        title="Lease status",
        description="Who holds the controls of this session's target: the lease epoch held, why none is held, "
        "and the last refusal. Takes a fresh observation.",
        annotations=READ_ONLY,
    )
    async def handrail_lease_status(ctx: Context) -> str:
        state = await state_of(ctx)
        async with state.lock:
            try:
                obs = await state.session.observe()
            except ExecutorError as exc:
                raise ToolError(str(exc)) from None
            info = state.session.info
            held = (
                f"held, epoch {obs.lease_epoch}"
                if obs.lease_epoch
                else f"not held ({info.lease_reason or 'no lease'}): writes are refused; ask an operator"
            )
            lines = [
                f"- Session: {info.session_id} on {info.target} (agent {info.agent})",
                f"- Lease: {held}",
                f"- Last refusal: {state.last_refusal or 'none'}",
                f"- Observation: {obs.observation_id}",
            ]
            if state.shown_digest != obs.digest:
                lines.append("- The page changed since your last snapshot: take one before acting.")
            return "\n".join(lines)

    # -- writes on a ref -----------------------------------------------------------------

    async def on_ref(ctx: Context, tool: str, kind: ActionKind, ref: str, element: str, **kw: object) -> str:
        state = await state_of(ctx)
        async with state.lock:
            found = bridge.element(state, "ref", ref, element)
            response = await bridge.act(ctx, state, tool, kind, ref=ref, **kw)
            return bridge.done(state, f"{tool}: {found.role} {found.name!r} ({ref})", response)

    @server.tool(title="Click", description="Perform click on a web page", annotations=WRITE)
    @answers_rounds
    async def browser_click(
        ctx: Context,
        element: Described,
        ref: Ref,
        doubleClick: Annotated[bool, Field(description="Double click instead of a single click")] = False,
        button: Annotated[Literal["left", "right", "middle"], Field(description="Button to click")] = "left",
    ) -> str | InputRequiredResult:
        kind = ActionKind.DOUBLE_CLICK if doubleClick else ActionKind.CLICK
        extra = {} if button == "left" else {"button": button}
        return await on_ref(ctx, "browser_click", kind, ref, element, **extra)

    @server.tool(title="Hover mouse", description="Hover over element on page", annotations=WRITE)
    @answers_rounds
    async def browser_hover(ctx: Context, element: Described, ref: Ref) -> str | InputRequiredResult:
        return await on_ref(ctx, "browser_hover", ActionKind.HOVER, ref, element)

    @server.tool(title="Drag mouse", description="Perform drag and drop between two elements", annotations=WRITE)
    @answers_rounds
    async def browser_drag(
        ctx: Context,
        startElement: Annotated[str, Field(description="Human-readable source element description")],
        startRef: Annotated[str, Field(description="Exact source element reference from the page snapshot")],
        endElement: Annotated[str, Field(description="Human-readable target element description")],
        endRef: Annotated[str, Field(description="Exact target element reference from the page snapshot")],
    ) -> str | InputRequiredResult:
        # Both ends from the snapshot the agent saw, both described by name; the executor
        # checks both elements and the sidecar judges both.
        state = await state_of(ctx)
        async with state.lock:
            start = bridge.element(state, "startRef", startRef, startElement)
            end = bridge.element(state, "endRef", endRef, endElement)
            response = await bridge.act(ctx, state, "browser_drag", ActionKind.DRAG, ref=startRef, to_ref=endRef)
            line = f"{start.role} {start.name!r} ({startRef}) onto {end.role} {end.name!r} ({endRef})"
            return bridge.done(state, f"browser_drag: {line}", response)

    @server.tool(title="Type text", description="Type text into editable element", annotations=WRITE)
    @answers_rounds
    async def browser_type(
        ctx: Context,
        element: Described,
        ref: Ref,
        text: Annotated[str, Field(max_length=10_000, description="Text to type into the element")],
        submit: Annotated[bool, Field(description="Press Enter after")] = False,
        slowly: Annotated[bool, Field(description="Type one character at a time")] = False,
    ) -> str | InputRequiredResult:
        kind = ActionKind.TYPE if slowly else ActionKind.FILL
        out = await on_ref(ctx, "browser_type", kind, ref, element, text=text)
        if submit:
            out = await on_ref(ctx, "browser_type", ActionKind.PRESS, ref, element, key="Enter")
        return out

    @server.tool(title="Select option", description="Select an option in a dropdown", annotations=WRITE)
    @answers_rounds
    async def browser_select_option(
        ctx: Context,
        element: Described,
        ref: Ref,
        values: Annotated[list[str], Field(min_length=1, max_length=64, description="Values to select")],
    ) -> str | InputRequiredResult:
        return await on_ref(ctx, "browser_select_option", ActionKind.SELECT, ref, element, values=tuple(values))

    @server.tool(title="Fill form", description="Fill multiple form fields, in order", annotations=WRITE)
    @answers_rounds
    async def browser_fill_form(
        ctx: Context,
        fields: Annotated[list[FormField], Field(min_length=1, max_length=64, description="Fields to fill in")],
    ) -> str | InputRequiredResult:
        out = ""
        for f in fields:
            if f.type in ("textbox", "slider"):
                out = await on_ref(ctx, "browser_fill_form", ActionKind.FILL, f.ref, f.name, text=f.value)
            elif f.type == "combobox":
                out = await on_ref(ctx, "browser_fill_form", ActionKind.SELECT, f.ref, f.name, values=(f.value,))
            elif f.type == "radio" or f.value.strip().lower() == "true":
                out = await on_ref(ctx, "browser_fill_form", ActionKind.CHECK, f.ref, f.name)
            else:
                out = await on_ref(ctx, "browser_fill_form", ActionKind.UNCHECK, f.ref, f.name)
        return out

    # -- writes without a ref -----------------------------------------------------------

    async def plain(ctx: Context, tool: str, kind: ActionKind, line: str, **kw: object) -> str:
        state = await state_of(ctx)
        async with state.lock:
            response = await bridge.act(ctx, state, tool, kind, **kw)
            return bridge.done(state, f"{tool}: {line}", response)

    @server.tool(
        title="Press a key",
        description="Press a key on the keyboard (Enter, ArrowLeft, a, Control+a)",
        annotations=WRITE,
    )
    @answers_rounds
    async def browser_press_key(
        ctx: Context,
        key: Annotated[str, Field(min_length=1, max_length=64, description="Name of the key, or a character")],
    ) -> str | InputRequiredResult:
        # The executor's PRESS needs a ref; a key (or chord) at the focused element is a HOTKEY.
        keys = (key,) if key == "+" or "+" not in key else tuple(key.split("+"))
        return await plain(ctx, "browser_press_key", ActionKind.HOTKEY, f"pressed {key}", keys=keys)

    @server.tool(title="Navigate to a URL", description="Navigate to a URL", annotations=WRITE)
    @answers_rounds
    async def browser_navigate(
        ctx: Context, url: Annotated[str, Field(min_length=1, max_length=8192, description="The URL to navigate to")]
    ) -> str | InputRequiredResult:
        return await plain(ctx, "browser_navigate", ActionKind.NAVIGATE, f"navigated to {url}", url=url)

    @server.tool(title="Go back", description="Go back to the previous page in the history", annotations=WRITE)
    @answers_rounds
    async def browser_navigate_back(ctx: Context) -> str | InputRequiredResult:
        return await plain(ctx, "browser_navigate_back", ActionKind.BACK, "went back")

    @server.tool(
        title="Manage tabs",
        description="List, create, close, or select a browser tab. Tabs have stable ids (t1, t2 ...): "
        "pass tabId; index (0-based, in the listed order) is kept for Playwright MCP's callers.",
        annotations=WRITE,
    )
    @answers_rounds
    async def browser_tabs(
        ctx: Context,
        action: Annotated[Literal["list", "new", "close", "select"], Field(description="Operation to perform")],
        tabId: Annotated[str, Field(max_length=64, description="The tab's stable id, for close/select")] = "",
        index: Annotated[int | None, Field(ge=0, description="Tab index, for close/select")] = None,
        url: Annotated[str, Field(max_length=8192, description="URL to open in the new tab, for new")] = "",
    ) -> str | InputRequiredResult:
        state = await state_of(ctx)
        if action == "list":
            tabs = state.latest.tabs
            return "\n".join(f"- {t.tab_id}:{' [current]' if t.active else ''} {t.title} ({t.url})" for t in tabs)
        if action == "new":
            return await plain(
                ctx, "browser_tabs", ActionKind.TAB_OPEN, f"opened {url or 'about:blank'}", url=url or "about:blank"
            )
        tab = tabId or _tab_at(state, index)
        kind = ActionKind.TAB_CLOSE if action == "close" else ActionKind.TAB_SWITCH
        return await plain(ctx, "browser_tabs", kind, f"{action} {tab}", tab_id=tab)

    @server.tool(
        title="Wait for",
        description="Wait for text to appear or disappear, or for a time to pass (at most 30 s)",
        annotations=READ_ONLY,
    )
    async def browser_wait_for(
        ctx: Context,
        time: Annotated[float | None, Field(ge=0, le=30, description="The time to wait in seconds")] = None,
        text: Annotated[str, Field(max_length=1024, description="The text to wait for")] = "",
        textGone: Annotated[str, Field(max_length=1024, description="The text to wait for to disappear")] = "",
    ) -> str:
        if time is None and not text and not textGone:
            raise ToolError("time, text or textGone: give one of them.")
        if time:
            await asyncio.sleep(time)
        if not text and not textGone:
            return f"browser_wait_for: waited {time} s"
        condition = WaitFor(text=text) if text else WaitFor(text=textGone, gone=True)
        what = f"text {text!r} appeared" if text else f"text {textGone!r} is gone"
        return await plain(ctx, "browser_wait_for", ActionKind.WAIT_FOR, what, wait_for=condition)

    @server.tool(title="Handle a dialog", description="Accept or dismiss the open dialog", annotations=WRITE)
    @answers_rounds
    async def browser_handle_dialog(
        ctx: Context,
        accept: Annotated[bool, Field(description="Whether to accept the dialog")],
        promptText: Annotated[str, Field(max_length=10_000, description="The text of a prompt dialog")] = "",
    ) -> str | InputRequiredResult:
        if accept:
            return await plain(ctx, "browser_handle_dialog", ActionKind.DIALOG_ACCEPT, "accepted", text=promptText)
        return await plain(ctx, "browser_handle_dialog", ActionKind.DIALOG_DISMISS, "dismissed")

    # -- Handrail's own -----------------------------------------------------------------

    @server.tool(
        title="Reconcile",
        description="Settle an action whose outcome is UNKNOWN by what the page now shows: HAPPENED or "
        "DID_NOT_HAPPEN, with the evidence you saw. No other write goes until it is settled.",
        annotations=WRITE,
    )
    async def handrail_reconcile(
        ctx: Context,
        action_id: Annotated[str, Field(min_length=1, max_length=128, description="The UNKNOWN action's id")],
        verdict: Annotated[Literal["HAPPENED", "DID_NOT_HAPPEN"], Field(description="What the page shows")],
        evidence: Annotated[str, Field(min_length=1, max_length=4096, description="What you saw that shows it")],
    ) -> str:
        state = await state_of(ctx)
        async with state.lock:
            try:
                result = await state.session.reconcile(action_id, Verdict(verdict), evidence)
            except ExecutorError as exc:
                raise ToolError(str(exc)) from None
            outcome = f"action {result.action_id} is {result.outcome.value} ({verdict})"
            return f"handrail_reconcile: {outcome}. Take a snapshot before acting."

    return server, bridge


def _tab_at(state: SessionState, index: int | None) -> str:
    tabs = state.latest.tabs
    if index is None:
        current = [t.tab_id for t in tabs if t.active]
        if not current:
            raise ToolError("tabId: required (no current tab).")
        return current[0]
    if index >= len(tabs):
        raise ToolError(f"index: {index} is past the last tab ({len(tabs)} open). Next: browser_tabs list.")
    return tabs[index].tab_id
