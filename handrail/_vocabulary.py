"""The words the whole system shares, defined once.

Reason codes, action outcomes, evidence levels, reconcile verdicts, verbs (risk classes)
and action kinds with the verb each one asks for. Every package imports them from here;
``tests/test_vocabulary.py`` pins each enum to its wire enum in the ``.proto`` files, so
a code added on one side and not the other fails the suite.

This module is the bottom layer: it imports nothing of Handrail's.
"""

from __future__ import annotations

import enum


class Reason(enum.StrEnum):
    """Why a decision or an action came out as it did.

    The first block is the authorization sidecar's decision reasons; the second is the
    executor's own refusals, made before anything was dispatched.
    """

    ALLOW = "ALLOW"
    UNAUTHENTICATED = "UNAUTHENTICATED"
    NO_LEASE = "NO_LEASE"
    STALE_EPOCH = "STALE_EPOCH"
    HELD_BY_HUMAN = "HELD_BY_HUMAN"
    OUT_OF_SCOPE = "OUT_OF_SCOPE"
    GRANT_EXPIRED = "GRANT_EXPIRED"
    GRANT_REVOKED = "GRANT_REVOKED"
    GRANT_EXHAUSTED = "GRANT_EXHAUSTED"
    POLICY_FORBID = "POLICY_FORBID"
    APPROVAL_REQUIRED = "APPROVAL_REQUIRED"
    AUTHZ_UNAVAILABLE = "AUTHZ_UNAVAILABLE"
    APPROVAL_DENIED = "APPROVAL_DENIED"
    APPROVAL_EXPIRED = "APPROVAL_EXPIRED"
    # The executor's refusals.
    STALE_OBSERVATION = "STALE_OBSERVATION"
    STALE_REF = "STALE_REF"
    TARGET_CHANGED = "TARGET_CHANGED"
    FOCUS_MISMATCH = "FOCUS_MISMATCH"
    IDEMPOTENCY_CONFLICT = "IDEMPOTENCY_CONFLICT"
    RECONCILE_REQUIRED = "RECONCILE_REQUIRED"
    TARGET_GONE = "TARGET_GONE"  # the bound target no longer exists: no retry, open a new session

    @property
    def is_decision(self) -> bool:
        """Whether the authorization sidecar gives this reason (else only the executor)."""
        return self not in _EXECUTOR_REASONS


_EXECUTOR_REASONS = frozenset(
    {
        Reason.STALE_OBSERVATION,
        Reason.STALE_REF,
        Reason.TARGET_CHANGED,
        Reason.FOCUS_MISMATCH,
        Reason.IDEMPOTENCY_CONFLICT,
        Reason.RECONCILE_REQUIRED,
        Reason.TARGET_GONE,
    }
)

#: The reasons the authorization sidecar decides with, in wire order.
DECISION_REASONS: tuple[Reason, ...] = tuple(r for r in Reason if r.is_decision)


class Outcome(enum.StrEnum):
    """How an action ended.

    ``REFUSED``: refused before dispatch, nothing started. ``DONE``: dispatched and
    returned. ``FAILED``: known not to have had its effect. ``UNKNOWN``: may have happened;
    blocks the target until reconciled. ``RECONCILED``: an UNKNOWN action settled by
    looking at the real state.
    """

    REFUSED = "REFUSED"
    DONE = "DONE"
    FAILED = "FAILED"
    UNKNOWN = "UNKNOWN"
    RECONCILED = "RECONCILED"


class Evidence(enum.StrEnum):
    """What proves a result, weakest first."""

    NONE = "NONE"
    DISPATCH_RETURNED = "DISPATCH_RETURNED"
    OBSERVED = "OBSERVED"
    VERIFIED = "VERIFIED"
    RECONCILED = "RECONCILED"


class Verdict(enum.StrEnum):
    """What a reconcile says the real state shows of an UNKNOWN action."""

    HAPPENED = "HAPPENED"
    DID_NOT_HAPPEN = "DID_NOT_HAPPEN"


class Verb(enum.StrEnum):
    """What an action does, from least to most consequential (the Cedar action ids)."""

    READ = "read"
    INPUT = "input"
    NAVIGATE = "navigate"
    SUBMIT = "submit"
    PURCHASE = "purchase"
    DELETE = "delete"
    UPLOAD = "upload"
    DOWNLOAD = "download"


#: Verbs as strings, from least to most consequential.
VERBS: tuple[str, ...] = tuple(v.value for v in Verb)


class ActionKind(enum.StrEnum):
    """What an agent (or a person at the wheel) asks the executor to do."""

    CLICK = "click"
    FILL = "fill"
    TYPE = "type"
    PRESS = "press"
    SELECT = "select"
    NAVIGATE = "navigate"
    DOUBLE_CLICK = "double_click"
    HOVER = "hover"
    CHECK = "check"
    UNCHECK = "uncheck"
    SCROLL = "scroll"
    BACK = "back"
    UPLOAD = "upload"
    WAIT_FOR = "wait_for"
    TAB_OPEN = "tab_open"
    TAB_SWITCH = "tab_switch"
    TAB_CLOSE = "tab_close"
    DIALOG_ACCEPT = "dialog_accept"
    DIALOG_DISMISS = "dialog_dismiss"
    HOTKEY = "hotkey"
    MOVE = "move"
    DRAG = "drag"
    ACTIVATE = "activate"

    @property
    def verb(self) -> Verb:
        """The verb (risk class) this kind of action asks for by default.

        The executor may judge one action by a stronger verb when its effect is stronger
        (a key that submits a form is a submit).
        """
        return _KIND_VERBS.get(self, Verb.INPUT)

    @property
    def is_read(self) -> bool:
        """A bounded wait changes nothing: no authz check, no ledger intent."""
        return self is ActionKind.WAIT_FOR


_KIND_VERBS: dict[ActionKind, Verb] = {
    ActionKind.CLICK: Verb.SUBMIT,
    ActionKind.DOUBLE_CLICK: Verb.SUBMIT,
    ActionKind.DIALOG_ACCEPT: Verb.SUBMIT,
    ActionKind.NAVIGATE: Verb.NAVIGATE,
    ActionKind.BACK: Verb.NAVIGATE,
    ActionKind.TAB_OPEN: Verb.NAVIGATE,
    ActionKind.TAB_SWITCH: Verb.NAVIGATE,
    ActionKind.UPLOAD: Verb.UPLOAD,
    ActionKind.WAIT_FOR: Verb.READ,
}
