"""The PostgreSQL store's start and the database's refusals: a replica whose role has only
its tables' rights starts on a migrated database; replicas starting together migrate once;
a schema newer than this version, or a migrations table edited by hand, is refused in one
line; a statement the database refuses (a privilege revoked, a table renamed away, a
read-only session) is UNAVAILABLE, never INTERNAL nor an allow, and logged in one line.

Every test here needs the session's PostgreSQL server: all are slow-marked.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from handrail.authz import AuthzClient, AuthzUnavailableError, GrantInfo, PgStore, serve
from handrail.authz._errors import StoreUnavailableError
from handrail.authz._pg_db import PgDatabase
from handrail.authz._pg_schema import MIGRATIONS
from handrail.scenarios._postgres import terminate
from tests.authz.conftest import ADMIN

pytestmark = pytest.mark.slow

TARGET = "browser:1"


TABLE_RIGHTS = (
    "GRANT USAGE ON SCHEMA {s} TO {r}",
    "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {s} TO {r}",
    "GRANT USAGE ON ALL SEQUENCES IN SCHEMA {s} TO {r}",
)


def test_a_role_with_only_its_tables_rights_starts_on_a_migrated_database(
    pg_dsn: Callable[[], str], role: Callable[..., str], tmp_path: Path
) -> None:
    """As docs/deploy.md recommends: no CREATE on the schema, so no migration to apply."""
    dsn = pg_dsn()
    PgStore(dsn, pool_size=2).close()  # migrated by the schema's owner
    weak = role(dsn, *TABLE_RIGHTS)
    reader = role(dsn, "GRANT USAGE ON SCHEMA {s} TO {r}", "GRANT SELECT ON ALL TABLES IN SCHEMA {s} TO {r}")
    server, port = serve(tmp_path / "data", "127.0.0.1:0", store=weak)
    try:
        token = server.store.add_principal("exe", "executor")
        server.store.add_principal("agent-a", "agent")
        server.authorizer.grant(ADMIN, GrantInfo("", "agent-a", "*", ("read",)))
        with AuthzClient(f"127.0.0.1:{port}", token) as exe:
            epoch = exe.acquire(TARGET, holder="agent-a", ttl_ms=60_000).epoch
            assert exe.check("agent-a", TARGET, epoch, "read").allow
    finally:
        server.stop(None)
    with PgStore(reader, pool_size=2) as store:  # a read-only role starts and reads
        assert [p.name for p in store.principals()] == ["agent-a", "exe"]


def test_replicas_starting_together_on_an_empty_schema_migrate_once(pg_dsn: Callable[[], str]) -> None:
    dsn = pg_dsn()
    databases = [PgDatabase(dsn, min_size=1, max_size=1) for _ in range(3)]
    start = threading.Barrier(3)
    applied: list[list[int]] = []

    def migrate(db: PgDatabase) -> None:
        start.wait()
        applied.append(db.migrate(MIGRATIONS))

    threads = [threading.Thread(target=migrate, args=(db,)) for db in databases]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert sorted(applied) == [[], [], [1, 2, 3, 4]]
        assert databases[0].applied() == [1, 2, 3, 4]
        assert databases[0].migrate(MIGRATIONS) == []
    finally:
        for db in databases:
            db.close()


def test_a_schema_newer_than_this_version_is_refused_at_start(pg_dsn: Callable[[], str], tmp_path: Path) -> None:
    """An older replica beside newer ones could not read their change-log rows."""
    dsn = pg_dsn()
    PgStore(dsn, pool_size=2).close()
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute("INSERT INTO migrations VALUES (5, 'from the future', 0)")
    serve_it = ["authz", "serve", "--store", dsn, "--listen", "127.0.0.1:0", "--data-dir", str(tmp_path / "d")]
    result = subprocess.run(
        [sys.executable, "-m", "handrail", *serve_it],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 1
    assert result.stderr.startswith("handrail-authz: cannot start: the store's schema at postgresql://")
    assert result.stderr.endswith(
        " is at migration 5, this version knows 1-4: upgrade handrail before starting this replica\n"
    )
    assert result.stderr.count("\n") == 1, result.stderr


def test_a_deleted_migration_row_is_named_not_blamed_on_privileges(pg_dsn: Callable[[], str]) -> None:
    dsn = pg_dsn()
    PgStore(dsn, pool_size=2).close()
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute("DELETE FROM migrations WHERE version = 3")
    with pytest.raises(StoreUnavailableError) as refused:
        PgStore(dsn, pool_size=2)
    message = str(refused.value)
    assert "migration 3 (a change to a principal's grants is a change to its row) is not recorded" in message
    assert message.endswith("already exists): the migrations table was edited")
    assert "the role must be able" not in message


# --- the database refuses a statement -------------------------------------------------------------

REFUSALS = {
    "no-insert-on-decision-log": ("REVOKE INSERT ON decision_log FROM {r}", ("check",)),
    "decision-log-renamed": ("ALTER TABLE decision_log RENAME TO decision_log_away", ("check", "decisions")),
    "no-update-on-leases": ("REVOKE UPDATE ON leases FROM {r}", ("renew",)),
    "no-select-on-grants": ("REVOKE SELECT ON grants FROM {r}", ("grant",)),
    "read-only-sessions": ("ALTER ROLE {r} SET default_transaction_read_only = on", ("check", "grant")),
}


@pytest.mark.parametrize("case", list(REFUSALS))
def test_a_statement_the_database_refuses_is_unavailable_in_one_log_line(
    case: str, pg_dsn: Callable[[], str], role: Callable[..., str], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    refusal, calls = REFUSALS[case]
    dsn = pg_dsn()
    weak = role(dsn, "ALTER SCHEMA {s} OWNER TO {r}")
    name = f'"{conninfo_to_dict(weak)["user"]}"'
    server, port = serve(tmp_path / "data", "127.0.0.1:0", store=weak)
    clients: list[AuthzClient] = []
    try:
        store = server.store
        tokens = {who: store.add_principal(who, r) for who, r in (("op", "operator"), ("exe", "executor"))}
        store.add_principal("agent-a", "agent")
        server.authorizer.grant(ADMIN, GrantInfo("", "agent-a", "*", ("read",)))
        exe, op = (AuthzClient(f"127.0.0.1:{port}", tokens[who], timeout_s=5.0) for who in ("exe", "op"))
        clients += [exe, op]
        epoch = exe.acquire(TARGET, holder="agent-a", ttl_ms=60_000).epoch
        assert exe.check("agent-a", TARGET, epoch, "read").allow  # remembered from now on
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute(refusal.format(r=name))
            terminate(admin, "usename = %s", (name.strip('"'),))  # the role's setting applies to new sessions
        attempts = {
            "check": lambda: exe.check("agent-a", TARGET, epoch, "read"),
            "decisions": lambda: op.list_decisions(),
            "renew": lambda: exe.renew(TARGET, epoch, holder="agent-a", ttl_ms=60_000),
            "grant": lambda: op.grant("agent-a", "browser:2", ["submit"], []),
        }
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            for call in calls:
                for _ in range(2):  # the first after the cut may meet a connection that was ended
                    with pytest.raises(AuthzUnavailableError) as refused:
                        attempts[call]()
                assert "the store's database refused" in str(refused.value), (call, str(refused.value))
        said = [r for r in caplog.records if "the store's database refused" in r.getMessage()]
        assert said and all(r.levelno == logging.WARNING and r.exc_info is None for r in said)
        assert not [r for r in caplog.records if r.exc_info], [r.getMessage() for r in caplog.records]
    finally:
        for c in clients:
            c.close()
        server.stop(None)


def test_a_refused_change_log_append_is_one_log_line_and_the_change_stands(
    pg_dsn: Callable[[], str], role: Callable[..., str], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A lease change whose Watch event the database will not log (no INSERT on the change
    log) still stands; the refusal is said once, naming the event, not twice."""
    dsn = pg_dsn()
    weak = role(dsn, "ALTER SCHEMA {s} OWNER TO {r}")
    name = f'"{conninfo_to_dict(weak)["user"]}"'
    server, port = serve(tmp_path / "data", "127.0.0.1:0", store=weak)
    try:
        op_token = server.store.add_principal("op", "operator")
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute(f"REVOKE INSERT ON changes FROM {name}")
        with AuthzClient(f"127.0.0.1:{port}", op_token, timeout_s=5.0) as op:
            caplog.clear()
            with caplog.at_level(logging.WARNING):
                lease = op.take_over(TARGET, ttl_ms=60_000)
            assert op.get_lease(TARGET).epoch == lease.epoch and lease.holder_kind == "human"
        said = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        assert len(said) == 1, said
        assert "refused the change log's append of a lease takeover event" in said[0]
    finally:
        server.stop(None)
