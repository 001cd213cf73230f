"""The PostgreSQL ledger under the database roles docs/deploy.md gives: on a migrated
database an executor's role needs its tables' rights and no ``CREATE`` on the schema (each
start used to run ``CREATE TABLE IF NOT EXISTS ledger_migrations``, which PostgreSQL
refuses without ``CREATE`` even when the table is there, so an executor with the rights the
doc listed did not start); a reader needs ``USAGE`` and ``SELECT``; a role that may not
create refuses to migrate an empty schema in one line."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from handrail.recorder import LedgerError, open_ledger

pytestmark = pytest.mark.slow

PARAMS = {"action": "click", "ref": "e1"}

#: What docs/deploy.md gives an executor's database role.
EXECUTOR_RIGHTS = (
    "GRANT USAGE ON SCHEMA {s} TO {r}",
    "GRANT SELECT, INSERT, UPDATE ON ledger_entries, ledger_heads TO {r}",
    "GRANT SELECT ON ledger_migrations TO {r}",
    "GRANT USAGE ON ALL SEQUENCES IN SCHEMA {s} TO {r}",
)
READER_RIGHTS = ("GRANT USAGE ON SCHEMA {s} TO {r}", "GRANT SELECT ON ALL TABLES IN SCHEMA {s} TO {r}")


def test_an_executor_role_without_create_appends_to_a_migrated_ledger(
    pg_dsn: Callable[[], str], role: Callable[..., str]
) -> None:
    dsn = pg_dsn()
    open_ledger(dsn, executor_id="exe-owner").close()  # the owner's first start migrates
    executor = role(dsn, *EXECUTOR_RIGHTS)
    ledger = open_ledger(executor, executor_id="exe-1")  # a chain of its own, started by it
    ledger.intent("s1", "a1", "k1", "agent", 1, PARAMS)
    ledger.result("s1", "a1", "k1", "agent", 1, "DONE", "ALLOW", "OBSERVED", True)
    ledger.close()
    again = open_ledger(executor, executor_id="exe-1")  # a restart: recovery on the same rights
    again.close()
    reader = open_ledger(role(dsn, *READER_RIGHTS), executor_id="exe-1", read_only=True)
    report = reader.verify()
    assert report.ok and report.count == 2, report.message
    reader.close()


def test_a_role_that_may_not_create_is_told_so_on_an_empty_schema(
    pg_dsn: Callable[[], str], role: Callable[..., str]
) -> None:
    dsn = pg_dsn()
    weak = role(dsn, "GRANT USAGE ON SCHEMA {s} TO {r}")
    with pytest.raises(LedgerError) as refused:
        open_ledger(weak, executor_id="exe-1")
    message = str(refused.value)
    assert "\n" not in message and "permission denied" in message, message
