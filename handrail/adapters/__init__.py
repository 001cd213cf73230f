"""The vendors' computer-use tools over a guarded Handrail browser session (no network).

``AnthropicComputer`` (``computer_20250124``, ``computer_20251124``), ``OpenAIComputer``
(batched ``actions``, ``pending_safety_checks``) and ``GeminiComputer`` (0-999 points, both
function sets, ``safety_decision``) translate a model's tool calls into guarded pixel
actions of a ``GuardedComputer`` and build the tool results the vendor expects. See
docs/adapters.md.
"""

from __future__ import annotations

from handrail.adapters._anthropic import ANTHROPIC_VERSIONS, AnthropicComputer
from handrail.adapters._computer import GuardedComputer, Step, playwright_keys, vendor_scale
from handrail.adapters._gemini import GRID, GeminiComputer, GeminiTurn
from handrail.adapters._openai import OpenAIComputer, Turn

__all__ = [
    "ANTHROPIC_VERSIONS",
    "GRID",
    "AnthropicComputer",
    "GeminiComputer",
    "GeminiTurn",
    "GuardedComputer",
    "OpenAIComputer",
    "Step",
    "Turn",
    "playwright_keys",
    "vendor_scale",
]
