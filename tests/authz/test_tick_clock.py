"""The sidecar's expiry tick (every 20 ms) reads the store's clock only when something it
waits for may have come due: on PostgreSQL a read is a round trip, and fifty a second per
idle replica kept the database and the replica's core awake for nothing. An expiry is
still noticed on time: these tests count the reads and watch the expiry arrive.

Every test here needs the session's PostgreSQL server: all are slow-marked.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest

from handrail.authz import PgStore
from handrail.authz._authorizer import Authorizer
from handrail.authz._models import GrantInfo, Principal
from handrail.authz._pg_db import CLOCK_REUSE_S
from handrail.authz._policies import PolicyEngine
from tests.authz.conftest import ADMIN

pytestmark = pytest.mark.slow

EXE = Principal("exe", "executor")
TARGET = "browser:tick"


@pytest.fixture
def authz(pg_dsn: Callable[[], str], monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Authorizer, list[int]]]:
    store = PgStore(pg_dsn())
    reads: list[int] = []
    read = store.db.now_ms

    def counted() -> int:
        reads.append(read())
        return reads[-1]

    monkeypatch.setattr(store.db, "now_ms", counted)
    authorizer = Authorizer(store, PolicyEngine.load())  # not started: the tests tick by hand
    try:
        store.add_principal("exe", "executor")
        store.add_principal("agent-t", "agent")
        store.add_grant(GrantInfo("", "agent-t", TARGET, ("submit",)), ADMIN.name)  # (reads the clock)
        reads.clear()
        yield authorizer, reads
    finally:
        authorizer.close()
        store.close()


def test_nothing_waiting_reads_no_clock(authz: tuple[Authorizer, list[int]]) -> None:
    authorizer, reads = authz
    for _ in range(50):
        authorizer.tick()
    assert reads == []


def test_a_far_expiry_reads_the_clock_about_once_a_second_not_every_tick(authz: tuple[Authorizer, list[int]]) -> None:
    authorizer, reads = authz
    authorizer.acquire(EXE, TARGET, "agent-t", 3_600_000)
    reads.clear()
    started = time.monotonic()
    while time.monotonic() - started < 1.5:
        authorizer.tick()
        time.sleep(0.02)
    assert 1 <= len(reads) <= 1.5 / CLOCK_REUSE_S + 1  # against ~75 ticks


def test_a_near_expiry_is_read_and_told_on_time(authz: tuple[Authorizer, list[int]]) -> None:
    authorizer, reads = authz
    lease = authorizer.acquire(EXE, TARGET, "agent-t", 300)
    _, sub = authorizer.watch(EXE, [TARGET], 0)
    try:
        authorizer.tick()  # reads once: the clock is not known yet
        assert len(reads) >= 1
        deadline = time.monotonic() + 5
        told = None
        while told is None and time.monotonic() < deadline:
            authorizer.tick()
            event = sub.get(timeout=0.02)
            if event is not None and event.change == "expire":
                told = event
        assert told is not None and told.lease is not None and told.lease.epoch == lease.epoch
        assert reads[-1] >= lease.expires_at_ms  # judged by the database's clock, at or after the expiry
    finally:
        sub.close()
