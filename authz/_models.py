"""The plain records of the sidecar and the words only it uses.

Every layer of :mod:`handrail.authz` speaks these types: the decision function, the store,
the wire adapter and the clients. They are frozen dataclasses with no I/O. The words the
whole system shares (reasons, verbs) come from :mod:`handrail._vocabulary`; the ones below
are the sidecar's own (roles, grant states, approval states, lease holders).
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass
from typing import TypeVar

#: The deadline of an approval when neither the grant nor the policy sets one.
DEFAULT_APPROVAL_TIMEOUT_MS = 5 * 60_000

_Record = TypeVar("_Record")


def quick_init(cls: type[_Record]) -> type[_Record]:
    """Give the frozen dataclass ``cls`` an ``__init__`` that fills the instance's dict at once.

    The ``__init__`` :func:`dataclasses.dataclass` writes for a frozen class sets each field
    through ``object.__setattr__``, about 0.2 µs a field; the records decorated with this are
    built several times on every check, and one dict update is three times faster. Same
    parameters, order and defaults; a class this cannot copy exactly (a default factory, a
    keyword-only field, ``__post_init__``, ``__slots__``) is refused.
    """
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    if (
        not cls.__dataclass_params__.frozen  # type: ignore[attr-defined]
        or hasattr(cls, "__post_init__")
        or "__slots__" in vars(cls)
        or any(f.default_factory is not dataclasses.MISSING or f.kw_only or not f.init for f in fields)
    ):
        raise TypeError(f"quick_init cannot copy the __init__ of {cls.__name__}")
    params = ", ".join(f.name if f.default is dataclasses.MISSING else f"{f.name}=_default_{f.name}" for f in fields)
    values = ", ".join(f"{f.name!r}: {f.name}" for f in fields)
    namespace = {f"_default_{f.name}": f.default for f in fields if f.default is not dataclasses.MISSING}
    exec(f"def __init__(self, {params}):\n    self.__dict__.update({{{values}}})\n", namespace)
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    init.__annotations__ = {f.name: f.type for f in fields} | {"return": None}
    setattr(cls, "__init__", init)  # noqa: B010 (mypy refuses assigning a method)
    return cls


class Role(enum.StrEnum):
    """What a principal is, and so what it may call (see :mod:`._core`)."""

    AGENT = "agent"
    OPERATOR = "operator"
    EXECUTOR = "executor"
    ADMIN = "admin"


#: Principal roles, as strings.
ROLES: tuple[str, ...] = tuple(r.value for r in Role)


class GrantState(enum.StrEnum):
    """Where a grant is in its life at a given time (:meth:`GrantInfo.state`)."""

    ACTIVE = "active"
    REVOKED = "revoked"
    EXHAUSTED = "exhausted"
    CLOSED = "closed"
    EXPIRED = "expired"


class ApprovalStatus(enum.StrEnum):
    """The life of an approval: PENDING → APPROVED → USED, or PENDING → DENIED | EXPIRED."""

    PENDING = "PENDING"
    APPROVED = "APPROVED"
    DENIED = "DENIED"
    EXPIRED = "EXPIRED"
    USED = "USED"


class HolderKind(enum.StrEnum):
    """Who holds a control lease; ``NONE`` means the lease is free."""

    NONE = ""
    AGENT = "agent"
    HUMAN = "human"


class PrincipalState(enum.StrEnum):
    """Where a principal is in its life (:meth:`PrincipalInfo.state`)."""

    ACTIVE = "active"
    REVOKED = "revoked"
    EXPIRED = "expired"


@quick_init
@dataclass(frozen=True)
class Principal:
    """An authenticated caller.

    Attributes:
        name: the principal's name.
        role: a :class:`Role` value.
        expires_at_ms: when its token stops authenticating (0: never).
    """

    name: str
    role: str
    expires_at_ms: int = 0


@dataclass(frozen=True)
class PrincipalInfo:
    """A principal as the store holds it (never its token).

    Attributes:
        name: its unique name.
        role: a :class:`Role` value.
        created_at_ms: when it was added.
        expires_at_ms: when its token stops authenticating (0: never).
        revoked_at_ms: when it was revoked (0: not revoked).
    """

    name: str
    role: str
    created_at_ms: int = 0
    expires_at_ms: int = 0
    revoked_at_ms: int = 0

    def state(self, now_ms: int) -> PrincipalState:
        """Its :class:`PrincipalState` at ``now_ms``."""
        if self.revoked_at_ms:
            return PrincipalState.REVOKED
        if self.expires_at_ms and self.expires_at_ms <= now_ms:
            return PrincipalState.EXPIRED
        return PrincipalState.ACTIVE


@quick_init
@dataclass(frozen=True)
class ElementContext:
    """Where the element an action touches sits, as the page shows it.

    The sidecar classifies the action's risk from the element's name and these (a generic
    "Yes" in a dialog titled "Close your account?" is destructive).

    Attributes:
        dialog_title: the title of the dialog the element is in.
        form_name: the name of the form it is in.
        heading: the nearest heading before it.
        description: its description (``aria-describedby``, ``title``).
        visible_text: the text it shows, when an author-given name (``aria-label``,
            ``aria-labelledby``) says something else ("Save" over "Delete account").
    """

    dialog_title: str = ""
    form_name: str = ""
    heading: str = ""
    description: str = ""
    visible_text: str = ""

    def __bool__(self) -> bool:
        return bool(self.dialog_title or self.form_name or self.heading or self.description or self.visible_text)


@quick_init
@dataclass(frozen=True)
class CheckInput:
    """One action to decide on, already decoded from the wire.

    ``context`` is the element's context; ``document_load`` says the check is for a
    top-level document the browser is about to load (only origins a grant names load).
    """

    principal: str
    target: str
    lease_epoch: int
    verb: str
    url: str = ""
    element_role: str = ""
    element_name: str = ""
    window_class: str = ""
    window_title: str = ""
    password_field: bool = False
    action_id: str = ""
    fingerprint: str = ""
    observation_id: str = ""
    context: ElementContext = ElementContext()
    document_load: bool = False
    approval_asked: str = ""  # why the caller asks for an approval no grant or policy asks for


@quick_init
@dataclass(frozen=True)
class Decision:
    """The answer to a check.

    Attributes:
        allow: whether the action may be dispatched.
        reason: a decision :class:`~handrail.Reason` (``"ALLOW"``, ``"NO_LEASE"`` ...;
            never one of the executor's own refusals).
        message: a readable explanation.
        decision_id: the id under which the decision is logged.
        policies: ``@id`` of the Cedar policies that decided (forbids).
        grant_id: the grant an allow rests on.
        lease_epoch: the target's current lease epoch (0 when there is no lease).
        approval_id: the pending approval (APPROVAL_REQUIRED), or the approval an allow used.
        shadow_policies: shadow (dry-run) policies that would have denied; never enforced.
        grant_consumed: the allow used up a single-use grant.
        idempotency_header: the grant of the allow asks the executor to add an
            ``Idempotency-Key`` header to the side-effecting requests the action starts.
        replayed: the allow already given to this very request (same caller, same
            ``action_id``, every field the same), whose answer was lost: ``decision_id``
            is that allow's, and nothing was consumed or used again (see :mod:`._replay`).
    """

    allow: bool
    reason: str
    message: str
    decision_id: str = ""
    policies: tuple[str, ...] = ()
    grant_id: str = ""
    lease_epoch: int = 0
    approval_id: str = ""
    shadow_policies: tuple[str, ...] = ()
    grant_consumed: bool = False
    idempotency_header: bool = False
    replayed: bool = False


@quick_init
@dataclass(frozen=True)
class Spent:
    """What an allow of one exact request spent, kept for a resend of it (:mod:`._replay`).

    Attributes:
        key: the digest of the caller and the request (:func:`._replay.replay_key`).
        decision_id: the allow's id.
        grant_id: the single-use grant it consumed (``""``: none).
        approval_id: the approval it used (``""``: none).
        at_ms: when it was committed (the store's clock).
    """

    key: str
    decision_id: str
    grant_id: str
    approval_id: str
    at_ms: int


@dataclass(frozen=True)
class LeaseInfo:
    """The control lease of one target.

    Attributes:
        target: the controlled browser or desktop session.
        holder_kind: a :class:`HolderKind`: ``""`` (free), ``"agent"`` or ``"human"``.
        holder: the holding principal, empty when free.
        epoch: the fencing epoch; it grows by one on every change of holder.
        expires_at_ms: unix ms when the lease lapses (0 when free).
        next_holder: after a hand-back, the only agent that may acquire next.
    """

    target: str
    holder_kind: str = ""
    holder: str = ""
    epoch: int = 0
    expires_at_ms: int = 0
    next_holder: str = ""

    def is_live(self, now_ms: int) -> bool:
        """Whether someone holds the lease at ``now_ms``."""
        return self.holder_kind != HolderKind.NONE and self.expires_at_ms > now_ms

    def effective(self, now_ms: int) -> LeaseInfo:
        """This lease as seen at ``now_ms``: a lapsed lease shows as free (same epoch)."""
        if self.holder_kind == HolderKind.NONE or self.is_live(now_ms):
            return self
        return dataclasses.replace(self, holder_kind="", holder="", expires_at_ms=0)


@dataclass(frozen=True)
class GrantInfo:
    """A scope grant made by an operator.

    Attributes:
        grant_id: set by the server.
        principal: the agent the grant is for.
        target: the controlled session it applies to.
        verbs: the :class:`~handrail.Verb` values it allows (``"submit"`` ...).
        origins: ``scheme://host[:port]`` it is limited to; empty means any origin.
        expires_at_ms: unix ms; 0 means no expiry.
        granted_by: the operator who made it.
        note: why it was granted.
        created_at_ms: when it was made.
        revoked: whether it was revoked.
        path_globs: URL path globs (fnmatch, case-sensitive); empty means any path.
        role_patterns: element role patterns (case-insensitive); empty means any.
        name_patterns: element accessible-name patterns (case-insensitive); empty means any.
        window_class_patterns: desktop WM_CLASS patterns; empty means any.
        window_title_patterns: desktop window title patterns; empty means any.
        allow_password_input: may type into password fields (the shipped policy needs it).
        single_use: consumed by the first check it allows; later checks get GRANT_EXHAUSTED.
        task_id: the task it is bound to; ``CloseTask`` ends it.
        require_approval_verbs: verbs that need an operator's approval even when granted.
        approval_timeout_ms: deadline of the approvals it asks for (0: server default).
        revoked_at_ms, used_at_ms, closed_at_ms: set by the server (0 when not).
        idempotency_header: the executor adds an ``Idempotency-Key`` header (derived from
            the action id) to the side-effecting requests an action it allows starts.
    """

    grant_id: str
    principal: str
    target: str
    verbs: tuple[str, ...]
    origins: tuple[str, ...] = ()
    expires_at_ms: int = 0
    granted_by: str = ""
    note: str = ""
    created_at_ms: int = 0
    revoked: bool = False
    path_globs: tuple[str, ...] = ()
    role_patterns: tuple[str, ...] = ()
    name_patterns: tuple[str, ...] = ()
    window_class_patterns: tuple[str, ...] = ()
    window_title_patterns: tuple[str, ...] = ()
    allow_password_input: bool = False
    single_use: bool = False
    task_id: str = ""
    require_approval_verbs: tuple[str, ...] = ()
    approval_timeout_ms: int = 0
    revoked_at_ms: int = 0
    used_at_ms: int = 0
    closed_at_ms: int = 0
    idempotency_header: bool = False

    def state(self, now_ms: int) -> GrantState:
        """The grant's :class:`GrantState` at ``now_ms``."""
        if self.revoked:
            return GrantState.REVOKED
        if self.used_at_ms:
            return GrantState.EXHAUSTED
        if self.closed_at_ms:
            return GrantState.CLOSED
        if self.expires_at_ms and self.expires_at_ms <= now_ms:
            return GrantState.EXPIRED
        return GrantState.ACTIVE

    def is_active(self, now_ms: int) -> bool:
        """Not revoked, used up, closed or expired at ``now_ms`` (:meth:`state` is ``active``)."""
        if self.revoked or self.used_at_ms or self.closed_at_ms:
            return False
        return not self.expires_at_ms or self.expires_at_ms > now_ms

    def state_at(self, at_ms: int) -> str:
        """The state the grant had at ``at_ms`` (for explaining past decisions): a
        :class:`GrantState`, or ``"not yet granted"``."""
        if at_ms < self.created_at_ms:
            return "not yet granted"
        if self.revoked_at_ms and self.revoked_at_ms <= at_ms:
            return GrantState.REVOKED
        if self.used_at_ms and self.used_at_ms < at_ms:
            return GrantState.EXHAUSTED
        if self.closed_at_ms and self.closed_at_ms <= at_ms:
            return GrantState.CLOSED
        if self.expires_at_ms and self.expires_at_ms <= at_ms:
            return GrantState.EXPIRED
        return GrantState.ACTIVE

    @property
    def is_pattern(self) -> bool:
        """Whether ``target`` is an fnmatch pattern rather than one target."""
        return is_pattern(self.target)


@dataclass(frozen=True)
class ApprovalInfo:
    """An operator's approval of one exact action.

    Attributes:
        approval_id: set by the server.
        principal, target, fingerprint, lease_epoch: what it is bound to.
        status: an :class:`ApprovalStatus` value as stored (see :meth:`effective_status`).
        deadline_ms: unix ms; a pending approval past it is EXPIRED (a deny).
        decided_by, note, decided_at_ms: the operator's decision.
        verb, url, element_role, element_name, window_class, window_title: the action.
        observation_id, action_id: the executor's ids, for the record.
        grant_id: the grant the action rests on.
        policies: the Cedar policies that asked for approval (empty: the grant asked).
        created_at_ms, used_at_ms: set by the server.
        decision_id: the check that asked; used_by_decision_id: the check that used it.
    """

    approval_id: str
    principal: str
    target: str
    fingerprint: str
    status: str
    deadline_ms: int
    lease_epoch: int = 0
    verb: str = ""
    url: str = ""
    element_role: str = ""
    element_name: str = ""
    window_class: str = ""
    window_title: str = ""
    observation_id: str = ""
    action_id: str = ""
    grant_id: str = ""
    policies: tuple[str, ...] = ()
    decided_by: str = ""
    note: str = ""
    created_at_ms: int = 0
    decided_at_ms: int = 0
    used_at_ms: int = 0
    decision_id: str = ""
    used_by_decision_id: str = ""

    def effective_status(self, now_ms: int) -> str:
        """The status at ``now_ms``: a pending approval past its deadline is EXPIRED."""
        if self.status == ApprovalStatus.PENDING and now_ms >= self.deadline_ms:
            return ApprovalStatus.EXPIRED.value
        return self.status

    def effective(self, now_ms: int) -> ApprovalInfo:
        """This approval with :meth:`effective_status` as its status."""
        status = self.effective_status(now_ms)
        return self if status == self.status else dataclasses.replace(self, status=status)


@quick_init
@dataclass(frozen=True)
class PolicyResult:
    """What the Cedar policies said: whether a ``forbid`` fired, and which ones.

    Attributes:
        forbidden: a forbid fired (or failed to evaluate).
        policies: ``@id`` of the forbids that fired.
        message: a readable summary.
        approval_only: every forbid that fired is annotated ``@approval("required")``: the
            action may go ahead once an operator approves it.
        approval_timeout_ms: the shortest ``@approval_timeout_s`` among them (0: default).
    """

    forbidden: bool = False
    policies: tuple[str, ...] = ()
    message: str = ""
    approval_only: bool = False
    approval_timeout_ms: int = 0


@quick_init
@dataclass(frozen=True)
class DecisionRecord:
    """One logged decision: the request (secrets redacted), what the sidecar saw, the result.

    Attributes:
        decision_id: the id the caller got.
        at_ms: the store's clock when it was decided.
        caller: the authenticated caller (an executor, or the agent itself; ``""`` when the
            token was unknown).
        request: the check as asked (``principal`` is the agent the caller asserted).
        decision: the answer.
        lease: the target's lease row as the decision saw it (None: never leased).
        grants_considered: ids of the grants of (principal, target) that were looked at.
    """

    decision_id: str
    at_ms: int
    caller: str
    request: CheckInput
    decision: Decision
    lease: LeaseInfo | None = None
    grants_considered: tuple[str, ...] = ()


@dataclass(frozen=True)
class WatchEventInfo:
    """One change pushed by ``Watch``.

    Attributes:
        seq: grows by one per event of the server process.
        kind: ``"lease"``, ``"grant"``, ``"approval"`` or ``"policy"``.
        target: the target it concerns (empty for policy reloads).
        change: what happened (``"takeover"``, ``"revoke"``, ``"approve"`` ...).
        lease: the lease after the change (lease events).
        grant_id: the grant (grant events).
        approval_id, approval_status: the approval (approval events).
        at_ms: the store's clock.
        grant: the grant after the change (grant events).
        approval: the approval after the change (approval events).
    """

    seq: int
    kind: str
    target: str
    change: str = ""
    lease: LeaseInfo | None = None
    grant_id: str = ""
    approval_id: str = ""
    approval_status: str = ""
    at_ms: int = 0
    grant: GrantInfo | None = None
    approval: ApprovalInfo | None = None


def is_pattern(target: str) -> bool:
    """Whether a grant target is an fnmatch pattern (``browser:*``) rather than one target."""
    return any(ch in target for ch in "*?[")
