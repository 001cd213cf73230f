"""The command line with a PostgreSQL store: principals and the decision log read from the
database, and a wrong ``--store`` said in one line."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from handrail.authz import _cli


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


def test_an_unreachable_database_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert _cli.main(["authz", "principal", "list", "--store", "postgresql://h@127.0.0.1:1/none"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: cannot connect to postgresql://h@127.0.0.1:1/none") and err.count("\n") == 1


def test_the_postgresql_store_implements_the_whole_protocol() -> None:
    import inspect

    from handrail.authz import AuthzStore, PgStore

    methods = [n for n, v in vars(AuthzStore).items() if inspect.isfunction(v) and not n.startswith("_")]
    for name in methods:
        ours, theirs = inspect.signature(getattr(AuthzStore, name)), inspect.signature(getattr(PgStore, name))
        assert ours == theirs, name
