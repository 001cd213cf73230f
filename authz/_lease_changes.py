"""Lease changes as values: what an acquire, a renewal, a takeover ... asks of the store.

Each change is a frozen dataclass that names itself (:attr:`LeaseChange.name`, the
``change`` a watcher sees) and carries its parameters, and is callable as the pure
transition of :mod:`._core` (``change(current_row, now_ms) -> next_row``). A store that can
run the transition in Python (SQLite, inside its write transaction) just calls it; a store
that must write one compare-and-set statement judged by its own clock (PostgreSQL) reads the
parameters and picks its statement by the change's type. Either way the rule is the one in
:mod:`._core`: the statements of the PostgreSQL store are held to these transitions by a
property test.

:meth:`LeaseChange.check` validates the parameters (the TTL's bounds, the next holder's
length) without touching the store.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from handrail.authz._core import (
    DEFAULT_AGENT_TTL_MS,
    DEFAULT_HUMAN_TTL_MS,
    check_text,
    check_ttl,
    desk_holder,
    lease_acquire,
    lease_expire,
    lease_hand_back,
    lease_release,
    lease_renew,
    lease_report_activity,
    lease_take_over,
)
from handrail.authz._models import LeaseInfo


class LeaseChange:
    """One change to a target's lease; call it as ``change(current, now_ms)``."""

    name: ClassVar[str] = ""

    def __call__(self, lease: LeaseInfo, now_ms: int) -> LeaseInfo:
        raise NotImplementedError

    def check(self) -> None:
        """Raise :class:`InvalidArgumentError` for a bad parameter (nothing by default)."""


@dataclass(frozen=True)
class Acquire(LeaseChange):
    """An agent takes a free, lapsed or handed-back lease, or renews its own."""

    holder: str
    ttl_ms: int = 0
    name: ClassVar[str] = "acquire"

    @property
    def ttl(self) -> int:
        """The effective TTL (the default for 0); raises for one out of bounds."""
        return check_ttl("ttl_ms", self.ttl_ms, DEFAULT_AGENT_TTL_MS)

    def check(self) -> None:
        self.ttl  # noqa: B018 - validates

    def __call__(self, lease: LeaseInfo, now_ms: int) -> LeaseInfo:
        return lease_acquire(lease, self.holder, self.ttl_ms, now_ms)


@dataclass(frozen=True)
class Renew(LeaseChange):
    """The holding agent extends its live lease at its epoch; the epoch stays."""

    holder: str
    epoch: int
    ttl_ms: int = 0
    name: ClassVar[str] = "renew"

    @property
    def ttl(self) -> int:
        """The effective TTL (the default for 0); raises for one out of bounds."""
        return check_ttl("ttl_ms", self.ttl_ms, DEFAULT_AGENT_TTL_MS)

    def check(self) -> None:
        self.ttl  # noqa: B018 - validates

    def __call__(self, lease: LeaseInfo, now_ms: int) -> LeaseInfo:
        return lease_renew(lease, self.holder, self.epoch, self.ttl_ms, now_ms)


@dataclass(frozen=True)
class Release(LeaseChange):
    """The holding agent gives its lease up at its epoch; the epoch moves."""

    holder: str
    epoch: int
    name: ClassVar[str] = "release"

    def __call__(self, lease: LeaseInfo, now_ms: int) -> LeaseInfo:
        return lease_release(lease, self.holder, self.epoch, now_ms)


@dataclass(frozen=True)
class TakeOver(LeaseChange):
    """A person takes control; always succeeds, bumps the epoch unless that person holds it."""

    operator: str
    ttl_ms: int = 0
    name: ClassVar[str] = "takeover"

    @property
    def ttl(self) -> int:
        """The effective TTL (the default for 0); raises for one out of bounds."""
        return check_ttl("ttl_ms", self.ttl_ms, DEFAULT_HUMAN_TTL_MS)

    def holder_for(self, target: str) -> str:
        """The human who will hold the lease of ``target``."""
        return self.operator

    def check(self) -> None:
        self.ttl  # noqa: B018 - validates

    def __call__(self, lease: LeaseInfo, now_ms: int) -> LeaseInfo:
        return lease_take_over(lease, self.operator, self.ttl_ms, now_ms)


@dataclass(frozen=True)
class ReportActivity(TakeOver):
    """A person is at the desk: a takeover for the human holder ``desk:<target>``."""

    operator: str = ""
    name: ClassVar[str] = "activity"

    def holder_for(self, target: str) -> str:
        return desk_holder(target)

    def __call__(self, lease: LeaseInfo, now_ms: int) -> LeaseInfo:
        return lease_report_activity(lease, self.ttl_ms, now_ms)


@dataclass(frozen=True)
class HandBack(LeaseChange):
    """An operator frees the lease at its epoch, maybe reserving it for one agent."""

    epoch: int
    next_holder: str = ""
    name: ClassVar[str] = "handback"

    def check(self) -> None:
        check_text("next_holder", self.next_holder)

    def __call__(self, lease: LeaseInfo, now_ms: int) -> LeaseInfo:
        return lease_hand_back(lease, self.epoch, self.next_holder, now_ms)


@dataclass(frozen=True)
class Expire(LeaseChange):
    """A live lease lapses now (the epoch stays until someone acquires)."""

    name: ClassVar[str] = "expire"

    def __call__(self, lease: LeaseInfo, now_ms: int) -> LeaseInfo:
        return lease_expire(lease, now_ms)
