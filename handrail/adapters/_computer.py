"""The guarded computer the vendor adapters drive: a browser session seen as screenshots.

A computer-use model looks at a screenshot and answers with pixel actions. ``GuardedComputer``
turns each into one guarded action of a Handrail browser session (``Session.click_at`` and
its kin: the point is bound to the element the cited observation had under it, checked,
decided by the sidecar and recorded as a ref action) and takes the next screenshot at the
scale the vendor expects. Nothing here talks to a vendor: the adapters (``_anthropic``,
``_openai``, ``_gemini``) translate the vendors' tool calls into these calls and build their
tool results.

Typing and keys go to the element that has the focus in the latest observation (cited by
its ref, so the input guard holds them to it); with no focused field, text typed right after
a click in the same screenshot goes in at that click's point. A vendor's safety check
becomes ``approval_asked`` on every write it covers: the sidecar holds the action for an
operator's approval bound to it and to the screenshot's observation.
"""

from __future__ import annotations

import dataclasses
import io
import math
import time
from typing import Any

from handrail.executor import (
    ActionKind,
    ActionResult,
    ActResponse,
    ExecutorError,
    Observation,
    Outcome,
    PointSpace,
    Session,
)

__all__ = ["ANTHROPIC_MAX_EDGE", "ANTHROPIC_MAX_PIXELS", "GuardedComputer", "Step", "playwright_keys", "vendor_scale"]

#: Anthropic's documented limits for a screenshot it is shown unscaled.
ANTHROPIC_MAX_EDGE = 1568
ANTHROPIC_MAX_PIXELS = 1_150_000

# xdotool / vendor key names -> Playwright's.
_KEYS = {
    "return": "Enter",
    "enter": "Enter",
    "kp_enter": "Enter",
    "ctrl": "Control",
    "control": "Control",
    "alt": "Alt",
    "option": "Alt",
    "shift": "Shift",
    "super": "Meta",
    "cmd": "Meta",
    "command": "Meta",
    "meta": "Meta",
    "win": "Meta",
    "tab": "Tab",
    "escape": "Escape",
    "esc": "Escape",
    "backspace": "Backspace",
    "delete": "Delete",
    "del": "Delete",
    "space": " ",
    "up": "ArrowUp",
    "down": "ArrowDown",
    "left": "ArrowLeft",
    "right": "ArrowRight",
    "arrowup": "ArrowUp",
    "arrowdown": "ArrowDown",
    "arrowleft": "ArrowLeft",
    "arrowright": "ArrowRight",
    "page_up": "PageUp",
    "pageup": "PageUp",
    "page_down": "PageDown",
    "pagedown": "PageDown",
    "home": "Home",
    "end": "End",
    "insert": "Insert",
}


def playwright_keys(chord: str | list[str]) -> list[str]:
    """A chord in xdotool's or a vendor's words (``"ctrl+a"``, ``["CTRL", "A"]``) in Playwright's."""
    parts = chord if isinstance(chord, list) else [p for p in chord.replace(" ", "").split("+") if p]
    out = []
    for part in parts:
        name = _KEYS.get(part.lower())
        if name is None:
            name = part.upper() if len(part) == 1 and part.isalpha() and len(parts) > 1 else part
            if len(part) > 1 and part[0] in "fF" and part[1:].isdigit():
                name = part.upper()
        out.append(name)
    return out


def vendor_scale(width: int, height: int, max_edge: int = ANTHROPIC_MAX_EDGE, max_pixels: int = 0) -> float:
    """The largest scale <= 1 at which a width x height screenshot fits the vendor's limits."""
    scale = min(1.0, max_edge / max(width, height))
    if max_pixels:
        scale = min(scale, math.sqrt(max_pixels / (width * height)))
    return scale


@dataclasses.dataclass(frozen=True)
class Step:
    """What one vendor action came to.

    Attributes:
        ok: it ran (DONE), or it was a read (screenshot, wait, cursor position).
        message: what happened, or why not and the one thing to do next.
        result: the executor's result of the action, when one was sent.
        approved: a safety check's approval was asked for and the action ran with it.
    """

    ok: bool
    message: str
    result: ActionResult | None = None
    approved: bool = False


