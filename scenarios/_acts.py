"""The scenario format's words and its ``act`` step: what an action asks and what it expects.

The words come from the one vocabulary (``handrail._vocabulary``): outcomes, reasons,
evidence levels, verdicts, verbs and action kinds. The format adds one outcome of its own,
``NONE``: the ledger holds no intent for the action (an executor killed before it).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_validator

from handrail._vocabulary import ActionKind, Evidence, Outcome, Reason

__all__ = [
    "ACT_FAULTS",
    "ACT_KINDS",
    "ACT_ONLY_FAULTS",
    "BROWSER_KINDS",
    "DESKTOP_KINDS",
    "FAULT_KINDS",
    "KILL_POINTS",
    "NO_INTENT",
    "OUTCOMES",
    "REASONS",
    "ActFault",
    "ActSpec",
    "DecideWhileWaiting",
    "DropConnection",
    "Expectation",
    "Expected",
    "ExpectedOutcome",
    "KillExecutor",
    "Target",
    "Within",
    "one_of",
    "ref_from_text",
]

NO_INTENT = "NONE"
"""The outcome of an action the ledger holds no intent for (an executor killed before it)."""

OUTCOMES: tuple[str, ...] = (*(o.value for o in Outcome), NO_INTENT)
"""Outcomes a step may expect: the vocabulary's, and :data:`NO_INTENT`."""

REASONS: tuple[str, ...] = tuple(r.value for r in Reason)
"""Reason codes (decision reasons and executor refusals)."""

BROWSER_KINDS: tuple[ActionKind, ...] = (
    ActionKind.CLICK,
    ActionKind.DOUBLE_CLICK,
    ActionKind.HOVER,
    ActionKind.FILL,
    ActionKind.TYPE,
    ActionKind.PRESS,
    ActionKind.SELECT,
    ActionKind.CHECK,
    ActionKind.UNCHECK,
    ActionKind.NAVIGATE,
)
"""Action kinds a browser session's step may ask for."""

DESKTOP_KINDS: tuple[ActionKind, ...] = (
    ActionKind.CLICK,
    ActionKind.DOUBLE_CLICK,
    ActionKind.TYPE,
    ActionKind.PRESS,
    ActionKind.ACTIVATE,
)
"""Action kinds a desktop session's step may ask for."""

ACT_KINDS: tuple[str, ...] = tuple(dict.fromkeys(k.value for k in (*BROWSER_KINDS, *DESKTOP_KINDS)))
"""Action kinds a step may ask for (the executor offers more)."""

FAULT_KINDS = (
    "drop_connection",
    "kill_executor",
    "takeover",
    "hand_back",
    "revoke",
    "grant",
    "expire_lease",
    "acquire_lease",
    "rerender",
    "open_modal",
    "steal_focus",
    "stop_authz",
    "start_authz",
    "approve",
    "deny",
    "move_window",
    "restart_app",
)
"""Faults and operator events. ``drop_connection`` and ``kill_executor`` ride on an ``act``
step; ``approve`` and ``deny`` are steps of their own or ride on an act that waits for the
decision (``approval_wait_ms``); the rest are steps."""

ACT_FAULTS = ("drop_connection", "kill_executor", "approve", "deny")
"""Faults that may ride on an act step."""

ACT_ONLY_FAULTS = ("drop_connection", "kill_executor")
"""Faults that ride on an act step only."""

KILL_POINTS = ("before-intent", "after-intent", "after-dispatch", "after-result")
"""Where the executor may be killed during an action."""


def ref_from_text(snapshot: str, role: str, name: str) -> str:
    """The ref a text-reading agent takes for ``role "name"``: that of the first line of
    the snapshot's text that reads so, whatever node the line belongs to.

    Raises:
        LookupError: no line reads so.
    """
    m = re.search(re.escape(f"{role} {json.dumps(name, ensure_ascii=False)}") + r"[^\n]*?\[ref=([a-z0-9]+)\]", snapshot)
    if m is None:
        raise LookupError(f"no line of the snapshot's text reads {role} {name!r} [ref=...]")
    return m.group(1)


def _alternatives(allowed: Sequence[str]) -> str:
    quoted = [repr(a) for a in allowed]
    return ", ".join(quoted[:-1]) + f" or {quoted[-1]}" if len(quoted) > 1 else "".join(quoted)


def one_of(allowed: Sequence[str]) -> Callable[[Any], Any]:
    """A before-validator that takes only ``allowed`` and lists them when refusing."""

    def check(value: Any) -> Any:
        if value not in allowed:
            raise ValueError(f"input should be {_alternatives(allowed)}")
        return value

    return check


ExpectedOutcome = Annotated[str, BeforeValidator(one_of(OUTCOMES))]
"""An outcome a step may expect: one of :data:`OUTCOMES`."""


