"""An approval awaited across rounds of one tool call (MCP protocol 2026-07-28 and later).

From protocol 2026-07-28 a server asks the client for input by *returning*
``InputRequiredResult`` (``input_required``) in place of the tool's result; the client
fulfils the embedded requests, if any, and calls the same tool again carrying the
responses and the ``request_state`` it was given, verbatim. No connection is held open
across rounds, so any replica of ``handrail mcp`` that shares the state key can take the
next one.

An action refused ``APPROVAL_REQUIRED`` becomes such a call:

- **First round**: an ``input_required`` whose state names the approval, the action's step
  within the tool call (``browser_type`` with ``submit`` is two actions; ``browser_fill_form``
  one per field) and the round; when a console is configured and the client takes
  URL-mode elicitation, it also asks the user to open the console's approval page.
- **Each later round** skips the steps an earlier round already did, and sends the awaited
  action again, waiting up to a round's share of ``--approval-wait`` for the operator's
  decision: approved, it is dispatched and the tool's result is returned; still pending,
  another ``input_required`` (state only: the client retries after a short back-off);
  denied or expired, the tool error says so. After ``ROUNDS`` rounds the tool error says
  the agent is waiting for an operator, as for a client of an earlier protocol.

The state is the SDK's to protect: sealed (AES-256-GCM) under the server's key, bound to
the request and to the server, expiring; a state the server did not mint never reaches
this module. ``handrail mcp --state-key`` (or ``HANDRAIL_MCP_STATE_KEY``) shares one key
between replicas; without it each process has a key of its own.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from mcp.server.mcpserver import Context
from mcp.types import ElicitRequest, ElicitRequestURLParams, InputRequiredResult

__all__ = ["ROUNDS", "AwaitingInput", "Resumed", "Steps", "awaiting", "resumed", "uses_rounds"]

ROUNDS = 8  # rounds after the first, each waiting its share of --approval-wait
_SINCE = "2026-07-28"
_KEY = "approval"  # the key of the console page's URL elicitation among the input requests


class AwaitingInput(Exception):
    """The tool call goes on in another round: answer ``result`` in place of its result."""

    def __init__(self, result: InputRequiredResult) -> None:
        super().__init__("input required")
        self.result = result


@dataclass(frozen=True)
class Resumed:
    """What an earlier round of this tool call left in its state."""

    approval_id: str
    step: int  # the awaited action's index among the tool call's actions
    round: int
    declined: bool  # the user declined (or cancelled) opening the approval page


def uses_rounds(ctx: Context) -> bool:
    """Whether the client speaks a protocol that asks for input by ``input_required``."""
    return (ctx.protocol_version or "") >= _SINCE


def resumed(ctx: Context) -> Resumed | None:
    """The state of the earlier round this call resumes; None on a first round."""
    raw = ctx.request_state
    if not raw:
        return None
    state = json.loads(raw)  # minted by ``awaiting`` and verified by the SDK on the way in
    answer = (ctx.input_responses or {}).get(_KEY)
    declined = answer is not None and getattr(answer, "action", "accept") != "accept"
    return Resumed(str(state["approval_id"]), int(state["step"]), int(state["round"]), declined)


def awaiting(
    ctx: Context, console_url: str, tool: str, approval_id: str, why: str, step: int, round_: int
) -> AwaitingInput:
    """The ``input_required`` of round ``round_`` awaiting ``approval_id`` at ``step``."""
    state = json.dumps({"approval_id": approval_id, "step": step, "round": round_})
    requests: dict[str, Any] | None = None
    caps = ctx.client_capabilities
    url_mode = caps is not None and caps.elicitation is not None and caps.elicitation.url is not None
    if round_ == 0 and console_url and url_mode:
        page = f"{console_url.rstrip('/')}/approvals/{approval_id}"
        message = f"{tool} needs an operator's approval ({why}). Approve or deny it in the console."
        requests = {_KEY: ElicitRequest(params=ElicitRequestURLParams(message=message, url=page))}
    return AwaitingInput(InputRequiredResult(input_requests=requests, request_state=state))


class Steps:
    """Counts the actions of each tool call (each round is a request of its own), by the
    call's connection and JSON-RPC id."""

    def __init__(self, keep: int = 1024) -> None:
        self._counts: OrderedDict[tuple[int, str], int] = OrderedDict()
        self._keep = keep

    def next(self, connection: object, ctx: Context) -> int:
        """The index of the action the call is about to send (0 for its first)."""
        key = (id(connection), str(ctx.request_id))
        step = self._counts.pop(key, 0)
        self._counts[key] = step + 1
        while len(self._counts) > self._keep:
            self._counts.popitem(last=False)
        return step
