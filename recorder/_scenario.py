"""The scenario format: YAML files validated by a pydantic schema, errors with file and line.

A scenario names its fixture app and initial state, the principals and grants, the
sessions the agents open, and steps: ``observe``, ``act`` (a target by role and name —
refs are taken again at every replay, never stored), ``fault`` (takeover, revocation,
re-render, ...), ``reconcile``, ``wait`` and ``check``. It ends with checks of the
fixture's real state and of the ledger. ``docs/scenarios.md`` is the reference.

Example::

    from handrail.recorder._scenario import load_scenario

    scenario = load_scenario("scenarios/subscription-cancel.yaml")
    # scenarios/x.yaml:14: steps[3].act.target: field required  (a ScenarioError)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    ValidationError,
    field_validator,
    model_validator,
)

from handrail._errors import HandrailError

__all__ = [
    "ACT_KINDS",
    "FAULT_KINDS",
    "OUTCOMES",
    "REASONS",
    "ActSpec",
    "ActStep",
    "CheckStep",
    "Checks",
    "Expected",
    "FaultStep",
    "GrantSpec",
    "LedgerChecks",
    "LedgerCount",
    "ObserveStep",
    "ReconcileStep",
    "Scenario",
    "ScenarioError",
    "SessionSpec",
    "StateCheck",
    "Step",
    "WaitStep",
    "dump_scenario",
    "load_scenario",
    "parse_scenario",
]

OUTCOMES = ("DONE", "FAILED", "REFUSED", "UNKNOWN", "RECONCILED", "NONE")
"""Outcomes a step may expect; ``NONE`` means the ledger holds no intent for the action
(an executor killed before the intent)."""


ACT_KINDS = (
    "click",
    "double_click",
    "hover",
    "fill",
    "type",
    "press",
    "select",
    "check",
    "uncheck",
    "navigate",
    "activate",
)
"""Action kinds a step may ask for (the executor may not offer every one yet)."""

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
)
"""Faults and operator events. ``drop_connection`` and ``kill_executor`` ride on an ``act``
step; ``approve`` and ``deny`` are steps of their own or ride on an act that waits for the
decision (``approval_wait_ms``); the rest are steps."""

_ACT_FAULTS = ("drop_connection", "kill_executor", "approve", "deny")
_ACT_ONLY_FAULTS = ("drop_connection", "kill_executor")
APPS = ("subscription", "checkout", "admin", "notes")
DESKTOP_APPS = ("notes",)
KILL_POINTS = ("before-intent", "after-intent", "after-dispatch", "after-result")
VERBS = ("read", "input", "navigate", "submit", "purchase", "delete", "upload", "download")

Outcome = Literal["DONE", "FAILED", "REFUSED", "UNKNOWN", "RECONCILED", "NONE"]
ReasonName = Literal[
    "ALLOW",
    "UNAUTHENTICATED",
    "NO_LEASE",
    "STALE_EPOCH",
    "HELD_BY_HUMAN",
    "OUT_OF_SCOPE",
    "GRANT_EXPIRED",
    "GRANT_REVOKED",
    "GRANT_EXHAUSTED",
    "POLICY_FORBID",
    "APPROVAL_REQUIRED",
    "APPROVAL_DENIED",
    "APPROVAL_EXPIRED",
    "AUTHZ_UNAVAILABLE",
    "STALE_OBSERVATION",
    "STALE_REF",
    "TARGET_CHANGED",
    "FOCUS_MISMATCH",
    "IDEMPOTENCY_CONFLICT",
    "RECONCILE_REQUIRED",
]

REASONS: tuple[str, ...] = get_args(ReasonName)
"""Reason codes (decision reasons and executor refusals)."""
Verb = Literal["read", "input", "navigate", "submit", "purchase", "delete", "upload", "download"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ScenarioError(HandrailError):
    """A scenario file cannot be read or does not fit the schema.

    Attributes:
        problems: one ``FILE:LINE: PATH: MESSAGE`` line per problem.
    """

    reason = "INVALID_SCENARIO"

    def __init__(self, message: str, *, problems: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.problems = list(problems) or [message]


# -- act -------------------------------------------------------------------------------


class Target(_Model):
    """The element an action is for, by ARIA role and accessible name."""

    role: str = Field(min_length=1)
    name: str


class Expected(_Model):
    """The result a step expects. Written as a mapping or as ``"REFUSED STALE_REF"``.

    ``reason`` may list alternatives (any one of them passes).
    """

    outcome: Outcome = "DONE"
    reason: str | list[str] | None = None
    evidence: Literal["NONE", "DISPATCH_RETURNED", "OBSERVED", "VERIFIED"] | None = None
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
        text: str = self.outcome
        if self.reason is not None:
            text += " " + "|".join(self.reasons())
        if self.evidence is not None:
            text += f" (evidence {self.evidence})"
        return text


class Expectation(_Model):
    """The agent's own expectation, sent with the action and checked by the executor."""

    text: str = ""
    url: str = ""


