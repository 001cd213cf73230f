"""The desktop's live view and a person's input: frames of the bound window, and XTest input.

Frames are screenshots of the bound window's client area (mss), sent when they change, at
most ``_FPS`` a second. A frame's surface is the client area: a point of the image maps
to client pixels by the frame's scale (see ``executor._live``).

A person's input goes through the same surface checks as an agent's, on the window as it
is now: no person at the physical desk, the target is the active window (and, for keys,
holds the keyboard focus), the point lies in its client area with nothing on top of it.
Then it is sent as the agent's would be (``_input``), into the bound window only.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import AsyncIterator

from handrail.executor._backend import DispatchResult, DispatchStatus
from handrail.executor._live import HumanInput, ScreenFrame
from handrail.executor._models import ActionKind, ActionSpec, DesktopState, Observation
from handrail.executor.desktop._checks import POINTER_KINDS, Checker, Planned
from handrail.executor.desktop._input import MAX_SCROLL_NOTCHES, DesktopInput, root_point
from handrail.executor.desktop._screenshots import Screenshots
from handrail.executor.desktop._x11 import X11, Rect, WindowGoneError

_FPS = 10
_KEEPALIVE_S = 2.0  # an unchanged window is sent again this often (a late viewer sees it)
_PIXELS_PER_NOTCH = 100


class DesktopLive:
    """The live view of one bound window and a person's input into it.

    Args:
        x: the surface's X connection.
        window_id: the bound window.
        screenshots: the surface's screenshot worker.
        send: the surface's input (which checks again under the server grab it sends in).
        checker: the surface's checks of an action against the window as it is.
    """

    def __init__(self, x: X11, window_id: int, screenshots: Screenshots, send: DesktopInput, checker: Checker) -> None:
        self._x = x
        self._window_id = window_id
        self._screenshots = screenshots
        self._input = send
        self._checker = checker

    def _now_observed(self) -> Observation:
        """The window as it is now, as an observation a person's input cites (scale 1)."""
        target = self._x.info(self._window_id)
        width, height = self._x.screen_size()
        state = DesktopState(width, height, target, None, (), True, target.x, target.y)
        return Observation("person", "", 0, 0, "", target.title, "", "", int(time.time() * 1000), desktop=state)

    async def frames(self, max_width: int, max_height: int) -> AsyncIterator[ScreenFrame]:
        seq, last, sent_at = 0, b"", 0.0
        while True:
            started = time.monotonic()
            try:
                rect = self._x.client_rect(self._window_id)
                width, height = self._x.screen_size()
            except WindowGoneError:
                return
            visible = Rect(max(0, rect.x), max(0, rect.y), 0, 0)
            visible = Rect(
                visible.x, visible.y, min(rect.width, width - visible.x), min(rect.height, height - visible.y)
            )
            if visible.width > 0 and visible.height > 0:
                scale = 1.0
                if max_width and visible.width > max_width:
                    scale = max_width / visible.width
                if max_height and visible.height * scale > max_height:
                    scale = max_height / visible.height
                png = await self._screenshots.grab(visible, scale)
                digest = hashlib.sha256(png).digest()
                if digest != last or time.monotonic() - sent_at > _KEEPALIVE_S:
                    last, sent_at, seq = digest, time.monotonic(), seq + 1
                    yield ScreenFrame(
                        image=png,
                        mime_type="image/png",
                        image_width=max(1, round(visible.width * scale)),
                        image_height=max(1, round(visible.height * scale)),
                        surface_width=float(visible.width),
                        surface_height=float(visible.height),
                        captured_at_ms=int(time.time() * 1000),
                        seq=seq,
                    )
            await asyncio.sleep(max(0.0, 1 / _FPS - (time.monotonic() - started)))

    async def human_input(self, spec: HumanInput, timeout_ms: int) -> DispatchResult:
        kind = spec.kind
        notches = 0
        if kind is ActionKind.SCROLL:
            notches = round(spec.delta_y / _PIXELS_PER_NOTCH) or (1 if spec.delta_y > 0 else -1 if spec.delta_y else 0)
            notches = max(-MAX_SCROLL_NOTCHES, min(MAX_SCROLL_NOTCHES, notches))
        action = ActionSpec(
            kind=kind,
            observation_id="person",
            idempotency_key=spec.input_id,
            x=round(spec.x),
            y=round(spec.y),
            text=spec.text,
            key=spec.key,
            button=spec.button,
            delta_y=notches,
        )
        try:
            cited = self._now_observed()
        except WindowGoneError:
            return DispatchResult(DispatchStatus.NOT_STARTED, f"the target window 0x{self._window_id:x} is gone")
        # The early check (the points; no key or button), then each input checked again
        # under the server grab it is sent in, exactly as an agent's (``_surface.dispatch``).
        points = (root_point(cited, action.x, action.y),) if kind in POINTER_KINDS else ()
        refusal = self._checker.check(cited, action, Planned(points=points))
        if refusal is not None:
            return DispatchResult(DispatchStatus.NOT_STARTED, refusal.message, reason=refusal.reason)
        if kind is ActionKind.TYPE:
            return await self._input.type(cited, action, spec.text, 0, timeout_ms)
        if kind is ActionKind.PRESS:
            return await self._input.press(cited, action, [spec.key] if len(spec.key) == 1 else spec.key.split("+"))
        return await self._input.pointer(cited, action)
