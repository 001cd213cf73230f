"""A PostgreSQL replica checks a remembered snapshot by the place (``ctid``) and version
(``xmin``) of the caller's, the agent's and the lease's rows, one page read each and no
index walk (``_pg_grants.still_current``). Each test here moves, rewrites, deletes or
creates one of those rows behind the store's back, with SQL a person or another program
might run, and asks the store to log a decision on what it remembers: the log must refuse
it whenever a row is not what was read, and the check read afresh must be right.

The hardest case: ``VACUUM FULL`` moves rows, and another principal written by the same
transaction (so with the same ``xmin``) lands at the place the agent's row had. Only the
key compared at that place tells them apart.

Every test here needs the session's PostgreSQL server: all are slow-marked.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator

import psycopg
import pytest

from handrail.authz import PgStore
from handrail.authz._lease_changes import Acquire
from handrail.authz._models import GrantInfo
from handrail.authz._pg_grants import Reading
from tests.authz.conftest import ADMIN, FakeClock
from tests.authz.test_remembered_snapshots import AGENT, _remembered_record
from tests.authz.test_replicas import TARGET
from tests.recorder.test_pg_heads import _sql

pytestmark = pytest.mark.slow

HOUR = 3_600_000
_CLOCK = FakeClock()  # (never moved here)


@pytest.fixture
def store(pg_dsn: Callable[[], str]) -> Iterator[tuple[PgStore, str, str]]:
    dsn = pg_dsn()
    with PgStore(dsn, clock=_CLOCK) as s:
        yield s, s.add_principal("exe", "executor"), dsn


def _log_remembered(store: PgStore, token: str) -> bool:
    """Decide on the remembered snapshot and log it: whether it was logged."""
    return _remembered_record(store, token, _CLOCK)


def _agent_with_lease(store: PgStore) -> None:
    store.add_principal(AGENT, "agent")
    store.add_grant(GrantInfo("", AGENT, TARGET, ("submit",)), ADMIN.name)
    store.change_lease(TARGET, Acquire(AGENT, HOUR))


def test_an_untouched_snapshot_is_logged_and_reads_one_page_per_row(store: tuple[PgStore, str, str]) -> None:
    s, exe, _ = store
    _agent_with_lease(s)
    s.check_snapshot(AGENT, TARGET, exe)
    snap = s.check_snapshot(AGENT, TARGET, exe, recent=True)
    assert isinstance(snap.stamp, Reading)
    assert all(v is not None for v in snap.stamp.versions)  # three rows found: places and versions
    assert _log_remembered(s, exe) and _log_remembered(s, exe)


@pytest.mark.parametrize(
    "change",
    [
        "UPDATE leases SET holder = holder WHERE target = '{target}'",  # a new version, same values
        "UPDATE principals SET role = role WHERE name = '{agent}'",
        "UPDATE principals SET role = role WHERE name = 'exe'",  # the caller's row
        "DELETE FROM leases WHERE target = '{target}'",
    ],
)
def test_a_row_rewritten_or_deleted_by_hand_voids_the_snapshot(store: tuple[PgStore, str, str], change: str) -> None:
    s, exe, dsn = store
    _agent_with_lease(s)
    s.check_snapshot(AGENT, TARGET, exe)
    _sql(dsn, change.format(target=TARGET, agent=AGENT))
    assert not _log_remembered(s, exe)


def test_a_lease_created_where_none_was_read_voids_the_snapshot(store: tuple[PgStore, str, str]) -> None:
    s, exe, dsn = store
    s.add_principal(AGENT, "agent")
    s.add_grant(GrantInfo("", AGENT, TARGET, ("submit",)), ADMIN.name)
    s.check_snapshot(AGENT, TARGET, exe)
    snap = s.check_snapshot(AGENT, TARGET, exe, recent=True)
    assert isinstance(snap.stamp, Reading) and snap.lease is None and snap.stamp.versions[4:] == (None, None)
    assert _log_remembered(s, exe)  # still no lease: logged
    with PgStore(dsn, clock=FakeClock()) as other:  # another replica: this one remembers on
        other.change_lease(TARGET, Acquire(AGENT, HOUR))
    assert not _log_remembered(s, exe)
    assert s.check_snapshot(AGENT, TARGET, exe).lease is not None  # read afresh: the new lease


def test_rows_moved_by_vacuum_full_void_the_snapshot_and_the_fresh_read_holds(store: tuple[PgStore, str, str]) -> None:
    s, exe, dsn = store
    for i in range(5):  # rows in front of the agent's and the lease's, to be deleted
        s.add_principal(f"early-{i}", "agent")
    s.change_lease("browser:early", Acquire("early-0", HOUR))
    _agent_with_lease(s)
    s.check_snapshot(AGENT, TARGET, exe)
    reading = s.check_snapshot(AGENT, TARGET, exe, recent=True).stamp
    assert isinstance(reading, Reading)
    _sql(
        dsn,
        "DELETE FROM principals WHERE name LIKE 'early-%'",
        "DELETE FROM leases WHERE target = 'browser:early'",
        "VACUUM FULL principals",
        "VACUUM FULL leases",
    )
    with psycopg.connect(dsn, autocommit=True) as conn:
        places = conn.execute(
            "SELECT (SELECT ctid::text FROM principals WHERE name = %s), (SELECT ctid::text FROM leases WHERE target = %s)",
            (AGENT, TARGET),
        ).fetchone()
    assert places is not None and places[0] != reading.versions[2] and places[1] != reading.versions[4]  # moved
    assert not _log_remembered(s, exe)
    fresh = s.check_snapshot(AGENT, TARGET, exe)
    assert fresh.agent is not None and fresh.lease is not None and fresh.lease.holder == AGENT
    assert _log_remembered(s, exe)  # the fresh read's places hold


def test_another_principal_of_the_same_transaction_at_the_agents_old_place_is_not_taken_for_it(
    store: tuple[PgStore, str, str],
) -> None:
    """Fillers and the agent are written by one statement (one ``xmin``, rows of one size);
    the fillers in front of the agent are deleted and ``VACUUM FULL`` packs the table, so
    the agent's row moves forward and a filler with the same ``xmin`` takes its old place.
    The remembered snapshot must not be logged on it."""
    s, exe, dsn = store
    rows = [f"f-{i:05d}" for i in range(300)]  # as long as AGENT's name
    rows.insert(150, AGENT)
    assert len({len(name) for name in rows}) == 1
    values = ", ".join(f"('{name}', 'agent', '{hashlib.sha256(name.encode()).hexdigest()}', 0)" for name in rows)
    _sql(dsn, f"INSERT INTO principals (name, role, token_sha256, created_at_ms) VALUES {values}")
    s.change_lease(TARGET, Acquire(AGENT, HOUR))
    s.check_snapshot(AGENT, TARGET, exe)
    reading = s.check_snapshot(AGENT, TARGET, exe, recent=True).stamp
    assert isinstance(reading, Reading)
    agent_place, agent_xmin = reading.versions[2], reading.versions[3]
    front = ", ".join(repr(n) for n in rows[:150])
    _sql(dsn, f"DELETE FROM principals WHERE name IN ({front})", "VACUUM FULL principals")
    with psycopg.connect(dsn, autocommit=True) as conn:
        there = conn.execute("SELECT name, xmin::text FROM principals WHERE ctid = %s::tid", (agent_place,)).fetchone()
    assert there is not None and there[0] != AGENT and there[1] == agent_xmin  # the trap is set
    assert not _log_remembered(s, exe)
    fresh = s.check_snapshot(AGENT, TARGET, exe)
    assert fresh.agent is not None and fresh.agent.name == AGENT
    assert _log_remembered(s, exe)
