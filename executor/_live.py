"""What the operator console asks of a session: its live screen, a person's input, a lookup.

Plain data and one protocol. A backend surface that can show its screen live and take a
person's input implements :class:`LiveSurface` besides ``Backend`` (the browser and the
desktop do; the scripted fake does too, for the loop's tests). The loop's side of it — who
may watch, the gate a person's input goes through, a request for a person — is
``_console``.

Coordinates: a point of a :class:`ScreenFrame`'s image maps to the surface as
``x = px * surface_width / image_width / page_scale`` and
``y = (py * surface_height / image_height - offset_top) / page_scale``
(:func:`view_to_surface`): CSS pixels of the page's viewport for a browser, client pixels
of the bound window for a desktop. A person's input names its point in those pixels.
"""

from __future__ import annotations

import enum
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Protocol

from handrail._vocabulary import ActionKind
from handrail.executor._backend import DispatchResult

__all__ = [
    "HUMAN_KINDS",
    "HumanInput",
    "LiveSurface",
    "PersonRequest",
    "PersonStatus",
    "ScreenBox",
    "ScreenFrame",
    "SessionSummary",
    "TimelineItem",
    "view_to_surface",
]

#: What a person may do on the live view.
HUMAN_KINDS = frozenset(
    {ActionKind.CLICK, ActionKind.DOUBLE_CLICK, ActionKind.MOVE, ActionKind.SCROLL, ActionKind.TYPE, ActionKind.PRESS}
)
POINTER_KINDS = frozenset({ActionKind.CLICK, ActionKind.DOUBLE_CLICK, ActionKind.MOVE, ActionKind.SCROLL})


@dataclass(frozen=True)
class ScreenFrame:
    """One frame of a session's live screen (see the module docstring for its geometry)."""

    image: bytes
    mime_type: str
    image_width: int
    image_height: int
    surface_width: float
    surface_height: float
    offset_top: float = 0.0
    page_scale: float = 1.0
    scroll_x: float = 0.0
    scroll_y: float = 0.0
    captured_at_ms: int = 0
    url: str = ""
    tab_id: str = ""
    seq: int = 0


def view_to_surface(frame: ScreenFrame, px: float, py: float) -> tuple[float, float]:
    """A point of ``frame``'s image, in the surface's pixels."""
    scale = frame.page_scale or 1.0
    x = px * frame.surface_width / max(1, frame.image_width) / scale
    y = (py * frame.surface_height / max(1, frame.image_height) - frame.offset_top) / scale
    return x, y


@dataclass(frozen=True)
class HumanInput:
    """One input of a person at the wheel, in the surface's pixels."""

    kind: ActionKind
    lease_epoch: int
    x: float = 0.0
    y: float = 0.0
    text: str = ""
    key: str = ""
    delta_x: int = 0
    delta_y: int = 0
    button: str = ""
    input_id: str = ""

    def ledger_params(self) -> dict[str, object]:
        """The parameters the ledger records (``by: person``; typed text kept, as an agent's)."""
        params: dict[str, object] = {"kind": self.kind.value, "by": "person"}
        if self.kind in POINTER_KINDS:
            params.update(x=round(self.x), y=round(self.y))
        if self.button:
            params["button"] = self.button
        if self.text:
            params["text"] = self.text
        if self.key:
            params["key"] = self.key
        if self.delta_x or self.delta_y:
            params.update(delta_x=self.delta_x, delta_y=self.delta_y)
        return params


@dataclass(frozen=True)
class ScreenBox:
    """An element's box in the surface's pixels."""

    x: float
    y: float
    width: float
    height: float


class PersonStatus(enum.StrEnum):
    """Where an agent's request for a person stands."""

    WAITING = "WAITING"
    WITH_PERSON = "WITH_PERSON"
    HANDED_BACK = "HANDED_BACK"


@dataclass
class PersonRequest:
    """An agent's request that a person take the wheel (mutable: its status moves on)."""

    request_id: str
    session_id: str
    target: str
    agent: str
    reason: str
    asked_at_ms: int
    status: PersonStatus = PersonStatus.WAITING
    taken_by: str = ""
    taken_at_epoch: int = 0
    ended_at_ms: int = 0
    lease_epoch: int = 0


@dataclass(frozen=True)
class TimelineItem:
    """One ledger entry of a session, readable."""

    seq: int
    at_ms: int
    kind: str
    action_id: str
    principal: str
    principal_kind: str
    epoch: int
    outcome: str
    reason: str
    line: str


@dataclass(frozen=True)
class SessionSummary:
    """One open session as the console's overview shows it."""

    session_id: str
    target: str
    agent: str
    backend: str
    lease_epoch: int
    human_holds: bool
    url: str = ""
    title: str = ""
    latest_observation_id: str = ""
    last_action_id: str = ""
    last_action: str = ""
    last_outcome: str = ""
    last_action_at_ms: int = 0
    unknown_actions: tuple[str, ...] = ()
    person_request: PersonRequest | None = None
    live_view: bool = False
    snapshot: str = ""


class LiveSurface(Protocol):
    """A surface that can be watched and driven by a person (see the module docstring)."""

    def live_frames(self, max_width: int, max_height: int, quality: int) -> AsyncIterator[ScreenFrame]:
        """Frames of the screen as it changes, until the consumer stops."""
        ...

    async def human_input(self, spec: HumanInput, timeout_ms: int) -> DispatchResult:
        """Send one input of a person; the surface checks only that it can land (bounds)."""
        ...

    def current_url(self) -> str:
        """The URL a person's input goes to (browser); ``""`` on a desktop."""
        ...

    async def locate(self, role: str, name: str) -> ScreenBox | None:
        """Where the one element with ``role`` and exact ``name`` is now; None: not one."""
        ...
