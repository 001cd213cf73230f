"""A scenario: its steps, principals, grants and sessions, as one validated model."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, Discriminator, Field, Tag, field_validator, model_validator

from handrail._vocabulary import Verb, Verdict

from ._acts import ACT_ONLY_FAULTS, FAULT_KINDS, ActSpec, Expected, Model, one_of
from ._checks import Checks, StateCheck
from ._faults import StepFault
from ._person_steps import AskForPersonSpec, ConsoleSpec, WaitForPersonSpec

__all__ = [
    "APPS",
    "DESKTOP_APPS",
    "ActStep",
    "AskForPersonStep",
    "CheckStep",
    "ConsoleStep",
    "FaultStep",
    "GrantSpec",
    "ObserveSpec",
    "ObserveStep",
    "Principals",
    "ReconcileSpec",
    "ReconcileStep",
    "Scenario",
    "SessionSpec",
    "Step",
    "WaitForPersonStep",
    "WaitSpec",
    "WaitStep",
]

APPS = ("subscription", "subscription-2fa", "checkout", "admin", "fetchshop", "plans", "notes")
"""The fixture apps a scenario may name."""

DESKTOP_APPS = ("notes",)
"""The fixture apps that run on an X display."""


class ObserveSpec(Model):
    session: str = "main"
    label: str | None = None


class ReconcileSpec(Model):
    """Record what really happened to an UNKNOWN action, named by its idempotency key.

    ``verdict`` states it; ``happened_if`` decides it from the fixture's real state
    (all checks hold => ``HAPPENED``). With both, the state must give the stated verdict.
    """

    key: str
    session: str = "main"
    verdict: Verdict | None = None
    happened_if: list[StateCheck] | None = None
    evidence: str = ""
    expect: Expected = Field(default_factory=lambda: Expected(outcome="RECONCILED"))

    @model_validator(mode="after")
    def _has_verdict(self) -> ReconcileSpec:
        if self.verdict is None and not self.happened_if:
            raise ValueError("a reconcile step needs a verdict or happened_if")
        return self


class WaitSpec(Model):
    """Wait ``seconds``, or until the grant named ``grant_expired`` has expired."""

    seconds: float = Field(default=0.0, ge=0, le=30)
    grant_expired: str | None = None


class ObserveStep(Model):
    observe: ObserveSpec = Field(default_factory=ObserveSpec)

    @field_validator("observe", mode="before")
    @classmethod
    def _empty(cls, value: Any) -> Any:
        return {} if value is None else value


class ActStep(Model):
    act: ActSpec


class FaultStep(Model):
    fault: StepFault

    @field_validator("fault", mode="before")
    @classmethod
    def _from_text(cls, value: Any) -> Any:
        value = {"kind": value} if isinstance(value, str) else value
        kind = value.get("kind") if isinstance(value, dict) else None
        if kind in ACT_ONLY_FAULTS:
            raise ValueError(f"the {kind} fault rides on an act step: put it in the act's `fault`")
        if isinstance(kind, str) and kind not in FAULT_KINDS:
            known = ", ".join(k for k in FAULT_KINDS if k not in ACT_ONLY_FAULTS)
            raise ValueError(f"unknown fault {kind!r} (known: {known})")
        return value


class ReconcileStep(Model):
    reconcile: ReconcileSpec


class WaitStep(Model):
    wait: WaitSpec

    @field_validator("wait", mode="before")
    @classmethod
    def _seconds(cls, value: Any) -> Any:
        return {"seconds": value} if isinstance(value, int | float) else value


class CheckStep(Model):
    check: list[StateCheck]


class AskForPersonStep(Model):
    ask_for_person: AskForPersonSpec


class WaitForPersonStep(Model):
    wait_for_person: WaitForPersonSpec


class ConsoleStep(Model):
    console: ConsoleSpec

    @field_validator("console", mode="before")
    @classmethod
    def _bare(cls, value: Any) -> Any:
        return {value: {}} if value in ("take_over", "hand_back") else value


_STEP_KINDS = ("observe", "act", "fault", "reconcile", "wait", "check", "ask_for_person", "wait_for_person", "console")


def _step_kind(value: Any) -> str | None:
    if isinstance(value, BaseModel):
        for kind in _STEP_KINDS:
            if kind in type(value).model_fields:
                return kind
    if isinstance(value, Mapping) and len(value) == 1:
        key = next(iter(value))
        return key if key in _STEP_KINDS else None
    return None


Step = Annotated[
    Annotated[ObserveStep, Tag("observe")]
    | Annotated[ActStep, Tag("act")]
    | Annotated[FaultStep, Tag("fault")]
    | Annotated[ReconcileStep, Tag("reconcile")]
    | Annotated[WaitStep, Tag("wait")]
    | Annotated[CheckStep, Tag("check")]
    | Annotated[AskForPersonStep, Tag("ask_for_person")]
    | Annotated[WaitForPersonStep, Tag("wait_for_person")]
    | Annotated[ConsoleStep, Tag("console")],
    Discriminator(
        _step_kind,
        custom_error_type="invalid_step",
        custom_error_message=(
            "a step is a mapping with one key: observe, act, fault, reconcile, wait, check, "
            "ask_for_person, wait_for_person or console"
        ),
    ),
]


# -- the scenario ----------------------------------------------------------------------


class Principals(Model):
    agents: list[str] = Field(default_factory=lambda: ["agent"], min_length=1)
    operators: list[str] = Field(default_factory=lambda: ["operator"])


class GrantSpec(Model):
    """A grant an operator makes; ``origins`` may say ``app`` for the fixture's origin.

    ``require_approval_verbs``: verbs that need an operator's approval even though granted
    (the check answers ``APPROVAL_REQUIRED``); ``approval_timeout_s``: the deadline of the
    approvals it asks for (then ``APPROVAL_EXPIRED``); ``single_use``: the first allowed
    action consumes it (then ``GRANT_EXHAUSTED``).
    """

    id: str
    principal: str | None = None  # default: the first agent
    target: str | None = None  # default: the scenario's target
    verbs: list[Verb] = Field(min_length=1)
    origins: list[str] = Field(default_factory=lambda: ["app"])
    expires_in_s: float = Field(default=0.0, ge=0)
    require_approval_verbs: list[Verb] = Field(default_factory=list)
    approval_timeout_s: float = Field(default=0.0, ge=0)
    single_use: bool = False
    note: str = ""
    at_start: bool = True
    operator: str | None = None

    @field_validator("expires_in_s")
    @classmethod
    def _lifetime(cls, value: float) -> float:
        if 0 < value < 1:  # the sidecar's floor for a grant's lifetime (ttl_ms)
            raise ValueError("a grant lives 0 (no expiry) or at least 1 second")
        return value


class SessionSpec(Model):
    """A session an agent opens at the start (and again after an executor restart)."""

    name: str = "main"
    agent: str | None = None  # default: the first agent
    target: str | None = None  # default: the scenario's target
    path: str = "/"
    backend: Literal["browser", "desktop"] = "browser"


class Scenario(Model):
    """One scenario file."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    description: str = ""
    covers: list[str] = Field(default_factory=list)
    requires: list[Literal["desktop"]] = Field(default_factory=list)
    app: Annotated[str, BeforeValidator(one_of(APPS))]
    initial_state: dict[str, Any] = Field(default_factory=dict)
    target: str | None = None  # default: browser:<name>
    principals: Principals = Field(default_factory=Principals)
    grants: list[GrantSpec] = Field(default_factory=list)
    sessions: list[SessionSpec] = Field(default_factory=lambda: [SessionSpec()], min_length=1)
    steps: list[Step] = Field(min_length=1)
    checks: Checks = Field(default_factory=Checks)

    @field_validator("steps", mode="before")
    @classmethod
    def _bare_observe(cls, value: Any) -> Any:
        if isinstance(value, list):
            return [{"observe": {}} if item == "observe" else item for item in value]
        return value

    @property
    def desktop(self) -> bool:
        """Whether the scenario drives a desktop (the ``notes`` app on an X display)."""
        return self.app in DESKTOP_APPS

    @property
    def default_target(self) -> str:
        return self.target or f"{'desktop' if self.desktop else 'browser'}:{self.name}"

    @property
    def first_agent(self) -> str:
        return self.principals.agents[0]

    @property
    def first_operator(self) -> str:
        return self.principals.operators[0] if self.principals.operators else ""

    def session(self, name: str) -> SessionSpec:
        return next(s for s in self.sessions if s.name == name)

    def grant(self, grant_id: str) -> GrantSpec:
        return next(g for g in self.grants if g.id == grant_id)

    def faults(self) -> list[str]:
        """Every fault kind the scenario uses, in step order."""
        kinds: list[str] = []
        for step in self.steps:
            if isinstance(step, FaultStep):
                kinds.append(step.fault.kind)
            elif isinstance(step, ActStep) and step.act.fault is not None:
                kinds.append(step.act.fault.kind)
        return kinds

    def needs_console(self) -> bool:
        """Whether a run plays an operator in the console (a ``console`` step)."""
        return any(isinstance(step, ConsoleStep) for step in self.steps)

    def needs_display(self) -> bool:
        """Whether a run needs an X display (Xvfb, openbox, Tk)."""
        return self.desktop or "desktop" in self.requires or any(s.backend == "desktop" for s in self.sessions)

    def skip_reason(self, *, display: str | None = None) -> str | None:
        """Why this scenario cannot run here, or None.

        Args:
            display: why no X display can be started here (None: one can).
        """
        if self.needs_display() and display is not None:
            return f"needs an X display: {display}"
        return None
