"""The command line with a PostgreSQL store: principals and the decision log read from the
database, and a wrong ``--store`` said in one line."""

from __future__ import annotations

import secrets
import subprocess
import sys
from collections.abc import Callable

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from handrail.authz import _cli
from handrail.scenarios._postgres import pg_url


def test_a_store_that_is_not_postgresql_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert _cli.main(["authz", "serve", "--store", "mysql://x", "--listen", "127.0.0.1:0"]) == 1
    err = capsys.readouterr().err
    assert err == "handrail-authz: cannot start: --store must be a postgresql:// URL, not 'mysql://x'\n"
    assert _cli.main(["authz", "principal", "list", "--store", "sqlite:///x"]) == 1
    assert capsys.readouterr().err.startswith("error: --store: must be a postgresql:// URL")


@pytest.mark.slow
def test_principals_and_decisions_through_the_store(
    pg_dsn: Callable[[], str], capsys: pytest.CaptureFixture[str]
) -> None:
    dsn = pg_dsn()
    assert _cli.main(["authz", "principal", "add", "ops-1", "--role", "operator", "--store", dsn]) == 0
    token = capsys.readouterr().out.strip()
    assert token.startswith("hr_")
    assert _cli.main(["authz", "principal", "add", "ops-1", "--role", "operator", "--store", dsn]) == 1
    assert "already exists" in capsys.readouterr().err
    assert _cli.main(["authz", "principal", "list", "--store", dsn]) == 0
    assert capsys.readouterr().out.startswith("ops-1\toperator\t")
    assert _cli.main(["authz", "decisions", "--store", dsn]) == 0
    assert capsys.readouterr().out.strip() == "no decisions"
    assert _cli.main(["authz", "explain", "0" * 32, "--store", dsn]) == 1
    assert "no decision with id" in capsys.readouterr().err


@pytest.mark.parametrize(
    "command",
    [["principal", "list"], ["decisions"], ["prune-decisions", "--older-than", "90d"]],
    ids=["principal-list", "decisions", "prune"],
)
def test_an_unreachable_database_is_one_line(command: list[str]) -> None:
    """From a shell, not in-process: pytest's log capture would hide the connection pool's
    own warnings, which a real terminal shows above the error."""
    result = subprocess.run(
        [sys.executable, "-m", "handrail", "authz", *command, "--store", "postgresql://h@127.0.0.1:1/none"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert result.stderr.startswith("error: cannot connect to postgresql://h@127.0.0.1:1/none")
    assert "Connection refused" in result.stderr  # libpq's reason, not only that none came
    assert result.stderr.count("\n") == 1, result.stderr


@pytest.mark.parametrize(
    ("store", "says"),
    [
        ("postgresql://127.0.0.1:1/none", "cannot connect to postgresql://127.0.0.1:1/none within 5 s: connection "),
        (
            "postgresql://127.0.0.1:1/none?sslmode=sometimes",
            'string: connection is bad: invalid sslmode value: "sometimes"',
        ),
        (
            "postgresql://127.0.0.1:1/none?colour=blue",
            "postgresql://?: not a usable connection string: invalid URI query",
        ),
    ],
    ids=["refused", "bad-sslmode", "bad-parameter"],
)
def test_a_sidecar_whose_database_it_cannot_reach_says_why_in_one_line(store: str, says: str) -> None:
    """``serve`` logs at WARNING: the pool's own warnings would print above the error; the
    store connects once first, so the one line holds libpq's reason."""
    result = subprocess.run(
        [sys.executable, "-m", "handrail", "authz", "serve", "--store", store, "--listen", "127.0.0.1:0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert result.stderr.startswith("handrail-authz: cannot start: ") and says in result.stderr, result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    if "within 5 s" not in says:  # a string that cannot work is said at once, not after 5 s of tries
        assert "within" not in result.stderr


@pytest.mark.slow
def test_a_role_that_may_not_create_the_schema_is_one_line(
    pg_dsn: Callable[[], str], capsys: pytest.CaptureFixture[str]
) -> None:
    """An operator's mistake: the sidecar's role can reach its schema but not create in it.
    The migration the store could not apply is named in one line, not a traceback."""
    dsn = pg_dsn()
    schema = str(conninfo_to_dict(dsn)["options"]).split("=", 1)[1]
    role = f"reader_{secrets.token_hex(4)}"
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute(f'CREATE ROLE "{role}" LOGIN')
        admin.execute(f'GRANT USAGE ON SCHEMA "{schema}" TO "{role}"')
    try:
        weak = pg_url(dsn, user=role)
        assert _cli.main(["authz", "principal", "list", "--store", weak]) == 1
        err = capsys.readouterr().err
        assert err.startswith(f"error: postgresql://{role}@") and err.count("\n") == 1, err
        assert f"refused the migrations table: permission denied for schema {schema}" in err
    finally:
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute(f'DROP OWNED BY "{role}"')
            admin.execute(f'DROP ROLE "{role}"')


def test_the_postgresql_store_implements_the_whole_protocol() -> None:
    import inspect

    from handrail.authz import AuthzStore, PgStore

    methods = [n for n, v in vars(AuthzStore).items() if inspect.isfunction(v) and not n.startswith("_")]
    for name in methods:
        ours, theirs = inspect.signature(getattr(AuthzStore, name)), inspect.signature(getattr(PgStore, name))
        assert ours == theirs, name


@pytest.mark.slow
@pytest.mark.parametrize("skew_s", [3600, -600])
def test_a_ttl_is_judged_by_the_databases_clock_not_the_operators(
    pg_dsn: Callable[[], str], monkeypatch: pytest.MonkeyPatch, skew_s: int
) -> None:
    """An operator whose clock is an hour fast (or ten minutes slow) adds a principal with
    ``--ttl 300``: it expires 300 s from now by the database's clock, which judges it."""
    import time

    dsn = pg_dsn()
    real = time.time_ns
    monkeypatch.setattr(time, "time_ns", lambda: real() + skew_s * 1_000_000_000)
    assert _cli.main(["authz", "principal", "add", "temp-1", "--role", "agent", "--ttl", "300", "--store", dsn]) == 0
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT expires_at_ms - (extract(epoch from clock_timestamp()) * 1000)::bigint FROM principals"
            " WHERE name = 'temp-1'"
        ).fetchone()
    assert row is not None and 290_000 <= row[0] <= 300_000