class DropConnection(_Model):
    """The fixture handles the action's request, then drops the connection (no reply)."""

    kind: Literal["drop_connection"]
    path: str = Field(pattern=r"^/")
    outage_s: float = Field(default=1.0, ge=0)


class KillExecutor(_Model):
    """The executor SIGKILLs itself at ``point`` of this action; the replay restarts it."""

    kind: Literal["kill_executor"]
    point: Literal["before-intent", "after-intent", "after-dispatch", "after-result"]


class DecideWhileWaiting(_Model):
    """An operator approves or denies the approval this act waits for, once it is asked."""

    kind: Literal["approve", "deny"]
    operator: str | None = None
    note: str = ""


ActFault = Annotated[DropConnection | KillExecutor | DecideWhileWaiting, Field(discriminator="kind")]


class ActSpec(_Model):
    """One write action.

    ``observation`` names a labelled earlier observation to cite (default: the latest);
    ``idempotency_key`` defaults to a fresh key per step; ``url`` may be a path on the
    fixture app (``/receipt``) or a full URL.
    """

    kind: Literal[
        "click",
        "double_click",
        "hover",
        "fill",
        "type",
        "press",
        "select",
        "check",
        "uncheck",
        "navigate",
        "activate",
    ]
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
        if isinstance(kind, str) and kind not in _ACT_FAULTS:
            where = "a fault step of its own" if kind in FAULT_KINDS else "unknown"
            raise ValueError(f"fault {kind!r} cannot ride on an act ({where}); here: {', '.join(_ACT_FAULTS)}")
        return value

    @model_validator(mode="after")
    def _fields_for_kind(self) -> ActSpec:
        # Whether a target (browser) or a point (desktop) is needed depends on the
        # session's backend: checked with the whole scenario (_cross_check).
        if self.kind == "navigate" and not self.url:
            raise ValueError("a navigate action needs a url")
        if (self.x is None) != (self.y is None):
            raise ValueError("a point needs both x and y")
        if isinstance(self.fault, DecideWhileWaiting) and not self.approval_wait_ms:
            raise ValueError(f"the {self.fault.kind} fault rides on an act that waits: set approval_wait_ms")
        if self.kind in ("fill", "type") and not self.text:
            raise ValueError(f"a {self.kind} action needs text")
        if self.kind == "press" and not self.keys:
            raise ValueError("a press action needs keys")
        if self.kind == "select" and not self.values:
            raise ValueError("a select action needs values")
        return self

    def describe(self) -> str:
        """``click button 'Pay now'``; ``navigate http://...``; ``type with 'hi'``."""
        if self.kind == "navigate":
            return f"navigate {self.url}"
        text: str = self.kind
        if self.target is not None:
            text += f" {self.target.role} {self.target.name!r}"
        if self.x is not None:
            text += f" at ({self.x}, {self.y})"
        if self.text:
            text += " with " + ("[secret]" if self.secret else repr(self.text))
        if self.values:
            text += f" to {', '.join(self.values)}"
        if self.keys:
            text += f" {self.keys}"
        return text


