"""Anthropic's computer tool (``computer_20250124``, ``computer_20251124``) over a guarded browser.

The model calls the tool with ``{"action": ..., "coordinate": [x, y], ...}`` in the pixels of
the screenshots it is shown; ``AnthropicComputer.run`` performs it through a
``GuardedComputer`` and answers the ``tool_result`` block: a line of text (what happened, or
why not and what to do next; ``is_error`` when it did not run) and the next screenshot, scaled
as Anthropic expects (at most 1568 pixels on the long edge and about 1.15 megapixels, so the
API does not scale it again and the model's points stay in the screenshot's pixels).

Actions: ``screenshot``, ``left_click``, ``right_click``, ``middle_click``, ``double_click``,
``triple_click`` (with ``text`` naming modifiers held, ``"shift"``, ``"ctrl+shift"``),
``mouse_move``, ``left_click_drag`` (``start_coordinate`` to ``coordinate``),
``left_mouse_down`` / ``left_mouse_up`` (one guarded drag from where the button went down to
where it came up, or a click where they are the same), ``scroll`` (``scroll_direction``,
``scroll_amount`` wheel clicks of 100 pixels), ``type``, ``key`` (xdotool names:
``"ctrl+s"``, ``"Return"``), ``hold_key`` (pressed once, then the rest of ``duration`` waited:
the executor has no key held across calls), ``wait``, ``cursor_position``; and with
``computer_20251124``, ``zoom`` (``region`` [x0, y0, x1, y1] at full resolution).
"""

from __future__ import annotations

import base64
from typing import Any

from handrail.adapters._computer import (
    ANTHROPIC_MAX_EDGE,
    ANTHROPIC_MAX_PIXELS,
    GuardedComputer,
    Step,
    playwright_keys,
    vendor_scale,
)

__all__ = ["ANTHROPIC_VERSIONS", "AnthropicComputer"]

ANTHROPIC_VERSIONS = ("computer_20250124", "computer_20251124")
_WHEEL_PX = 100
_CLICKS = {
    "left_click": ("left", 1),
    "right_click": ("right", 1),
    "middle_click": ("middle", 1),
    "double_click": ("left", 2),
    "triple_click": ("left", 3),
}
_SCROLL = {"up": (0, -1), "down": (0, 1), "left": (-1, 0), "right": (1, 0)}


def _image(png: bytes) -> dict[str, Any]:
    return {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": base64.b64encode(png).decode()},
    }


class AnthropicComputer:
    """Runs Anthropic computer-tool calls on a guarded browser session.

    Args:
        computer: the guarded computer (its scale is set here to Anthropic's, unless given).
        version: the tool version the model was given.
    """

    def __init__(self, computer: GuardedComputer, version: str = "computer_20250124", *, scale: float = 0.0) -> None:
        if version not in ANTHROPIC_VERSIONS:
            raise ValueError(f"unknown computer tool version {version!r} (known: {', '.join(ANTHROPIC_VERSIONS)})")
        self.computer = computer
        self.version = version
        if scale:
            computer.scale = scale
        else:
            width, height = computer.size
            computer.scale = vendor_scale(width, height, ANTHROPIC_MAX_EDGE, ANTHROPIC_MAX_PIXELS)
        self._down: tuple[int, int] | None = None

    def tool(self) -> dict[str, Any]:
        """The tool definition to send with the request."""
        width, height = self.computer.size
        tool: dict[str, Any] = {
            "type": self.version,
            "name": "computer",
            "display_width_px": width,
            "display_height_px": height,
        }
        if self.version == "computer_20251124":
            tool["enable_zoom"] = True
        return tool

    def run(self, tool_use: dict[str, Any]) -> dict[str, Any]:
        """Perform one ``tool_use`` block of the tool; return its ``tool_result`` block."""
        args = tool_use.get("input") or {}
        try:
            step, image = self._run(args)
        except (KeyError, TypeError, ValueError) as exc:
            step, image = Step(False, f"bad input for the computer tool: {exc!r}"), None
        content: list[dict[str, Any]] = [{"type": "text", "text": step.message}]
        if image is None:
            image = self.computer.screenshot()
        content.append(_image(image))
        result: dict[str, Any] = {"type": "tool_result", "tool_use_id": tool_use.get("id", ""), "content": content}
        if not step.ok:
            result["is_error"] = True
        return result

    def _xy(self, args: dict[str, Any], key: str = "coordinate") -> tuple[int, int]:
        if key not in args:
            return self.computer.cursor
        x, y = args[key]
        return int(x), int(y)

    def _run(self, args: dict[str, Any]) -> tuple[Step, bytes | None]:
        c = self.computer
        action = args["action"]
        modifiers = tuple(playwright_keys(args["text"])) if args.get("text") and action != "type" else ()
        if action == "screenshot":
            return Step(True, "screenshot"), None
        if action in _CLICKS:
            button, count = _CLICKS[action]
            x, y = self._xy(args)
            return c.click(x, y, button=button, count=count, modifiers=modifiers), None
        if action == "mouse_move":
            x, y = self._xy(args)
            step = c.move(x, y)
            if self._down is not None:
                c.cursor = (x, y)  # held: the drag goes out at left_mouse_up
            return step, None
        if action == "left_click_drag":
            (x, y), (to_x, to_y) = self._xy(args, "start_coordinate"), self._xy(args)
            return c.drag(x, y, to_x, to_y, modifiers=modifiers), None
        if action == "left_mouse_down":
            self._down = self._xy(args)
            return Step(True, f"left button down at {self._down} (it goes out, guarded, at left_mouse_up)"), None
        if action == "left_mouse_up":
            down, self._down = self._down, None
            x, y = self._xy(args)
            if down is None:
                return Step(False, "left_mouse_up without left_mouse_down. Next: press the button first"), None
            if down == (x, y):
                return c.click(x, y), None
            return c.drag(down[0], down[1], x, y), None
        if action == "scroll":
            x, y = self._xy(args)
            dx, dy = _SCROLL[args.get("scroll_direction", "down")]
            amount = int(args.get("scroll_amount", 3)) * _WHEEL_PX
            return c.scroll(x, y, dx * amount, dy * amount), None
        if action == "type":
            return c.type(str(args["text"])), None
        if action == "key":
            return c.keys(str(args["text"])), None
        if action == "hold_key":
            step = c.keys(str(args["text"]))
            c.wait(float(args.get("duration", 0)))
            return step, None
        if action == "wait":
            return c.wait(float(args.get("duration", 1))), None
        if action == "cursor_position":
            x, y = c.cursor
            return Step(True, f"X={x},Y={y}"), None
        if action == "zoom" and self.version == "computer_20251124":
            x0, y0, x1, y1 = (int(v) for v in args["region"])
            return Step(True, f"zoom of ({x0}, {y0})-({x1}, {y1}) at full resolution"), c.zoom(x0, y0, x1, y1)
        return Step(False, f"{action!r} is not an action of {self.version}"), None
