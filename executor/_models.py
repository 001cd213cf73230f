"""Plain data of the executor: actions, observations and results.

These are what the core works with; ``_wire`` is the only module that maps them to and
from the wire messages. The words they are written in — action kinds, outcomes, evidence
levels, verdicts and reasons — are the shared vocabulary of ``handrail._vocabulary``,
re-exported here as the very same objects.
"""

from __future__ import annotations

import enum
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from handrail._vocabulary import ActionKind, Evidence, Outcome, Reason, Verdict
from handrail.executor._elements import Box, Context, Element
from handrail.executor._errors import raise_for_outcome

__all__ = [
    "BROWSER_KINDS",
    "BROWSER_POINT_KINDS",
    "BROWSER_REF_KINDS",
    "DEFAULT_ACTION_TIMEOUT_MS",
    "DESKTOP_KINDS",
    "ActResponse",
    "ActionKind",
    "ActionResult",
    "ActionSpec",
    "BackendKind",
    "BatchResult",
    "Box",
    "Context",
    "DesktopState",
    "DesktopTarget",
    "DialogInfo",
    "Element",
    "Evidence",
    "Expectation",
    "FrameInfo",
    "Observation",
    "Outcome",
    "PointSpace",
    "PointTarget",
    "Reason",
    "SessionInfo",
    "TabInfo",
    "Verdict",
    "WaitFor",
    "WindowInfo",
    "raise_for_outcome",
]


#: How long an action may take when it does not say (``ActionSpec.timeout_ms`` 0).
DEFAULT_ACTION_TIMEOUT_MS = 5_000

# Browser actions that act on an element of the cited observation.
BROWSER_REF_KINDS = frozenset(
    {
        ActionKind.DRAG,  # by ref: from ref to to_ref
        ActionKind.CLICK,
        ActionKind.DOUBLE_CLICK,
        ActionKind.HOVER,
        ActionKind.FILL,
        ActionKind.TYPE,
        ActionKind.PRESS,
        ActionKind.SELECT,
        ActionKind.CHECK,
        ActionKind.UNCHECK,
        ActionKind.UPLOAD,
    }
)
BROWSER_KINDS = BROWSER_REF_KINDS | {
    ActionKind.NAVIGATE,
    ActionKind.SCROLL,
    ActionKind.BACK,
    ActionKind.WAIT_FOR,
    ActionKind.TAB_OPEN,
    ActionKind.TAB_SWITCH,
    ActionKind.TAB_CLOSE,
    ActionKind.DIALOG_ACCEPT,
    ActionKind.DIALOG_DISMISS,
    ActionKind.HOTKEY,
}
# Browser actions that may act at a point of a screenshot instead of at a ref.
BROWSER_POINT_KINDS = frozenset(
    {
        ActionKind.CLICK,
        ActionKind.DOUBLE_CLICK,
        ActionKind.HOVER,
        ActionKind.MOVE,
        ActionKind.DRAG,
        ActionKind.SCROLL,
        ActionKind.TYPE,
    }
)
DESKTOP_KINDS = frozenset(
    {
        ActionKind.CLICK,
        ActionKind.DOUBLE_CLICK,
        ActionKind.MOVE,
        ActionKind.DRAG,
        ActionKind.SCROLL,
        ActionKind.TYPE,
        ActionKind.PRESS,
        ActionKind.HOTKEY,
        ActionKind.ACTIVATE,
        ActionKind.WAIT_FOR,
    }
)


class BackendKind(enum.StrEnum):
    BROWSER = "browser"
    DESKTOP = "desktop"


class PointSpace(enum.StrEnum):
    """Where an action's x, y are measured (the wire's ``PointSpace``)."""

    NONE = ""  # browser: not a point action; desktop: as SCREENSHOT
    SCREENSHOT = "screenshot"  # pixels of the cited observation's screenshot
    CSS = "css"  # browser: CSS pixels of the viewport