# -- step faults -----------------------------------------------------------------------


class _StepFault(_Model):
    target: str | None = None  # default: the scenario's target


class Rerender(_StepFault):
    """Every open page of the fixture replaces its controls with identical fresh nodes."""

    kind: Literal["rerender"]


class OpenModal(_StepFault):
    """Every open page of the fixture opens a modal notice over its content."""

    kind: Literal["open_modal"]


class StealFocus(_StepFault):
    """Desktop: another window takes the focus.

    ``thief``: another application raises itself and grabs the focus; ``popup``: the
    target application's own "Notification" window opens and grabs it.
    """

    kind: Literal["steal_focus"]
    window: Literal["thief", "popup"] = "thief"


class MoveWindow(_StepFault):
    """Desktop: the target window moves to ``(x, y)`` on the screen (its client area changes)."""

    kind: Literal["move_window"]
    x: int = Field(ge=0)
    y: int = Field(ge=0)


class TakeOver(_StepFault):
    """An operator takes the control lease (the epoch goes up)."""

    kind: Literal["takeover"]
    operator: str | None = None
    note: str = ""


class HandBack(_StepFault):
    """The operator frees the lease, optionally for one agent (``to``)."""

    kind: Literal["hand_back"]
    operator: str | None = None
    to: str = ""


class Revoke(_StepFault):
    """An operator revokes a grant, named by its ``id`` in ``grants``."""

    kind: Literal["revoke"]
    grant: str
    operator: str | None = None


class MakeGrant(_StepFault):
    """An operator makes a grant declared with ``at_start: false``."""

    kind: Literal["grant"]
    grant: str
    operator: str | None = None


class ExpireLease(_StepFault):
    """An admin makes the target's lease lapse now."""

    kind: Literal["expire_lease"]


class AcquireLease(_StepFault):
    """Another worker of ``agent`` acquires the target's lease at the sidecar directly."""

    kind: Literal["acquire_lease"]
    agent: str | None = None


class Approve(_StepFault):
    """An operator approves the newest pending approval of ``agent`` (default: the first)."""

    kind: Literal["approve"]
    agent: str | None = None
    operator: str | None = None
    note: str = ""


class Deny(_StepFault):
    """An operator denies the newest pending approval of ``agent`` (default: the first)."""

    kind: Literal["deny"]
    agent: str | None = None
    operator: str | None = None
    note: str = ""


class StopAuthz(_StepFault):
    """The authz sidecar stops (its port stays reserved for ``start_authz``)."""

    kind: Literal["stop_authz"]


class StartAuthz(_StepFault):
    """The authz sidecar starts again on the same address."""

    kind: Literal["start_authz"]


StepFault = Annotated[
    Rerender
    | OpenModal
    | StealFocus
    | MoveWindow
    | TakeOver
    | HandBack
    | Revoke
    | MakeGrant
    | ExpireLease
    | AcquireLease
    | StopAuthz
    | StartAuthz
    | Approve
    | Deny,
    Field(discriminator="kind"),
]


# -- checks ----------------------------------------------------------------------------