_NEXT = {
    "STALE_REF": "look at the new screenshot and act again",
    "TARGET_CHANGED": "look at the new screenshot and act again",
    "STALE_OBSERVATION": "look at the new screenshot and act again",
    "OUT_OF_SCOPE": "this is outside what you are allowed to do: ask the user",
    "POLICY_FORBID": "this is forbidden here: ask the user",
    "APPROVAL_REQUIRED": "an operator has not approved it yet: wait, then try again",
    "APPROVAL_DENIED": "the operator said no: do not try it again",
    "APPROVAL_EXPIRED": "no operator answered in time: ask the user",
    "HELD_BY_HUMAN": "a person is in control: wait until they hand back",
    "RECONCILE_REQUIRED": "an earlier action's outcome is unknown: stop and ask the user",
}


class GuardedComputer:
    """A Handrail browser session driven by pixel actions of screenshots.

    Args:
        session: an open browser session of the SDK (``ExecutorClient.open_session``).
        scale: the screenshots' scale (PNG pixels per CSS pixel); the model's points are
            in those pixels and are mapped back by the executor.
        approval_wait_ms: how long an action that asks for approval waits for an operator.
        timeout_ms: each action's bound.
    """

    def __init__(self, session: Session, *, scale: float = 1.0, approval_wait_ms: int = 60_000, timeout_ms: int = 0):
        self.session = session
        self.scale = scale
        self.approval_wait_ms = approval_wait_ms
        self.timeout_ms = timeout_ms
        self.obs: Observation | None = None  # the latest screenshot, the one the model sees
        self.cursor = (0, 0)  # in screenshot pixels
        self._last_click: tuple[int, int, str] | None = None  # (x, y, observation id)
        self.approval_asked = ""  # set by an adapter for the actions a safety check covers

    # -- reading ----------------------------------------------------------------------

    @property
    def size(self) -> tuple[int, int]:
        """The screenshots' size in pixels (the vendor's display size)."""
        obs = self.obs or self.session.latest
        width, height = (obs.viewport_width, obs.viewport_height) if obs and obs.viewport_width else (1280, 800)
        return round(width * self.scale), round(height * self.scale)

    def screenshot(self) -> bytes:
        """A fresh observation with a screenshot at the vendor's scale; it is what actions cite."""
        self.obs = self.session.observe(screenshot=True, screenshot_scale=self.scale if self.scale < 1 else 0.0)
        return self.obs.screenshot_png

    def zoom(self, x0: int, y0: int, x1: int, y1: int) -> bytes:
        """The region (x0, y0)-(x1, y1) of the screen at full resolution (a read).

        Taken from a full-resolution observation, then the vendor-scale screenshot is taken
        again so that the next action cites what the model last saw whole.
        """
        from PIL import Image

        full = self.session.observe(screenshot=True)
        s = self.scale
        box = tuple(round(v / s) for v in (min(x0, x1), min(y0, y1), max(x0, x1), max(y0, y1)))
        with Image.open(io.BytesIO(full.screenshot_png)) as img:
            out = io.BytesIO()
            img.crop(box).save(out, format="PNG")  # type: ignore[arg-type]
        self.screenshot()
        return out.getvalue()

    def url(self) -> str:
        obs = self.obs or self.session.latest
        return obs.url if obs else ""

    # -- acting -----------------------------------------------------------------------

    def _common(self) -> dict[str, Any]:
        kw: dict[str, Any] = {"skip_reobserve": True}
        if self.obs is not None:
            kw["observation"] = self.obs
        if self.timeout_ms:
            kw["timeout_ms"] = self.timeout_ms
        if self.approval_asked:
            kw["approval_asked"] = self.approval_asked
            kw["approval_wait_ms"] = self.approval_wait_ms
        return kw

    def _step(self, response: ActResponse, what: str) -> Step:
        r = response.result
        if r.outcome is Outcome.DONE:
            return Step(True, f"{what}: done", r, approved=bool(self.approval_asked))
        reason = str(r.reason or "")
        nxt = _NEXT.get(reason, "look at the new screenshot before anything else")
        return Step(False, f"{what}: {r.outcome.value} {reason}: {r.message}. Next: {nxt}", r)

    def _point(self, x: int, y: int, css: bool) -> dict[str, Any]:
        return {"x": x, "y": y, "point_space": "css" if css else "screenshot"}

    def _act(self, kind: ActionKind, what: str, **kw: Any) -> Step:
        if "point_space" in kw:
            kw["point_space"] = PointSpace(kw["point_space"])
        try:
            return self._step(self.session.act(kind, **self._common(), **kw), what)
        except ExecutorError as exc:  # the executor refused the call (a bad point ...): one line
            field = getattr(exc, "field", "")
            return Step(False, f"{what}: not sent: {exc}" + (f" (field {field})" if field else ""))

    def click(
        self,
        x: int,
        y: int,
        *,
        button: str = "left",
        count: int = 1,
        modifiers: tuple[str, ...] = (),
        css: bool = False,
    ) -> Step:
        self.cursor = (x, y)
        kind = ActionKind.DOUBLE_CLICK if count == 2 else ActionKind.CLICK
        extra: dict[str, Any] = {"button": "" if button == "left" else button, "keys": modifiers}
        if count not in (1, 2):
            extra["click_count"] = count
        step = self._act(kind, f"{button} click x{count} at ({x}, {y})", **self._point(x, y, css), **extra)
        if self.obs is not None and step.ok:
            self._last_click = (x, y, self.obs.observation_id) if not css else None
        return step

    def move(self, x: int, y: int, *, css: bool = False) -> Step:
        self.cursor = (x, y)
        return self._act(ActionKind.MOVE, f"move to ({x}, {y})", **self._point(x, y, css))

    def drag(self, x: int, y: int, to_x: int, to_y: int, *, modifiers: tuple[str, ...] = (), css: bool = False) -> Step:
        self.cursor = (to_x, to_y)
        what = f"drag from ({x}, {y}) to ({to_x}, {to_y})"
        return self._act(ActionKind.DRAG, what, to_x=to_x, to_y=to_y, keys=modifiers, **self._point(x, y, css))

    def scroll(self, x: int, y: int, delta_x: int, delta_y: int, *, css: bool = False) -> Step:
        what = f"scroll by ({delta_x}, {delta_y}) at ({x}, {y})"
        return self._act(ActionKind.SCROLL, what, delta_x=delta_x, delta_y=delta_y, **self._point(x, y, css))

    def _focused(self) -> str:
        obs = self.obs or self.session.latest
        for element in obs.elements if obs else ():
            if element.focused:
                return element.ref
        return ""

    def type(self, text: str, *, at: tuple[int, int] | None = None, css: bool = False) -> Step:
        """Type into the field at ``at``, else the focused one, else the one just clicked."""
        what = f"type {len(text)} characters"
        if at is not None:
            return self._act(ActionKind.TYPE, what, text=text, **self._point(*at, css))
        ref = self._focused()
        if ref:
            return self._act(ActionKind.TYPE, what, ref=ref, text=text)
        last = self._last_click
        if last is not None and self.obs is not None and last[2] == self.obs.observation_id:
            return self._act(ActionKind.TYPE, what, text=text, **self._point(last[0], last[1], False))
        return Step(False, f"{what}: no field has the focus. Next: click the field first")

    def fill(self, text: str) -> Step:
        """Replace the focused field's value (a clear, then the text)."""
        ref = self._focused()
        if not ref:
            return Step(False, "fill: no field has the focus. Next: click the field first")
        return self._act(ActionKind.FILL, f"fill {len(text)} characters", ref=ref, text=text)

    def keys(self, chord: str | list[str]) -> Step:
        """Press a key or a chord, into the focused element when one has the focus."""
        keys = playwright_keys(chord)
        what = f"press {'+'.join(keys)}"
        ref = self._focused()
        if len(keys) == 1:
            return self._act(ActionKind.PRESS, what, key=keys[0], **({"ref": ref} if ref else {}))
        return self._act(ActionKind.HOTKEY, what, keys=tuple(keys), **({"ref": ref} if ref else {}))

    def navigate(self, url: str) -> Step:
        return self._act(ActionKind.NAVIGATE, f"navigate to {url}", url=url)

    def back(self) -> Step:
        return self._act(ActionKind.BACK, "back")

    def wait(self, seconds: float) -> Step:
        time.sleep(max(0.0, min(seconds, 60.0)))
        return Step(True, f"waited {seconds:g} s")
