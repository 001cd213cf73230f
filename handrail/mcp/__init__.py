"""``handrail mcp``: an MCP server in Playwright MCP's vocabulary in front of the executor.

One Handrail session per MCP session; every write tool goes through the executor's
guarded loop (observe, check, authorize, act, re-observe) via the SDK client. See
docs/mcp.md.

- :func:`build_server`: the ``MCPServer`` and its :class:`Bridge` for some :class:`McpSettings`.
"""

from __future__ import annotations

from ._bridge import Bridge, McpSettings, SessionState
from ._render import NEXT_STEP, next_step, page_state, refusal_text
from ._tools import FormField, build_server

__all__ = [
    "NEXT_STEP",
    "Bridge",
    "FormField",
    "McpSettings",
    "SessionState",
    "build_server",
    "next_step",
    "page_state",
    "refusal_text",
]
