"""Plain data of the executor: actions, observations, results and their codes.

These are what the core works with; ``_convert`` is the only module that maps them to
and from the wire messages.
"""

from __future__ import annotations

import enum
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any


class ActionKind(enum.StrEnum):
    CLICK = "click"
    FILL = "fill"
    TYPE = "type"
    PRESS = "press"
    SELECT = "select"
    NAVIGATE = "navigate"

    @property
    def verb(self) -> str:
        """The authz verb (risk class) this kind of action asks for."""
        return _VERBS[self]

    @property
    def needs_ref(self) -> bool:
        return self is not ActionKind.NAVIGATE


_VERBS = {
    ActionKind.CLICK: "submit",
    ActionKind.FILL: "input",
    ActionKind.TYPE: "input",
    ActionKind.PRESS: "input",
    ActionKind.SELECT: "input",
    ActionKind.NAVIGATE: "navigate",
}


class Outcome(enum.StrEnum):
    REFUSED = "REFUSED"
    DONE = "DONE"
    FAILED = "FAILED"
    UNKNOWN = "UNKNOWN"
    RECONCILED = "RECONCILED"


class Evidence(enum.StrEnum):
    NONE = "NONE"
    DISPATCH_RETURNED = "DISPATCH_RETURNED"
    OBSERVED = "OBSERVED"
    VERIFIED = "VERIFIED"


# Reasons the executor itself refuses for; the authz reasons come through by name.
STALE_OBSERVATION = "STALE_OBSERVATION"
STALE_REF = "STALE_REF"
STALE_EPOCH = "STALE_EPOCH"
IDEMPOTENCY_CONFLICT = "IDEMPOTENCY_CONFLICT"
RECONCILE_REQUIRED = "RECONCILE_REQUIRED"
AUTHZ_UNAVAILABLE = "AUTHZ_UNAVAILABLE"
ALLOW = "ALLOW"


@dataclass(frozen=True)
class Expectation:
    """What the agent expects to see after the action; checked on the re-observation."""

    text_visible: str = ""
    url_matches: str = ""

    def __bool__(self) -> bool:
        return bool(self.text_visible or self.url_matches)


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

    def fingerprint(self, role: str, name: str) -> str:
        """A digest of what the action does, independent of refs and observations.

        A retry with the same idempotency key after a fresh observation cites a new ref
        for the same element: it is the same action. The target is therefore named by its
        role and accessible name, not by its ref.
        """
        doc = {
            "kind": self.kind.value,
            "role": role,
            "name": name,
            "text": self.text,
            "key": self.key,
            "values": list(self.values),
            "url": self.url,
        }
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
        return params


@dataclass(frozen=True)
class Observation:
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


@dataclass(frozen=True)
class ActionResult:
    action_id: str
    outcome: Outcome
    reason: str
    message: str
    execution_started: bool
    evidence: Evidence
    idempotency_key: str
    decision_id: str = ""


@dataclass(frozen=True)
class ActResponse:
    result: ActionResult
    observation: Observation | None = None


@dataclass(frozen=True)
class SessionInfo:
    session_id: str
    target: str
    agent: str
    lease_epoch: int