@dataclass(frozen=True)
class Expectation:
    """What the agent expects to see after the action; checked on the re-observation.

    Every given part must hold: ``text_visible`` is visible (or, with ``gone``, is not),
    an element with ``role`` and ``name`` is visible (or gone), the URL matches
    ``url_matches``, and the field ``field_ref`` of the cited observation holds
    ``field_value``. ``within_ms`` bounds the wait for it.
    """

    text_visible: str = ""
    url_matches: str = ""
    role: str = ""
    name: str = ""
    gone: bool = False
    field_ref: str = ""
    field_value: str = ""
    within_ms: int = 0

    def __bool__(self) -> bool:
        return bool(self.text_visible or self.url_matches or self.role or self.field_ref)


@dataclass(frozen=True)
class WaitFor:
    """A bounded wait: text, an element by role and name, a URL, or a desktop window title."""

    text: str = ""
    role: str = ""
    name: str = ""
    url_matches: str = ""
    window_title: str = ""
    gone: bool = False

    def __bool__(self) -> bool:
        return bool(self.text or self.role or self.url_matches or self.window_title)


@dataclass(frozen=True)
class DesktopTarget:
    """How a desktop session picks its target window (first given selector wins)."""

    display: str = ""
    window_id: int = 0
    pid: int = 0
    wm_class: str = ""
    title_pattern: str = ""


@dataclass(frozen=True)
class WindowInfo:
    window_id: int
    pid: int
    wm_class: str
    title: str
    x: int
    y: int
    width: int
    height: int


@dataclass(frozen=True)
class DesktopState:
    screen_width: int
    screen_height: int
    target: WindowInfo
    active: WindowInfo | None
    stacking: tuple[WindowInfo, ...]
    screenshot_of_target: bool = False
    screenshot_x: int = 0
    screenshot_y: int = 0


@dataclass(frozen=True)
class TabInfo:
    tab_id: str
    url: str
    title: str
    active: bool


@dataclass(frozen=True)
class FrameInfo:
    frame_id: str
    name: str
    url: str


@dataclass(frozen=True)
class DialogInfo:
    type: str
    message: str


@dataclass(frozen=True)
class PointTarget:
    """A browser point action as the loop bound it (``_points``; never on the wire).

    ``x``, ``y`` (and a drag's ``to_x``, ``to_y``) in CSS pixels of the viewport;
    ``to_ref`` the element that was under a drag's end point ("" when none).
    """

    x: float
    y: float
    to_x: float = 0.0
    to_y: float = 0.0
    to_ref: str = ""


@dataclass(frozen=True)
class ActionSpec:
    """One write action as the agent asked for it."""

    kind: ActionKind
    observation_id: str
    idempotency_key: str
    ref: str = ""
    text: str = ""
    key: str = ""
    values: tuple[str, ...] = ()
    url: str = ""
    expect: Expectation = field(default_factory=Expectation)
    timeout_ms: int = 0
    x: int = 0
    y: int = 0
    to_x: int = 0
    to_y: int = 0
    to_ref: str = ""  # a browser drag by ref: the drop target's ref
    button: str = ""
    click_count: int = 0
    delta_x: int = 0
    delta_y: int = 0
    key_delay_ms: int = 0
    files: tuple[str, ...] = ()
    tab_id: str = ""
    wait_for: WaitFor = field(default_factory=WaitFor)
    keys: tuple[str, ...] = ()
    approval_wait_ms: int = 0
    skip_reobserve: bool = False
    point_space: PointSpace = PointSpace.NONE
    approval_asked: str = ""  # why an operator's approval is asked for (a vendor's safety check)
    # Set by the loop once a browser point is bound (``ref`` is then the bound element's).
    bound_point: PointTarget | None = None

    @property
    def at_point(self) -> bool:
        """A browser action at a point (x, y) rather than at a ref."""
        return self.point_space is not PointSpace.NONE

    def fingerprint(self, role: str, name: str, end: tuple[str, str] = ("", "")) -> str:
        """A digest of what the action does, independent of refs and observations.

        A retry with the same idempotency key after a fresh observation cites a new ref
        for the same element: it is the same action. The target is therefore named by its
        role and accessible name, not by its ref (and a drag's drop target, ``end``, too).
        """
        doc = {
            "kind": self.kind.value,
            "role": role,
            "name": name,
            "text": self.text,
            "key": self.key,
            "values": list(self.values),
            "url": self.url,
            "point": [self.x, self.y, self.to_x, self.to_y],
            "button": self.button,
            "click_count": self.click_count,
            "delta": [self.delta_x, self.delta_y],
            "files": list(self.files),
            "tab_id": self.tab_id,
            "keys": list(self.keys),
        }
        if self.point_space:
            doc["point_space"] = self.point_space.value
        if self.to_ref:
            doc["end"] = list(end)
        if self.approval_asked:
            doc["approval_asked"] = self.approval_asked
        raw = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return hashlib.sha256(raw.encode()).hexdigest()

    def ledger_params(self, role: str, name: str) -> dict[str, Any]:
        """The parameters written to the ledger (typed text counts as input, kept)."""
        params: dict[str, Any] = {"kind": self.kind.value, "observation_id": self.observation_id}
        if self.ref:
            params.update(ref=self.ref, role=role, name=name)
        if self.text:
            params["text"] = self.text
        if self.key:
            params["key"] = self.key
        if self.values:
            params["values"] = list(self.values)
        if self.url:
            params["url"] = self.url
        extras = {
            "x": self.x,
            "y": self.y,
            "to_x": self.to_x,
            "to_y": self.to_y,
            "to_ref": self.to_ref,
            "button": self.button,
            "click_count": self.click_count,
            "delta_x": self.delta_x,
            "delta_y": self.delta_y,
            "key_delay_ms": self.key_delay_ms,
            "tab_id": self.tab_id,
            "point_space": self.point_space.value,
            "approval_asked": self.approval_asked,
        }
        params.update({k: v for k, v in extras.items() if v})
        if self.files:
            params["files"] = list(self.files)
        if self.keys:
            params["keys"] = list(self.keys)
        return params


