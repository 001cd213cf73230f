"""OpenAI's computer tool over a guarded browser: batched ``actions`` and safety checks.

A ``computer_call`` item carries ``actions`` (a batch, all in the pixels of the last
screenshot; the older ``action`` is one) and ``pending_safety_checks``. ``OpenAIComputer.run``
performs the actions in order through a ``GuardedComputer``, stopping at the first that does
not run, and answers the ``computer_call_output`` item with the next screenshot.

``click`` (``button``: left, right, wheel, back, forward — back and forward are not sent),
``double_click``, ``drag`` (``path``: the first point to the last; the guard binds the
element under the first, and the drop target under the last), ``keypress`` (``keys``: one
chord), ``move``, ``scroll`` (``scroll_x``, ``scroll_y`` pixels at ``x``, ``y``), ``type``,
``wait`` (2 s, as OpenAI's samples do) and ``screenshot``.

A pending safety check is never acknowledged by the adapter on its own: every write of that
call asks the sidecar for an operator's approval (``approval_asked``: the check's id, code
and message), bound to that exact action and the screenshot's observation, and waits for
it; ``acknowledged_safety_checks`` lists the checks only when every action ran with an
operator's approval. Otherwise the output says nothing was acknowledged and ``Turn`` says why.
"""

from __future__ import annotations

import base64
import dataclasses
from typing import Any

from handrail.adapters._computer import GuardedComputer, Step

__all__ = ["OpenAIComputer", "Turn"]

_WAIT_S = 2.0


@dataclasses.dataclass(frozen=True)
class Turn:
    """A tool call performed: the item to send back, and what each action came to."""

    output: dict[str, Any]
    steps: tuple[Step, ...]

    @property
    def ok(self) -> bool:
        return all(s.ok for s in self.steps)

    @property
    def message(self) -> str:
        return "; ".join(s.message for s in self.steps)


class OpenAIComputer:
    """Runs OpenAI ``computer_call`` items on a guarded browser session.

    Args:
        computer: the guarded computer; its screenshots are the display's size.
        display: the display size declared in the tool (default: the viewport).
    """

    def __init__(self, computer: GuardedComputer, display: tuple[int, int] | None = None) -> None:
        self.computer = computer
        if display is not None:
            computer.scale = display[0] / max(1, round(computer.size[0] / computer.scale))

    def tool(self) -> dict[str, Any]:
        """The tool definition to send with the request."""
        width, height = self.computer.size
        return {"type": "computer", "display_width": width, "display_height": height, "environment": "browser"}

    def run(self, call: dict[str, Any]) -> Turn:
        """Perform a ``computer_call`` item; return the ``computer_call_output`` to send back."""
        checks = list(call.get("pending_safety_checks") or [])
        actions = call.get("actions")
        if actions is None:
            actions = [call["action"]] if call.get("action") else []
        c = self.computer
        if c.obs is None:
            c.screenshot()
        c.approval_asked = "; ".join(
            f"openai pending_safety_check {s.get('id', '')} ({s.get('code', '')}): {s.get('message', '')}"
            for s in checks
        )[:1024]
        steps: list[Step] = []
        try:
            for action in actions:
                step = self._one(action)
                steps.append(step)
                if not step.ok:
                    break
        finally:
            c.approval_asked = ""
        output: dict[str, Any] = {
            "type": "computer_call_output",
            "call_id": call.get("call_id", ""),
            "output": {"type": "computer_screenshot", "image_url": _data_url(c.screenshot())},
        }
        writes = [s for s in steps if s.result is not None]
        if checks and steps and all(s.ok for s in steps) and writes and all(s.approved for s in writes):
            output["acknowledged_safety_checks"] = [
                {k: s[k] for k in ("id", "code", "message") if k in s} for s in checks
            ]
        return Turn(output, tuple(steps))

    def _one(self, action: dict[str, Any]) -> Step:
        c = self.computer
        kind = action.get("type")
        try:
            if kind == "screenshot":
                return Step(True, "screenshot")
            if kind == "click":
                button = action.get("button", "left")
                if button in ("back", "forward"):
                    return Step(False, f"click with the {button} button is not sent. Next: use navigation instead")
                return c.click(int(action["x"]), int(action["y"]), button="middle" if button == "wheel" else button)
            if kind == "double_click":
                return c.click(int(action["x"]), int(action["y"]), count=2)
            if kind == "drag":
                path = action["path"]
                first, last = path[0], path[-1]
                return c.drag(int(first["x"]), int(first["y"]), int(last["x"]), int(last["y"]))
            if kind == "keypress":
                return c.keys(list(action["keys"]))
            if kind == "move":
                return c.move(int(action["x"]), int(action["y"]))
            if kind == "scroll":
                x, y = int(action.get("x", 0)), int(action.get("y", 0))
                return c.scroll(x, y, int(action.get("scroll_x", 0)), int(action.get("scroll_y", 0)))
            if kind == "type":
                return c.type(str(action["text"]))
            if kind == "wait":
                return c.wait(_WAIT_S)
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            return Step(False, f"bad {kind} action: {exc!r}")
        return Step(False, f"{kind!r} is not a computer action")


def _data_url(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode()
