"""A network that drops every packet between Handrail and its PostgreSQL (a partition, a
host that froze): nothing refuses or resets, so only TCP's own timers can tell. Before,
every connection had the system's (keepalive after two hours, unacknowledged data kept
for ~15 min): a ledger append, a sidecar statement and the Watch listener each waited on
the dead path for as long as the partition lasted. Now each ends in seconds, says so, and
works again once the network is back (``handrail._dsn.TCP_DEFAULTS``)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from handrail._dsn import TCP_DEFAULTS, connect_options
from handrail.authz import StoreUnavailableError
from handrail.authz._pg import PgStore
from handrail.authz._pg_db import PgDatabase
from handrail.recorder import LedgerError, open_ledger
from handrail.scenarios._postgres import PrivatePostgres, pg_url
from tests.net_partition import PORT, Partition, unavailable

PARAMS = {"action": "click", "ref": "e1"}
#: how long a dead path may hold a call: TCP's 10 s, and slack. Not tried again on another
#: pooled connection (each would take as long): before that rule, the statement below
#: waited 10 s more for the pool's check of its second connection, then for a new one.
WITHIN_S = 18.0


def test_the_defaults_apply_only_where_the_dsn_sets_none() -> None:
    assert connect_options("postgresql://u@db.internal/h") == {"sslpassword": "handrail-never-prompts", **TCP_DEFAULTS}
    own = connect_options("postgresql://u@db.internal/h?tcp_user_timeout=30000&keepalives=0&sslpassword=x")
    assert "tcp_user_timeout" not in own and "keepalives" not in own and "sslpassword" not in own
    assert own["keepalives_idle"] == "5"
    assert connect_options("host=db.internal keepalives_idle=60")["keepalives_count"] == "3"
    assert "keepalives_idle" not in connect_options("host=db.internal keepalives_idle=60")


@pytest.fixture
def partition(postgres: PrivatePostgres) -> Iterator[Partition]:
    why = unavailable() or ("" if postgres.directory is not None else "an outside server (HANDRAIL_TEST_PG)")
    if why:
        pytest.skip(why)
    assert postgres.directory is not None
    made = Partition(postgres.directory / f".s.PGSQL.{postgres.port}")
    try:
        yield made
    finally:
        made.close()


def _start(call: Callable[[], Any]) -> dict[str, Any]:
    """Run ``call`` in a thread; the dict it returns gets ``error`` (what it raised, or
    None) and ``took`` (seconds) when it ends."""
    out: dict[str, Any] = {}
    t0 = time.monotonic()

    def run() -> None:
        try:
            call()
            out["error"] = None
        except BaseException as exc:  # (reported to the test)
            out["error"] = exc
        out["took"] = time.monotonic() - t0

    threading.Thread(target=run, daemon=True).start()
    return out


@pytest.mark.slow
def test_a_partition_ends_each_connection_in_seconds_and_all_work_again_after(
    pg_dsn: Callable[[], str], partition: Partition, caplog: pytest.LogCaptureFixture
) -> None:
    dsn = pg_dsn()
    far = pg_url(dsn, host=partition.host, port=str(PORT))
    PgStore(dsn).close()  # the schema
    store = PgStore(far)
    subscription = store.event_hub().subscribe(["browser:1"])  # its listener is up from here
    db = PgDatabase(far, min_size=2, max_size=2)
    ledger = open_ledger(far, executor_id="exe-1")
    try:
        ledger.intent("s1", "a0", "k0", "agent", 1, PARAMS)
        db.pool.wait(10)  # both connections open: a retry would have another one to try
        assert db.run(lambda c: c.execute("SELECT 1").fetchone(), idempotent=True) == (1,)
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="handrail.authz.pg"):
            partition.drop()
            append = _start(lambda: ledger.intent("s1", "a1", "k1", "agent", 1, PARAMS))
            select = _start(lambda: db.run(lambda c: c.execute("SELECT 2").fetchone(), idempotent=True))
            deadline = time.monotonic() + WITHIN_S + 5
            while time.monotonic() < deadline and not ("took" in append and "took" in select):
                time.sleep(0.1)
            deadline = time.monotonic() + WITHIN_S
            while time.monotonic() < deadline and "the watch listener lost its connection" not in caplog.text:
                time.sleep(0.2)
            listener_said = "the watch listener lost its connection" in caplog.text
        assert append.get("took", WITHIN_S) < WITHIN_S, f"the append waited {append} on the dead path"
        assert isinstance(append["error"], LedgerError), append
        assert select.get("took", WITHIN_S) < WITHIN_S, f"the statement waited {select} on the dead path"
        assert isinstance(select["error"], StoreUnavailableError), select
        assert listener_said, caplog.text

        partition.restore()
        deadline = time.monotonic() + WITHIN_S
        while True:  # the pools refill and the listener reconnects, on their own
            try:
                entry = ledger.intent("s1", "a2", "k2", "agent", 1, PARAMS)
                assert db.run(lambda c: c.execute("SELECT 3").fetchone(), idempotent=True) == (3,)
                break
            except (LedgerError, StoreUnavailableError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        assert entry.seq == 2 and ledger.verify().ok  # the failed append wrote nothing
        with PgStore(dsn) as other:  # a change made through another replica reaches this one's Watch
            other.event_hub().publish(kind="grant", target="browser:1", change="revoke", at_ms=1)
        event = subscription.get(timeout=WITHIN_S)
        assert event is not None and (event.kind, event.change) == ("grant", "revoke")
    finally:
        ledger.close()
        db.close()
        store.close()