class Model(BaseModel):
    """Base of the format's models: no unknown keys, frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class Within(Model):
    """A container the target sits in, by role and name (see the SDK's ``find``)."""

    role: str = Field(min_length=1)
    name: str


class Target(Model):
    """The element an action is for, by ARIA role and accessible name.

    ``within`` narrows it to a container (a row, a list item, a dialog, a form, any
    ancestor) of that role and name: ``{role: row, name: Plan E}``. ``read_from: text``
    plays an agent that reads refs out of the snapshot's text instead of its structure:
    the ref of the first line that reads ``ROLE "NAME" ... [ref=...]``, wherever that
    line comes from (page text included).
    """

    role: str = Field(min_length=1)
    name: str
    within: Within | None = None
    read_from: Literal["structure", "text"] = "structure"

    def describe(self) -> str:
        text = f"{self.role} {self.name!r}"
        if self.within is not None:
            text += f" within {self.within.role} {self.within.name!r}"
        if self.read_from == "text":
            text += " (ref read from the text)"
        return text


class Expected(Model):
    """The result a step expects. Written as a mapping or as ``"REFUSED STALE_REF"``.

    ``reason`` may list alternatives (any one of them passes).
    """

    outcome: ExpectedOutcome = Outcome.DONE.value
    reason: str | list[str] | None = None
    evidence: Evidence | None = None
    execution_started: bool | None = None

    @model_validator(mode="before")
    @classmethod
    def _from_text(cls, value: Any) -> Any:
        if isinstance(value, str):
            words = value.split()
            out: dict[str, Any] = {"outcome": words[0] if words else ""}
            if len(words) > 1:
                out["reason"] = words[1] if len(words) == 2 else words[1:]
            return out
        return value

    @field_validator("reason")
    @classmethod
    def _known_reasons(cls, value: str | list[str] | None) -> str | list[str] | None:
        for reason in [value] if isinstance(value, str) else value or []:
            if reason not in REASONS:
                raise ValueError(f"unknown reason {reason!r} (known: {', '.join(REASONS)})")
        return value

    def reasons(self) -> tuple[str, ...]:
        if self.reason is None:
            return ()
        return (self.reason,) if isinstance(self.reason, str) else tuple(self.reason)

    def describe(self) -> str:
        text = self.outcome
        if self.reason is not None:
            text += " " + "|".join(self.reasons())
        if self.evidence is not None:
            text += f" (evidence {self.evidence})"
        return text


class Expectation(Model):
    """The agent's own expectation, sent with the action and checked by the executor."""

    text: str = ""
    url: str = ""


class DropConnection(Model):
    """The fixture handles the action's request, then drops the connection (no reply)."""

    kind: Literal["drop_connection"]
    path: str = Field(pattern=r"^/")
    outage_s: float = Field(default=1.0, ge=0)


class KillExecutor(Model):
    """The executor SIGKILLs itself at ``point`` of this action; the replay restarts it."""

    kind: Literal["kill_executor"]
    point: Annotated[str, BeforeValidator(one_of(KILL_POINTS))]


class DecideWhileWaiting(Model):
    """An operator approves or denies the approval this act waits for, once it is asked."""

    kind: Literal["approve", "deny"]
    operator: str | None = None
    note: str = ""


ActFault = Annotated[DropConnection | KillExecutor | DecideWhileWaiting, Field(discriminator="kind")]


class ActSpec(Model):
    """One write action.

    ``observation`` names a labelled earlier observation to cite (default: the latest);
    ``idempotency_key`` defaults to a fresh key per step; ``url`` may be a path on the
    fixture app (``/receipt``) or a full URL.
    """

    kind: Annotated[ActionKind, BeforeValidator(one_of(ACT_KINDS))]
    target: Target | None = None
    text: str = ""
    keys: str = ""
    values: list[str] = Field(default_factory=list)
    url: str = ""
    secret: bool = False
    x: int | None = Field(default=None, ge=0)
    y: int | None = Field(default=None, ge=0)
    idempotency_key: str | None = Field(default=None, min_length=1)
    approval_wait_ms: int = Field(default=0, ge=0, le=60_000)
    session: str = "main"
    observation: str | None = None
    expectation: Expectation | None = None
    fault: ActFault | None = None
    expect: Expected = Field(default_factory=Expected)

    @field_validator("fault", mode="before")
    @classmethod
    def _fault_from_text(cls, value: Any) -> Any:
        value = {"kind": value} if isinstance(value, str) else value
        kind = value.get("kind") if isinstance(value, dict) else None
        if isinstance(kind, str) and kind not in ACT_FAULTS:
            where = "a fault step of its own" if kind in FAULT_KINDS else "unknown"
            raise ValueError(f"fault {kind!r} cannot ride on an act ({where}); here: {', '.join(ACT_FAULTS)}")
        return value

    @model_validator(mode="after")
    def _fields_for_kind(self) -> ActSpec:
        # Whether a target (browser) or a point (desktop) is needed depends on the
        # session's backend: checked with the whole scenario (_cross_check).
        if self.kind is ActionKind.NAVIGATE and not self.url:
            raise ValueError("a navigate action needs a url")
        if (self.x is None) != (self.y is None):
            raise ValueError("a point needs both x and y")
        if isinstance(self.fault, DecideWhileWaiting) and not self.approval_wait_ms:
            raise ValueError(f"the {self.fault.kind} fault rides on an act that waits: set approval_wait_ms")
        if self.kind in (ActionKind.FILL, ActionKind.TYPE) and not self.text:
            raise ValueError(f"a {self.kind} action needs text")
        if self.kind is ActionKind.PRESS and not self.keys:
            raise ValueError("a press action needs keys")
        if self.kind is ActionKind.SELECT and not self.values:
            raise ValueError("a select action needs values")
        return self

    def describe(self) -> str:
        """``click button 'Pay now'``; ``navigate http://...``; ``type with 'hi'``."""
        if self.kind is ActionKind.NAVIGATE:
            return f"navigate {self.url}"
        text = self.kind.value
        if self.target is not None:
            text += f" {self.target.describe()}"
        if self.x is not None:
            text += f" at ({self.x}, {self.y})"
        if self.text:
            text += " with " + ("[secret]" if self.secret else repr(self.text))
        if self.values:
            text += f" to {', '.join(self.values)}"
        if self.keys:
            text += f" {self.keys}"
        return text
