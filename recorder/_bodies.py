"""Typed entry bodies: one frozen model per entry kind, for the writer and every reader.

An entry's body is stored as canonical JSON and hashed as such; these models are how code
writes and reads it, instead of dicts read back by key. Writing goes through
:meth:`Body.to_body`, whose output is exactly the JSON the ledger has always stored, so
old ledgers still verify and new entries look like old ones. Reading goes through
:func:`parse_body` (or :attr:`Entry.content <handrail.recorder.Entry.content>`), which
is lenient: a missing key takes its default, so a body written by an older or foreign
writer still reads.

- ``session_open``: :class:`SessionOpenBody` (``target``, ``backend``, ``start_url``);
  ``session_close``: :class:`SessionCloseBody` (no keys)
- ``intent``: :class:`IntentBody` (``params``: :class:`ActionParams`)
- ``result``: :class:`ResultBody` (``outcome``, ``reason``, ``evidence``,
  ``execution_started``, ``message``, ``extra``: :class:`ResultExtra`)
- ``refusal``: :class:`RefusalBody` (``kind``, ``ref``, ``role``, ``name``, ``url``,
  ``reason``, ``message``, ``decision_id``, ``policies``)
- ``decision``: :class:`DecisionBody` (``decision_id``)
- ``reconcile``: :class:`ReconcileBody` (``outcome``, ``verdict``, ``evidence``,
  ``observation_id``, ``message``)
- ``lease_change``: :class:`LeaseChangeBody` (``target``, ``event``, ``detail``:
  :class:`LeaseDetail`)
- any other kind: :class:`OtherBody`, as stored

Three records hold a caller's free-form mapping (:class:`ActionParams`, the ``extra`` of a
result as :class:`ResultExtra`, the ``detail`` of a lease change as :class:`LeaseDetail`):
their known keys are typed fields, ``None`` when absent, and every other key is kept in
``other``, so that reading one and writing it back gives the very same JSON.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Self

from handrail._vocabulary import Outcome

__all__ = [
    "KINDS",
    "ActionParams",
    "Body",
    "DecisionBody",
    "EntryBody",
    "IntentBody",
    "LeaseChangeBody",
    "LeaseDetail",
    "OtherBody",
    "ReconcileBody",
    "RefusalBody",
    "ResultBody",
    "ResultExtra",
    "SessionCloseBody",
    "SessionOpenBody",
    "parse_body",
]


# -- free-form records with typed known keys -------------------------------------------

# What a known key of an open record holds; a value of another shape stays in ``other``.
_STR, _INT, _STRS = "str", "int", "strs"


def _fits(shape: str, value: Any) -> bool:
    if shape == _STR:
        return isinstance(value, str)
    if shape == _INT:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, list | tuple) and all(isinstance(v, str) for v in value)


@dataclass(frozen=True)
class _OpenRecord:
    """A mapping whose known keys are typed fields (``None``: absent) and the rest ``other``."""

    _SHAPES: ClassVar[Mapping[str, str]] = {}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        """Read a stored mapping; ``to_dict()`` of the result gives the same mapping back."""
        known: dict[str, Any] = {}
        other: dict[str, Any] = {}
        for key, value in data.items():
            shape = cls._SHAPES.get(key)
            if shape is not None and _fits(shape, value):
                known[key] = tuple(value) if shape == _STRS else value
            else:
                other[str(key)] = value
        known["other"] = other
        return cls(**known)

    def to_dict(self) -> dict[str, Any]:
        """The mapping as stored: the fields that are set, then ``other``."""
        out: dict[str, Any] = {}
        for name in self._SHAPES:  # the typed fields
            value = getattr(self, name)
            if value is not None:
                out[name] = list(value) if isinstance(value, tuple) else value
        out.update(getattr(self, "other", {}))
        return out


@dataclass(frozen=True)
class ActionParams(_OpenRecord):
    """An action's parameters as the intent records them (``None``: not given).

    Attributes:
        kind: the action kind (an :class:`~handrail.ActionKind` value).
        observation_id: the observation the action cited.
        ref, role, name: the element, by the observation's ref and its ARIA role and name.
        text, key, keys, values, url, files: what the action typed, pressed, chose,
            opened or uploaded.
        x, y, to_x, to_y, button, click_count, delta_x, delta_y, key_delay_ms, tab_id:
            pointer, scroll, typing and tab details.
        fingerprint: a digest of what the action does, independent of refs; an
            idempotency key reused with another fingerprint is a conflict.
        decision_id: the authorization decision that allowed it.
        other: every other key, as given.
    """

    _SHAPES: ClassVar[Mapping[str, str]] = {
        "kind": _STR,
        "observation_id": _STR,
        "ref": _STR,
        "role": _STR,
        "name": _STR,
        "text": _STR,
        "key": _STR,
        "keys": _STRS,
        "values": _STRS,
        "url": _STR,
        "files": _STRS,
        "x": _INT,
        "y": _INT,
        "to_x": _INT,
        "to_y": _INT,
        "button": _STR,
        "click_count": _INT,
        "delta_x": _INT,
        "delta_y": _INT,
        "key_delay_ms": _INT,
        "tab_id": _STR,
        "fingerprint": _STR,
        "decision_id": _STR,
    }

    kind: str | None = None
    observation_id: str | None = None
    ref: str | None = None
    role: str | None = None
    name: str | None = None
    text: str | None = None
    key: str | None = None
    keys: tuple[str, ...] | None = None
    values: tuple[str, ...] | None = None
    url: str | None = None
    files: tuple[str, ...] | None = None
    x: int | None = None
    y: int | None = None
    to_x: int | None = None
    to_y: int | None = None
    button: str | None = None
    click_count: int | None = None
    delta_x: int | None = None
    delta_y: int | None = None
    key_delay_ms: int | None = None
    tab_id: str | None = None
    fingerprint: str | None = None
    decision_id: str | None = None
    other: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ResultExtra(_OpenRecord):
    """The ``extra`` of a result (``None``: not given).

    Attributes:
        decision_id: the authorization decision the action ran under.
        typed_chars: how many characters a desktop type action typed.
        via: how a browser click went out (``"pointer"``, ``"playwright"``).
        intent_seq: for a result that recovery wrote, the intent entry it closes.
        recorded_by: ``"recovery"`` for a result that recovery wrote.
        other: every other key, as given.
    """

    _SHAPES: ClassVar[Mapping[str, str]] = {
        "decision_id": _STR,
        "typed_chars": _INT,
        "via": _STR,
        "intent_seq": _INT,
        "recorded_by": _STR,
    }

    decision_id: str | None = None
    typed_chars: int | None = None
    via: str | None = None
    intent_seq: int | None = None
    recorded_by: str | None = None
    other: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class LeaseDetail(_OpenRecord):
    """The ``detail`` of a lease change (``None``: not given).

    Attributes:
        holder_kind: ``"human"``, ``"agent"`` ... as the sidecar said.
        next_holder: the agent a hand-back names as the next holder, if any.
        other: every other key, as given.
    """

    _SHAPES: ClassVar[Mapping[str, str]] = {"holder_kind": _STR, "next_holder": _STR}

    holder_kind: str | None = None
    next_holder: str | None = None
    other: Mapping[str, Any] = field(default_factory=dict)


# -- the bodies --------------------------------------------------------------------------


def _str(body: Mapping[str, Any], key: str) -> str:
    value = body.get(key)
    return "" if value is None else str(value)


def _record(body: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = body.get(key)
    return value if isinstance(value, Mapping) else {}


@dataclass(frozen=True)
class Body:
    """Base of the typed bodies: ``KIND`` is the entry kind each one is the body of."""

    KIND: ClassVar[str] = ""

    def to_body(self) -> dict[str, Any]:
        """The body as the ledger stores it (before redaction)."""
        raise NotImplementedError

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> Self:
        """Read a stored body; missing keys take their defaults."""
        raise NotImplementedError


@dataclass(frozen=True)
class SessionOpenBody(Body):
    """A session opened: what it drives and where it started."""

    KIND: ClassVar[str] = "session_open"

    target: str = ""
    backend: str = ""
    start_url: str = ""

    def to_body(self) -> dict[str, Any]:
        return {"target": self.target, "backend": self.backend, "start_url": self.start_url}

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> Self:
        return cls(_str(body, "target"), _str(body, "backend"), _str(body, "start_url"))


@dataclass(frozen=True)
class SessionCloseBody(Body):
    """A session closed; ``reason`` says why when its agent did not close it (``"ttl"``:
    no call within its TTL; ``"detached"``: its Attach stream closed; ``"shutdown"``)."""

    KIND: ClassVar[str] = "session_close"

    reason: str = ""

    def to_body(self) -> dict[str, Any]:
        return {"reason": self.reason} if self.reason else {}

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> Self:
        return cls(_str(body, "reason"))


@dataclass(frozen=True)
class IntentBody(Body):
    """An action about to be dispatched: durable before anything reaches the target."""

    KIND: ClassVar[str] = "intent"

    params: ActionParams = field(default_factory=ActionParams)

    def to_body(self) -> dict[str, Any]:
        return {"params": self.params.to_dict()}

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> Self:
        return cls(ActionParams.from_dict(_record(body, "params")))

    @staticmethod
    def body_of(params: Mapping[str, Any]) -> dict[str, Any]:
        """The stored body of an intent whose parameters come as a mapping.

        The same as ``IntentBody(ActionParams.from_dict(params)).to_body()`` (a mapping
        reads back to itself), without building the model on the append path.
        """
        return {"params": dict(params)}

    @staticmethod
    def params_of(body: Mapping[str, Any] | None) -> dict[str, Any]:
        """The parameters of a stored intent body as the mapping they were given as."""
        params = body.get("params") if body else None
        return dict(params) if isinstance(params, Mapping) else {}


@dataclass(frozen=True)
class ResultBody(Body):
    """What happened to an intent.

    Attributes:
        outcome: an :class:`~handrail.Outcome` value (older ledgers may hold other words).
        reason: a reason code (a :class:`~handrail.Reason` value, ``"RECOVERED"`` ...).
        evidence: an :class:`~handrail.Evidence` value: what proves the outcome.
        execution_started: whether anything may have reached the target.
        message: a readable explanation.
        extra: more details.
    """

    KIND: ClassVar[str] = "result"

    outcome: str = ""
    reason: str = ""
    evidence: str = ""
    execution_started: bool = False
    message: str = ""
    extra: ResultExtra = field(default_factory=ResultExtra)

    def to_body(self) -> dict[str, Any]:
        extra = self.extra.to_dict()
        return self.body_of(self.outcome, self.reason, self.evidence, self.execution_started, self.message, extra)

    @staticmethod
    def body_of(
        outcome: str,
        reason: str,
        evidence: str,
        execution_started: bool,
        message: str,
        extra: Mapping[str, Any] | None,
    ) -> dict[str, Any]:
        """The stored body of a result given as its fields, ``extra`` as a mapping.

        What :meth:`to_body` gives, without building the model on the append path.
        """
        body: dict[str, Any] = {
            "outcome": str(outcome),
            "reason": str(reason),
            "evidence": str(evidence),
            "execution_started": execution_started,
            "message": message,
        }
        if extra:
            body["extra"] = dict(extra)
        return body

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> Self:
        return cls(
            outcome=_str(body, "outcome"),
            reason=_str(body, "reason"),
            evidence=_str(body, "evidence"),
            execution_started=bool(body.get("execution_started")),
            message=_str(body, "message"),
            extra=ResultExtra.from_dict(_record(body, "extra")),
        )

    def is_outcome(self, outcome: Outcome) -> bool:
        """Whether the result states ``outcome`` (any case, as the ledger's filters match)."""
        return self.outcome.upper() == outcome.value


@dataclass(frozen=True)
class RefusalBody(Body):
    """An action refused before any intent was written: nothing was dispatched."""

    KIND: ClassVar[str] = "refusal"

    kind: str = ""
    ref: str = ""
    role: str = ""
    name: str = ""
    url: str = ""
    reason: str = ""
    message: str = ""
    decision_id: str = ""
    policies: tuple[str, ...] = ()

    def to_body(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "ref": self.ref,
            "role": self.role,
            "name": self.name,
            "url": self.url,
            "reason": str(self.reason),
            "message": self.message,
            "decision_id": self.decision_id,
            "policies": list(self.policies),
        }

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> Self:
        policies = body.get("policies")
        return cls(
            kind=_str(body, "kind"),
            ref=_str(body, "ref"),
            role=_str(body, "role"),
            name=_str(body, "name"),
            url=_str(body, "url"),
            reason=_str(body, "reason"),
            message=_str(body, "message"),
            decision_id=_str(body, "decision_id"),
            policies=tuple(str(p) for p in policies) if isinstance(policies, list | tuple) else (),
        )

    @property
    def params(self) -> ActionParams:
        """What the refused action asked for, in the shape an intent records it."""
        return ActionParams(
            kind=self.kind or None,
            ref=self.ref or None,
            role=self.role or None,
            name=self.name or None,
            url=self.url or None,
        )


@dataclass(frozen=True)
class DecisionBody(Body):
    """A reference to a decision in the authorization sidecar's decision log."""

    KIND: ClassVar[str] = "decision"

    decision_id: str = ""

    def to_body(self) -> dict[str, Any]:
        return {"decision_id": self.decision_id}

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> Self:
        return cls(_str(body, "decision_id"))


@dataclass(frozen=True)
class ReconcileBody(Body):
    """What the real state shows of an action left UNKNOWN.

    Attributes:
        verdict: a :class:`~handrail.Verdict` value.
        evidence: a readable account of what shows it.
        observation_id: the observation the verdict rests on, or ``""``.
        message: a readable note, or ``""``.
        outcome: always ``RECONCILED``.
    """

    KIND: ClassVar[str] = "reconcile"

    verdict: str = ""
    evidence: str = ""
    observation_id: str = ""
    message: str = ""
    outcome: str = Outcome.RECONCILED.value

    def to_body(self) -> dict[str, Any]:
        body: dict[str, Any] = {"outcome": str(self.outcome), "verdict": str(self.verdict), "evidence": self.evidence}
        if self.observation_id:
            body["observation_id"] = self.observation_id
        if self.message:
            body["message"] = self.message
        return body

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> Self:
        return cls(
            verdict=_str(body, "verdict"),
            evidence=_str(body, "evidence"),
            observation_id=_str(body, "observation_id"),
            message=_str(body, "message"),
            outcome=_str(body, "outcome") or Outcome.RECONCILED.value,
        )


@dataclass(frozen=True)
class LeaseChangeBody(Body):
    """Who got, kept or lost control of a target.

    Attributes:
        target: the controlled target.
        event: ``"takeover"``, ``"hand_back"`` ... (see ``LEASE_EVENTS``).
        detail: more details.
    """

    KIND: ClassVar[str] = "lease_change"

    target: str = ""
    event: str = ""
    detail: LeaseDetail = field(default_factory=LeaseDetail)

    def to_body(self) -> dict[str, Any]:
        body: dict[str, Any] = {"target": self.target, "event": self.event}
        detail = self.detail.to_dict()
        if detail:
            body["detail"] = detail
        return body

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> Self:
        return cls(_str(body, "target"), _str(body, "event"), LeaseDetail.from_dict(_record(body, "detail")))


@dataclass(frozen=True)
class OtherBody:
    """The body of an entry of a kind this version does not know, as stored."""

    kind: str
    data: Mapping[str, Any]

    def to_body(self) -> dict[str, Any]:
        return dict(self.data)


EntryBody = (
    SessionOpenBody
    | SessionCloseBody
    | IntentBody
    | ResultBody
    | RefusalBody
    | DecisionBody
    | ReconcileBody
    | LeaseChangeBody
    | OtherBody
)
"""Any entry's typed body; ``match`` on it, or ``isinstance``."""

_PARSERS: Mapping[str, Callable[[Mapping[str, Any]], EntryBody]] = {
    SessionOpenBody.KIND: SessionOpenBody.from_body,
    SessionCloseBody.KIND: SessionCloseBody.from_body,
    IntentBody.KIND: IntentBody.from_body,
    ResultBody.KIND: ResultBody.from_body,
    ReconcileBody.KIND: ReconcileBody.from_body,
    RefusalBody.KIND: RefusalBody.from_body,
    DecisionBody.KIND: DecisionBody.from_body,
    LeaseChangeBody.KIND: LeaseChangeBody.from_body,
}

KINDS: tuple[str, ...] = tuple(_PARSERS)
"""Entry kinds used across Handrail, each with its typed body. Others are accepted."""


def parse_body(kind: str, body: Mapping[str, Any]) -> EntryBody:
    """The typed body of an entry of ``kind``; :class:`OtherBody` for an unknown kind."""
    parse = _PARSERS.get(kind)
    return OtherBody(kind, body) if parse is None else parse(body)
