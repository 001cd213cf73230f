"""Property tests of the control lease, driven through the authorizer and the store (no gRPC).

Under any interleaving of acquire, renew, release, takeover, hand-back, desk activity, forced
expiry and time passing, from several agents and operators:

* there is at most one holder, and only a live agent holder at the current epoch is allowed;
* the epoch never goes down, and goes up on every change of holder;
* a stale epoch never gets an allow, and no two agents are ever allowed under one epoch.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from handrail.authz import Authorizer, AuthzError, GrantInfo, LeaseInfo, PolicyEngine, SqliteStore
from handrail.authz._core import CheckInput, Principal

TARGET = "browser:p"
AGENTS = ("agent-1", "agent-2", "agent-3")
OPERATORS = ("op-1", "op-2")
EXE = Principal("exe", "executor")
ADMIN = Principal("admin", "admin")
ENGINE = PolicyEngine.load()

agents = st.sampled_from(AGENTS)
operators = st.sampled_from(OPERATORS)
ttls = st.sampled_from([0, 50, 1_000, 30_000])
epoch_shift = st.sampled_from([0, 0, 0, -1, 1])  # mostly the right epoch, sometimes not


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000_000

    def __call__(self) -> int:
        return self.now


class LeaseMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="lease-prop-"))
        self.clock = Clock()
        self.store = SqliteStore.in_dir(self.dir, clock=self.clock)
        self.authz = Authorizer(self.store, ENGINE)
        for agent in AGENTS:
            self.store.add_principal(agent, "agent")
        op = Principal("op-1", "operator")
        for agent in AGENTS:
            self.authz.grant(op, GrantInfo("", agent, TARGET, ("submit",), ()))
        self.last = LeaseInfo(TARGET)
        self.max_epoch = 0
        self.allowed: dict[int, set[str]] = {}

    def teardown(self) -> None:
        self.store.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def _observe(self) -> None:
        """The lease as stored now: the epoch moves up exactly when the holder changes."""
        now = self.store.get_lease(TARGET)
        before = self.last
        assert now.epoch >= before.epoch
        holder_changed = (now.holder_kind, now.holder) != (before.holder_kind, before.holder)
        if holder_changed and now.holder_kind:  # a new holder took it: a new epoch
            assert now.epoch > before.epoch, (before, now)
        if not holder_changed and now.epoch != before.epoch:
            # only a release, hand-back or lapse-and-reacquire changes the epoch without a
            # visible holder change; never twice without an acquire
            assert not now.holder_kind or now.epoch > before.epoch
        self.last = now
        self.max_epoch = max(self.max_epoch, now.epoch)

    def _try(self, fn, *args) -> None:  # type: ignore[no-untyped-def]
        with contextlib.suppress(AuthzError):
            fn(*args)
        self._observe()

    @rule(agent=agents, ttl=ttls)
    def acquire(self, agent: str, ttl: int) -> None:
        self._try(self.authz.acquire, EXE, TARGET, agent, ttl)

    @rule(agent=agents, shift=epoch_shift, ttl=ttls)
    def renew(self, agent: str, shift: int, ttl: int) -> None:
        self._try(self.authz.renew, EXE, TARGET, agent, self.last.epoch + shift, ttl)

    @rule(agent=agents, shift=epoch_shift)
    def release(self, agent: str, shift: int) -> None:
        self._try(self.authz.release, EXE, TARGET, agent, self.last.epoch + shift)

    @rule(op=operators, ttl=ttls)
    def take_over(self, op: str, ttl: int) -> None:
        before = self.store.get_lease(TARGET)
        self.authz.take_over(Principal(op, "operator"), TARGET, ttl, "")
        self._observe()
        lease = self.last
        assert lease.holder_kind == "human" and lease.holder == op  # always succeeds
        if not (before.holder_kind == "human" and before.holder == op):
            assert lease.epoch > before.epoch

    @rule(op=operators, shift=epoch_shift, next_agent=st.sampled_from(("", *AGENTS)))
    def hand_back(self, op: str, shift: int, next_agent: str) -> None:
        self._try(
            self.authz.hand_back,
            Principal(op, "operator"),
            TARGET,
            self.last.epoch + shift,
            next_agent,
        )

    @rule()
    def desk_activity(self) -> None:
        self.authz.report_activity(EXE, TARGET, "", 0)
        self._observe()
        assert self.last.holder == f"desk:{TARGET}"

    @rule()
    def expire(self) -> None:
        epoch = self.store.get_lease(TARGET).epoch
        self.authz.expire_lease(ADMIN, TARGET)
        self._observe()
        assert not self.last.holder_kind and self.last.epoch == epoch

    @rule(ms=st.sampled_from([1, 49, 50, 1_000, 30_000, 600_000]))
    def time_passes(self, ms: int) -> None:
        self.clock.now += ms
        self._observe()

    @precondition(lambda self: self.max_epoch > 0)
    @rule(agent=agents, epoch=st.integers(min_value=0, max_value=40))
    def check(self, agent: str, epoch: int) -> None:
        epoch = min(epoch, self.max_epoch + 1)
        decision = self.authz.check(EXE, CheckInput(agent, TARGET, epoch, "submit"))
        lease = self.store.get_lease(TARGET)
        if decision.allow:
            assert lease.holder_kind == "agent" and lease.holder == agent
            assert lease.epoch == epoch == self.max_epoch  # never a stale epoch
            self.allowed.setdefault(epoch, set()).add(agent)
            assert len(self.allowed[epoch]) == 1  # one writer per epoch
        elif epoch != lease.epoch and lease.holder == agent and lease.holder_kind == "agent":
            assert decision.reason == "STALE_EPOCH"

    @invariant()
    def at_most_one_holder(self) -> None:
        lease = self.store.get_lease(TARGET)
        if lease.holder_kind:
            assert lease.holder and lease.expires_at_ms > self.clock.now
        else:
            assert lease.holder == "" and lease.expires_at_ms == 0


LeaseMachine.TestCase.settings = settings(
    max_examples=60,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestLeaseMachine = LeaseMachine.TestCase