class StateCheck(_Model):
    """A check of the fixture's real state.

    Exactly one of ``field`` (a dotted path into the state: ``users.alice.disabled``,
    ``orders.0.status``), ``requests`` (``"POST /pay"``: requests that reached the app)
    or ``lost`` (requests cut off during an outage); and ``equals``, ``at_least`` or
    ``at_most``.
    """

    field: str | None = None
    requests: str | None = None
    lost: str | None = None
    equals: Any = None
    at_least: int | None = None
    at_most: int | None = None

    @model_validator(mode="after")
    def _one_subject_one_test(self) -> StateCheck:
        subjects = [s for s in ("field", "requests", "lost") if getattr(self, s) is not None]
        if len(subjects) != 1:
            raise ValueError("a state check names exactly one of field, requests, lost")
        tests = [t for t in ("equals", "at_least", "at_most") if t in self.model_fields_set]
        if not tests:
            raise ValueError("a state check needs equals, at_least or at_most")
        return self

    def describe(self) -> str:
        subject = (
            f"field {self.field}"
            if self.field is not None
            else f"requests {self.requests!r}"
            if self.requests is not None
            else f"lost {self.lost!r}"
        )
        tests = []
        if "equals" in self.model_fields_set:
            tests.append(f"== {self.equals!r}")
        if self.at_least is not None:
            tests.append(f">= {self.at_least}")
        if self.at_most is not None:
            tests.append(f"<= {self.at_most}")
        return f"{subject} {' and '.join(tests)}"


class LedgerCount(_Model):
    """How many ledger entries of a ``kind`` match the filters."""

    kind: str = "result"
    outcome: Outcome | None = None
    reason: ReasonName | None = None
    idempotency_key: str | None = None
    equals: int | None = None
    at_least: int | None = None

    @model_validator(mode="after")
    def _has_test(self) -> LedgerCount:
        if self.equals is None and self.at_least is None:
            raise ValueError("a ledger count needs equals or at_least")
        return self

    def describe(self) -> str:
        filters = [f"kind {self.kind}"]
        for name in ("outcome", "reason", "idempotency_key"):
            value = getattr(self, name)
            if value is not None:
                filters.append(f"{name} {value}")
        test = f"== {self.equals}" if self.equals is not None else f">= {self.at_least}"
        return f"entries with {', '.join(filters)} {test}"


class LedgerChecks(_Model):
    """Checks of the ledger after the run (by default: it verifies, one DONE per key)."""

    verifies: bool = True
    unique_done_per_key: bool = True
    unresolved: int | None = None
    counts: list[LedgerCount] = Field(default_factory=list)


class Checks(_Model):
    state: list[StateCheck] = Field(default_factory=list)
    ledger: LedgerChecks = Field(default_factory=LedgerChecks)


# -- steps -----------------------------------------------------------------------------


class ObserveSpec(_Model):
    session: str = "main"
    label: str | None = None


class ReconcileSpec(_Model):
    """Record what really happened to an UNKNOWN action, named by its idempotency key.

    ``verdict`` states it; ``happened_if`` decides it from the fixture's real state
    (all checks hold => ``HAPPENED``). With both, the state must give the stated verdict.
    """

    key: str
    session: str = "main"
    verdict: Literal["HAPPENED", "DID_NOT_HAPPEN"] | None = None
    happened_if: list[StateCheck] | None = None
    evidence: str = ""
    expect: Expected = Field(default_factory=lambda: Expected(outcome="RECONCILED"))

    @model_validator(mode="after")
    def _has_verdict(self) -> ReconcileSpec:
        if self.verdict is None and not self.happened_if:
            raise ValueError("a reconcile step needs a verdict or happened_if")
        return self


class WaitSpec(_Model):
    """Wait ``seconds``, or until the grant named ``grant_expired`` has expired."""

    seconds: float = Field(default=0.0, ge=0, le=30)
    grant_expired: str | None = None


class ObserveStep(_Model):
    observe: ObserveSpec = Field(default_factory=ObserveSpec)

    @field_validator("observe", mode="before")
    @classmethod
    def _empty(cls, value: Any) -> Any:
        return {} if value is None else value


class ActStep(_Model):
    act: ActSpec


class FaultStep(_Model):
    fault: StepFault

    @field_validator("fault", mode="before")
    @classmethod
    def _from_text(cls, value: Any) -> Any:
        value = {"kind": value} if isinstance(value, str) else value
        kind = value.get("kind") if isinstance(value, dict) else None
        if kind in _ACT_ONLY_FAULTS:
            raise ValueError(f"the {kind} fault rides on an act step: put it in the act's `fault`")
        if isinstance(kind, str) and kind not in FAULT_KINDS:
            known = ", ".join(k for k in FAULT_KINDS if k not in _ACT_ONLY_FAULTS)
            raise ValueError(f"unknown fault {kind!r} (known: {known})")
        return value