@dataclass(frozen=True)
class Observation:
    """What a backend saw, with the id, generation and lease epoch actions cite.

    ``elements`` is the structured element list of a browser page (``Element``: one per
    node of the snapshot that has a ref, in document order): cited refs are resolved from
    it, never from ``snapshot``. With ``is_diff`` it holds only the elements added or
    changed since the previous observation, and ``elements_gone`` the refs that went away.
    """

    observation_id: str
    session_id: str
    generation: int
    lease_epoch: int
    url: str
    title: str
    snapshot: str
    digest: str
    taken_at_ms: int
    screenshot_png: bytes = b""
    screenshot_scale: float = 1.0
    tabs: tuple[TabInfo, ...] = ()
    active_tab: str = ""
    frames: tuple[FrameInfo, ...] = ()
    dialogs: tuple[DialogInfo, ...] = ()
    viewport_width: int = 0
    viewport_height: int = 0
    mutation_counter: int = 0
    is_diff: bool = False
    diff: str = ""
    desktop: DesktopState | None = None
    elements: Sequence[Element] = ()
    elements_gone: tuple[str, ...] = ()


@dataclass(frozen=True)
class ActionResult:
    """How one action ended; ``reason`` is a ``Reason`` (or ``""`` when none was given)."""

    action_id: str
    outcome: Outcome
    reason: str
    message: str
    execution_started: bool
    evidence: Evidence
    idempotency_key: str
    decision_id: str = ""
    typed_chars: int = 0
    approval_id: str = ""
    policies: tuple[str, ...] = ()


@dataclass(frozen=True)
class ActResponse:
    result: ActionResult
    observation: Observation | None = None

    def raise_for_outcome(self) -> ActResponse:
        """Return self if the action is DONE (or RECONCILED); else raise its typed error."""
        raise_for_outcome(self.result)
        return self


@dataclass(frozen=True)
class BatchResult:
    """What a batch did; ``stop`` is ``""`` (every action ran), ``"not_done"`` or
    ``"surface_changed"``, and ``stop_reason`` says it in words."""

    results: tuple[ActionResult, ...]
    not_started: tuple[int, ...]
    stop_reason: str = ""
    observation: Observation | None = None
    stop: str = ""


@dataclass(frozen=True)
class SessionInfo:
    """An open session; ``lease_epoch`` 0 means no lease is held, ``lease_reason`` says why."""

    session_id: str
    target: str
    agent: str
    lease_epoch: int
    lease_reason: str = ""
    session_ttl_ms: int = 0
