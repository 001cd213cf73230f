"""The scenario format's ``fault`` steps: operator events and things that go wrong.

Faults that ride on an ``act`` step (``drop_connection``, ``kill_executor``, and an
``approve`` or ``deny`` while the action waits) are in ``_acts``.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from ._acts import Model

__all__ = [
    "AcquireLease",
    "Approve",
    "Deny",
    "ExpireLease",
    "HandBack",
    "MakeGrant",
    "MoveWindow",
    "OpenModal",
    "Rerender",
    "RestartApp",
    "Revoke",
    "StartAuthz",
    "StealFocus",
    "StepFault",
    "StopAuthz",
    "TakeOver",
]


class _StepFault(Model):
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


class RestartApp(_StepFault):
    """Desktop: the notes application quits and starts again — a new window, titled the same.

    The server may even hand the new process the old window's id. A session bound to the
    old window has lost its target for good (``TARGET_GONE``).
    """

    kind: Literal["restart_app"]


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
    | RestartApp
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