class ReconcileStep(_Model):
    reconcile: ReconcileSpec


class WaitStep(_Model):
    wait: WaitSpec

    @field_validator("wait", mode="before")
    @classmethod
    def _seconds(cls, value: Any) -> Any:
        return {"seconds": value} if isinstance(value, int | float) else value


class CheckStep(_Model):
    check: list[StateCheck]


_STEP_KINDS = ("observe", "act", "fault", "reconcile", "wait", "check")


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
    | Annotated[CheckStep, Tag("check")],
    Discriminator(
        _step_kind,
        custom_error_type="invalid_step",
        custom_error_message=("a step is a mapping with one key: observe, act, fault, reconcile, wait or check"),
    ),
]


# -- the scenario ----------------------------------------------------------------------


class Principals(_Model):
    agents: list[str] = Field(default_factory=lambda: ["agent"], min_length=1)
    operators: list[str] = Field(default_factory=lambda: ["operator"])


class GrantSpec(_Model):
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


class SessionSpec(_Model):
    """A session an agent opens at the start (and again after an executor restart)."""

    name: str = "main"
    agent: str | None = None  # default: the first agent
    target: str | None = None  # default: the scenario's target
    path: str = "/"
    backend: Literal["browser", "desktop"] = "browser"


class Scenario(_Model):
    """One scenario file."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    description: str = ""
    covers: list[str] = Field(default_factory=list)
    requires: list[Literal["desktop"]] = Field(default_factory=list)
    app: Literal["subscription", "checkout", "admin", "notes"]
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


# -- loading ---------------------------------------------------------------------------


def _cross_check(s: Scenario) -> list[tuple[tuple[Any, ...], str]]:
    """Names that must refer to something declared: (location, message) pairs."""
    problems: list[tuple[tuple[Any, ...], str]] = []
    agents, operators = set(s.principals.agents), set(s.principals.operators)
    sessions = {x.name for x in s.sessions}
    grants = {g.id for g in s.grants}
    if len(sessions) != len(s.sessions):
        problems.append((("sessions",), "session names must be unique"))
    if len(grants) != len(s.grants):
        problems.append((("grants",), "grant ids must be unique"))
    for i, g in enumerate(s.grants):
        if g.principal is not None and g.principal not in agents:
            problems.append((("grants", i, "principal"), f"unknown agent {g.principal!r}"))
        if g.operator is not None and g.operator not in operators:
            problems.append((("grants", i, "operator"), f"unknown operator {g.operator!r}"))
        if g.operator is None and not operators:
            problems.append((("grants", i), "a grant needs an operator in principals"))
    backends: dict[str, str] = {}
    for i, x in enumerate(s.sessions):
        backends[x.name] = x.backend
        if x.agent is not None and x.agent not in agents:
            problems.append((("sessions", i, "agent"), f"unknown agent {x.agent!r}"))
        if (x.backend == "desktop") != s.desktop:
            wanted = "desktop" if s.desktop else "browser"
            problems.append((("sessions", i, "backend"), f"the {s.app} app is driven by a {wanted} session"))
    labels: set[str] = set()
    keys: set[str] = set()
    for i, step in enumerate(s.steps):
        where: tuple[Any, ...] = ("steps", i)
        if isinstance(step, ObserveStep):
            spec = step.observe
            if spec.session not in sessions:
                problems.append(((*where, "observe", "session"), f"no session {spec.session!r}"))
            if spec.label:
                labels.add(spec.label)
        elif isinstance(step, ActStep):
            act = step.act
            if act.session not in sessions:
                problems.append(((*where, "act", "session"), f"no session {act.session!r}"))
            if act.observation is not None and act.observation not in labels:
                problems.append(
                    (
                        (*where, "act", "observation"),
                        f"no earlier observation labelled {act.observation!r}",
                    )
                )
            if act.idempotency_key:
                keys.add(act.idempotency_key)
            problem = _act_problem(act, backends.get(act.session, "browser"))
            if problem is not None:
                problems.append(((*where, "act"), problem))
            if act.fault is not None and act.fault.kind == "drop_connection" and s.desktop:
                problems.append(((*where, "act", "fault"), "drop_connection needs a browser fixture app"))
            if isinstance(act.fault, DecideWhileWaiting) and act.fault.operator not in (None, *operators):
                problems.append(((*where, "act", "fault", "operator"), f"unknown operator {act.fault.operator!r}"))
        elif isinstance(step, ReconcileStep):
            rec = step.reconcile
            if rec.key not in keys:
                problems.append(((*where, "reconcile", "key"), f"no earlier act with key {rec.key!r}"))
            if rec.session not in sessions:
                problems.append(((*where, "reconcile", "session"), f"no session {rec.session!r}"))
        elif isinstance(step, FaultStep):
            fault = step.fault
            if isinstance(fault, Revoke | MakeGrant) and fault.grant not in grants:
                problems.append(((*where, "fault", "grant"), f"no grant {fault.grant!r}"))
            if isinstance(fault, TakeOver | HandBack | Revoke | MakeGrant):
                if fault.operator is not None and fault.operator not in operators:
                    problems.append(((*where, "fault", "operator"), f"unknown operator {fault.operator!r}"))
                if fault.operator is None and not operators:
                    problems.append((where, "this fault needs an operator in principals"))
            if isinstance(fault, HandBack) and fault.to and fault.to not in agents:
                problems.append(((*where, "fault", "to"), f"unknown agent {fault.to!r}"))
            if isinstance(fault, AcquireLease | Approve | Deny) and fault.agent and fault.agent not in agents:
                problems.append(((*where, "fault", "agent"), f"unknown agent {fault.agent!r}"))
            if isinstance(fault, Approve | Deny) and fault.operator not in (None, *operators):
                problems.append(((*where, "fault", "operator"), f"unknown operator {fault.operator!r}"))
            if isinstance(fault, StealFocus | MoveWindow) and not s.desktop:
                problems.append(((*where, "fault"), f"{fault.kind} needs a desktop app (app: notes)"))
            if isinstance(fault, Rerender | OpenModal) and s.desktop:
                problems.append(((*where, "fault"), f"{fault.kind} needs a browser fixture app"))
        elif isinstance(step, WaitStep):
            name = step.wait.grant_expired
            if name is not None:
                if name not in grants:
                    problems.append(((*where, "wait", "grant_expired"), f"no grant {name!r}"))
                elif not s.grant(name).expires_in_s:
                    problems.append(((*where, "wait", "grant_expired"), f"grant {name!r} never expires"))
    return problems


_DESKTOP_KINDS = ("click", "double_click", "type", "press", "activate")
_DESKTOP_POINT_KINDS = ("click", "double_click")


def _act_problem(act: ActSpec, backend: str) -> str | None:
    """What an act lacks or has too much of for its session's backend, or None."""
    if backend == "desktop":
        if act.kind not in _DESKTOP_KINDS:
            return f"a desktop session has no {act.kind} action (here: {', '.join(_DESKTOP_KINDS)})"
        if act.target is not None:
            return "a desktop action names no role and name: give a point (x, y) in the window"
        if act.kind in _DESKTOP_POINT_KINDS and act.x is None:
            return f"a desktop {act.kind} needs a point (x, y) in the window"
        return None
    if act.kind == "activate":
        return "activate is a desktop action"
    if act.x is not None:
        return "a browser action names its target by role and name, not by a point"
    if act.kind != "navigate" and act.target is None:
        return f"a {act.kind} action needs a target (role and name)"
    return None


