"""The scenario format's checks: of the fixture's real state, and of the ledger."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from handrail._vocabulary import Reason

from ._acts import ExpectedOutcome, Model

__all__ = ["Checks", "LedgerChecks", "LedgerCount", "StateCheck"]


class StateCheck(Model):
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


class LedgerCount(Model):
    """How many ledger entries of a ``kind`` match the filters."""

    kind: str = "result"
    outcome: ExpectedOutcome | None = None
    reason: Reason | None = None
    idempotency_key: str | None = None
    principal_kind: Literal["agent", "human", "system"] | None = None  # human: a person's input
    equals: int | None = None
    at_least: int | None = None

    @model_validator(mode="after")
    def _has_test(self) -> LedgerCount:
        if self.equals is None and self.at_least is None:
            raise ValueError("a ledger count needs equals or at_least")
        return self

    def describe(self) -> str:
        filters = [f"kind {self.kind}"]
        for name in ("outcome", "reason", "idempotency_key", "principal_kind"):
            value = getattr(self, name)
            if value is not None:
                filters.append(f"{name} {value}")
        test = f"== {self.equals}" if self.equals is not None else f">= {self.at_least}"
        return f"entries with {', '.join(filters)} {test}"


class LedgerChecks(Model):
    """Checks of the ledger after the run (by default: it verifies, one DONE per key)."""

    verifies: bool = True
    unique_done_per_key: bool = True
    unresolved: int | None = None
    counts: list[LedgerCount] = Field(default_factory=list)


class Checks(Model):
    state: list[StateCheck] = Field(default_factory=list)
    ledger: LedgerChecks = Field(default_factory=LedgerChecks)
