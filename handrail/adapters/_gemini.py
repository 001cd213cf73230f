"""Gemini computer use over a guarded browser: normalized 0-999 points, both function sets.

The model answers with function calls whose points are on a 1000 x 1000 grid over the
screenshot, whatever its size; ``GeminiComputer.run`` maps them to CSS pixels of the viewport
(``x / 1000 * width``), performs them through a ``GuardedComputer``, and answers the
``function_response``: ``{"url": ...}`` (with ``"safety_acknowledgement": "true"`` when a
confirmation was asked for and an operator gave it) and the next screenshot as an inline PNG.

Two function sets: the browser set of the Gemini 2.5 computer-use model —
``open_web_browser``, ``wait_5_seconds``, ``go_back``, ``go_forward``, ``search``,
``navigate``, ``click_at``, ``hover_at``, ``type_text_at`` (``press_enter``,
``clear_before_typing``, both true unless said), ``key_combination``, ``scroll_document``,
``scroll_at`` (``direction``, ``magnitude`` on the grid), ``drag_and_drop`` — and the
streamlined set of Gemini 3.5 (``click``, ``double_click``, ``type``, ``scroll``,
``drag_and_drop``, ``navigate``, ``press_key``, ``take_screenshot``, ``wait``, each with an
``intent``, kept in the step's message).

A ``safety_decision`` of ``require_confirmation`` in the call's arguments makes each write
ask the sidecar for an operator's approval, bound to the action and the screenshot's
observation, as OpenAI's safety checks are.
"""

from __future__ import annotations

import base64
import dataclasses
from typing import Any

from handrail.adapters._computer import GuardedComputer, Step

__all__ = ["GRID", "GeminiComputer", "GeminiTurn"]

GRID = 1000  # points are 0 .. 999 on each axis
_GO_FORWARD = "go_forward is not available here. Next: navigate to the page instead"


@dataclasses.dataclass(frozen=True)
class GeminiTurn:
    """A function call performed: the function response to send back, and what it came to."""

    response: dict[str, Any]
    step: Step


class GeminiComputer:
    """Runs Gemini computer-use function calls on a guarded browser session."""

    def __init__(self, computer: GuardedComputer) -> None:
        self.computer = computer

    def _css(self, x: Any, y: Any) -> tuple[int, int]:
        width, height = self.computer.size
        s = self.computer.scale
        cx, cy = int(x) * width / GRID / s, int(y) * height / GRID / s
        if not (0 <= int(x) < GRID and 0 <= int(y) < GRID):
            raise ValueError(f"({x}, {y}) is off the 0-999 grid")
        return int(cx), int(cy)

    def run(self, call: dict[str, Any]) -> GeminiTurn:
        """Perform a ``function_call`` (``{"name", "args"}``); return its response."""
        name = str(call.get("name", ""))
        args = dict(call.get("args") or {})
        decision = args.pop("safety_decision", None) or {}
        confirm = decision.get("decision") == "require_confirmation"
        c = self.computer
        if c.obs is None:
            c.screenshot()
        if confirm:
            c.approval_asked = f"gemini safety_decision require_confirmation: {decision.get('explanation', '')}"[:1024]
        try:
            step = self._one(name, args)
        except (KeyError, TypeError, ValueError) as exc:
            step = Step(False, f"bad {name} call: {exc}")
        finally:
            c.approval_asked = ""
        intent = args.get("intent")
        if intent:
            step = dataclasses.replace(step, message=f"{step.message} (intent: {intent})")
        png = c.screenshot()
        body: dict[str, Any] = {"url": c.url()}
        if confirm and step.ok and step.approved:
            body["safety_acknowledgement"] = "true"
        if not step.ok:
            body["error"] = step.message
        response = {
            "name": name,
            "response": body,
            "parts": [{"inline_data": {"mime_type": "image/png", "data": base64.b64encode(png).decode()}}],
        }
        return GeminiTurn(response, step)

    def _one(self, name: str, a: dict[str, Any]) -> Step:
        c = self.computer
        if name in ("open_web_browser", "take_screenshot"):
            return Step(True, "screenshot")
        if name in ("wait_5_seconds", "wait"):
            return c.wait(float(a.get("seconds", 5)))
        if name == "go_back":
            return c.back()
        if name == "go_forward":
            return Step(False, _GO_FORWARD)
        if name == "search":
            return Step(False, "search is not available here (no network). Next: navigate to a URL")
        if name == "navigate":
            return c.navigate(str(a["url"]))
        if name in ("click_at", "click"):
            return c.click(*self._css(a["x"], a["y"]), css=True)
        if name == "double_click":
            return c.click(*self._css(a["x"], a["y"]), count=2, css=True)
        if name == "hover_at":
            return c.move(*self._css(a["x"], a["y"]), css=True)
        if name in ("type_text_at", "type"):
            return self._type(a, clear_default=name == "type_text_at")
        if name in ("key_combination", "press_key"):
            keys = a["keys"]
            return c.keys(keys if isinstance(keys, list) else str(keys))
        if name in ("scroll_document", "scroll_at", "scroll"):
            return self._scroll(name, a)
        if name == "drag_and_drop":
            x, y = self._css(a["x"], a["y"])
            to_x, to_y = self._css(a["destination_x"], a["destination_y"])
            return c.drag(x, y, to_x, to_y, css=True)
        return Step(False, f"{name!r} is not a computer-use function")

    def _type(self, a: dict[str, Any], *, clear_default: bool) -> Step:
        c = self.computer
        text = str(a["text"])
        if "x" in a and "y" in a:
            clicked = c.click(*self._css(a["x"], a["y"]), css=True)
            if not clicked.ok:
                return clicked
            c.screenshot()  # the field has the focus now: typing cites it
        step = c.fill(text) if a.get("clear_before_typing", clear_default) else c.type(text)
        if step.ok and a.get("press_enter", clear_default):
            c.screenshot()
            enter = c.keys("Enter")
            return dataclasses.replace(enter, message=f"{step.message}; {enter.message}", approved=step.approved)
        return step

    def _scroll(self, name: str, a: dict[str, Any]) -> Step:
        width, height = self.computer.size
        s = self.computer.scale
        direction = str(a.get("direction", "down"))
        magnitude = int(a.get("magnitude", 800))  # on the grid
        dx = {"left": -1, "right": 1}.get(direction, 0) * magnitude * width / GRID / s
        dy = {"up": -1, "down": 1}.get(direction, 0) * magnitude * height / GRID / s
        if "x" in a and "y" in a:
            x, y = self._css(a["x"], a["y"])
        else:  # the whole document: at the viewport's centre
            x, y = int(width / s / 2), int(height / s / 2)
        return self.computer.scroll(x, y, int(dx), int(dy), css=True)