def parse_scenario(text: str, source: str = "<scenario>") -> Scenario:
    """Parse and validate a scenario from YAML text.

    Args:
        text: the YAML document.
        source: the file name used in error messages.

    Raises:
        ScenarioError: the YAML is malformed or does not fit the schema; every problem is
            one line ``FILE:LINE: PATH: MESSAGE``.
    """
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else 1
        problem = getattr(exc, "problem", None) or str(exc)
        raise ScenarioError(f"{source}:{line}: malformed YAML: {problem}") from None
    if not isinstance(data, dict):
        raise ScenarioError(f"{source}:1: a scenario is a mapping (name, app, steps, ...)")
    if "name" not in data:
        stem = Path(source).stem
        data["name"] = stem if stem and not stem.startswith("<") else "scenario"
    try:
        scenario = Scenario.model_validate(data)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            path, line = _locate(root, data, err["loc"])
            msg = str(err["msg"])
            msg = msg[:1].lower() + msg[1:]
            if msg.startswith("value error, "):
                msg = msg[len("value error, ") :]
            problems.append((line, f"{source}:{line}: {path or '(top)'}: {msg}"))
        raise ScenarioError(
            "\n".join(text for _, text in sorted(problems, key=lambda p: p[0])),
            problems=[text for _, text in problems],
        ) from None
    cross = _cross_check(scenario)
    if cross:
        lines = []
        for loc, msg in cross:
            path, line = _locate(root, data, loc)
            lines.append(f"{source}:{line}: {path}: {msg}")
        raise ScenarioError("\n".join(lines), problems=lines)
    return scenario


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate one scenario file.

    Raises:
        ScenarioError: the file cannot be read, or it is not a valid scenario (with the
            file and line of each problem).
    """
    p = Path(path)
    try:
        text = p.read_text("utf-8")
    except OSError as exc:
        raise ScenarioError(f"{p}: cannot read: {exc.strerror}") from None
    return parse_scenario(text, str(p))


def dump_scenario(scenario: Scenario) -> str:
    """The scenario as YAML that :func:`parse_scenario` reads back to an equal scenario."""
    data = scenario.model_dump(mode="json", exclude_defaults=True)
    data["steps"] = [step.model_dump(mode="json", exclude_defaults=True) or {"observe": {}} for step in scenario.steps]
    for step in data["steps"]:
        if "observe" in step and step["observe"] == {}:
            step["observe"] = None
    text: str = yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=96)
    return text.replace("observe: null", "observe:")


# -- locating errors -------------------------------------------------------------------


def _locate(root: yaml.Node | None, data: Any, loc: Sequence[Any]) -> tuple[str, int]:
    """Turn a pydantic error location into (``steps[3].act.target``, line number).

    Union tags that pydantic adds to a location are not keys of the data; they are
    left out. The line is that of the deepest node the path reaches (for a missing
    field, the mapping that lacks it).
    """
    parts: list[str] = []
    node = root
    line = (root.start_mark.line + 1) if root is not None else 1
    value = data
    for i, item in enumerate(loc):
        last = i == len(loc) - 1
        if isinstance(value, list) and isinstance(item, int) and 0 <= item < len(value):
            parts.append(f"[{item}]")
            value = value[item]
            node = _child(node, item)
            if node is not None:
                line = node.start_mark.line + 1
        elif isinstance(value, dict) and item in value:
            parts.append(f".{item}")
            value = value[item]
            key_node, node = _entry(node, str(item))
            if key_node is not None:
                line = key_node.start_mark.line + 1
        elif last and isinstance(item, str) and not (parts and parts[-1] == f".{item}"):
            parts.append(f".{item}")
    return "".join(parts).lstrip("."), line


def _child(node: yaml.Node | None, index: int) -> yaml.Node | None:
    if isinstance(node, yaml.SequenceNode) and 0 <= index < len(node.value):
        child: yaml.Node = node.value[index]
        return child
    return None


def _entry(node: yaml.Node | None, key: str) -> tuple[yaml.Node | None, yaml.Node | None]:
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.value == key:
                return key_node, value_node
    return None, None
