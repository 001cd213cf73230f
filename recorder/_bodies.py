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
- ``navigation``: :class:`NavigationBody` (a document the browser was about to load:
  ``url``, ``method``, ``tab_id``, ``cause``, ``verb``, ``allowed``, ``reason``,
  ``message``, ``decision_id``, ``read``)
- ``request``: :class:`RequestBody` (a side-effecting request of an action that ended
  after its result: ``method``, ``url``, ``tab_id``, ``resource_type``, ``status``,
  ``failure``, ``message``)
- any other kind: :class:`OtherBody`, as stored

A result that amends an earlier one (a request of the action ended without a response
after its result was written) is a second ``result`` entry of the same action, with
``extra.amends`` naming the entry it supersedes: every reader takes an action's latest
result, so nothing is ever edited. The open records of the bodies (``ActionParams``,
``ResultExtra``, ``LeaseDetail``) are in ``_records``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Self

from handrail._vocabulary import Outcome

from ._records import ActionParams, LeaseDetail, ResultExtra

__all__ = [
    "KINDS",
    "ActionParams",
    "Body",
    "DecisionBody",
    "EntryBody",
    "IntentBody",
    "LeaseChangeBody",
    "LeaseDetail",
    "NavigationBody",
    "OtherBody",
    "ReconcileBody",
    "RefusalBody",
    "RequestBody",
    "ResultBody",
    "ResultExtra",
    "SessionCloseBody",
    "SessionOpenBody",
    "parse_body",
]


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
    no call within its TTL; ``"detached"``: its Attach stream closed; ``"shutdown"``; its
    start page ``"start_refused"`` by the sidecar, ``"start_unjudged"`` (no answer) or
    ``"start_failed"`` to load)."""

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
class NavigationBody(Body):
    """A top-level document the browser was about to load, and what the sidecar said.

    Written for every document load a session's page started on its own (a link, a
    form, a redirect, a script, a pop-up) and for the start page; the action that caused
    it, if any, is the entry's ``action_id``.

    Attributes:
        url: the URL as the browser parsed it.
        method: the request's method (``GET``, ``POST`` ...).
        tab_id: the tab it was for (a pop-up: the new tab, ``""`` before it has one).
        cause: ``"start"``, ``"action"``, ``"page"``, ``"redirect"``, ``"popup"``, or
            ``"request"``: a side-effecting request (a fetch, a beacon, a ping, a form posted
            into a frame) to another origin than its tab's page, judged as a load is.
        verb: the verb it was judged as.
        allowed: whether it was let through; a refused load never left the browser.
        reason: the decision's reason (a :class:`~handrail.Reason` value).
        message: a readable explanation.
        decision_id: the sidecar's decision, if it was asked.
        read: a GET load let through while the target awaits a reconcile (a read).
    """

    KIND: ClassVar[str] = "navigation"

    url: str = ""
    method: str = ""
    tab_id: str = ""
    cause: str = ""
    verb: str = ""
    allowed: bool = False
    reason: str = ""
    message: str = ""
    decision_id: str = ""
    read: bool = False

    def to_body(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "url": self.url,
            "method": self.method,
            "tab_id": self.tab_id,
            "cause": self.cause,
            "verb": self.verb,
            "allowed": self.allowed,
            "reason": str(self.reason),
            "message": self.message,
            "decision_id": self.decision_id,
        }
        if self.read:
            body["read"] = True
        return body

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> Self:
        return cls(
            url=_str(body, "url"),
            method=_str(body, "method"),
            tab_id=_str(body, "tab_id"),
            cause=_str(body, "cause"),
            verb=_str(body, "verb"),
            allowed=bool(body.get("allowed")),
            reason=_str(body, "reason"),
            message=_str(body, "message"),
            decision_id=_str(body, "decision_id"),
            read=bool(body.get("read")),
        )


@dataclass(frozen=True)
class RequestBody(Body):
    """A side-effecting request an action started that ended after the action's result
    (or messages it sent on a WebSocket whose socket ended before an answer).

    Attributes:
        method: ``POST``, ``PUT``, ``DELETE`` ...; ``WEBSOCKET`` for messages on a WebSocket.
        url: the request's URL (the socket's).
        tab_id: the tab that sent it.
        resource_type: ``fetch``, ``xhr``, ``document`` (a form post), ``ping`` (a beacon),
            ``websocket``.
        status: the HTTP status of its response; 0 when it got none.
        failure: why it ended without a response (``net::ERR_EMPTY_RESPONSE`` ...), or ``""``.
        message: a readable account.
    """

    KIND: ClassVar[str] = "request"

    method: str = ""
    url: str = ""
    tab_id: str = ""
    resource_type: str = ""
    status: int = 0
    failure: str = ""
    message: str = ""

    def to_body(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "url": self.url,
            "tab_id": self.tab_id,
            "resource_type": self.resource_type,
            "status": self.status,
            "failure": self.failure,
            "message": self.message,
        }

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> Self:
        status = body.get("status")
        return cls(
            method=_str(body, "method"),
            url=_str(body, "url"),
            tab_id=_str(body, "tab_id"),
            resource_type=_str(body, "resource_type"),
            status=status if isinstance(status, int) and not isinstance(status, bool) else 0,
            failure=_str(body, "failure"),
            message=_str(body, "message"),
        )


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
    | NavigationBody
    | RequestBody
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
    NavigationBody.KIND: NavigationBody.from_body,
    RequestBody.KIND: RequestBody.from_body,
}

KINDS: tuple[str, ...] = tuple(_PARSERS)
"""Entry kinds used across Handrail, each with its typed body. Others are accepted."""


def parse_body(kind: str, body: Mapping[str, Any]) -> EntryBody:
    """The typed body of an entry of ``kind``; :class:`OtherBody` for an unknown kind."""
    parse = _PARSERS.get(kind)
    return OtherBody(kind, body) if parse is None else parse(body)
