"""The SQLite store: file settings, migrations, lease compare-and-set under threads."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from handrail.authz import LeaseConflictError, Store
from handrail.authz._core import lease_acquire


def test_file_settings_and_migrations(tmp_path: Path) -> None:
    with Store.in_dir(tmp_path) as store:
        conn = store.db.reader()
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
        assert [r[0] for r in conn.execute("SELECT version FROM migrations")] == [1, 2, 3, 4, 5]
    with Store.in_dir(tmp_path) as again:
        assert again.migrate() == []


def test_concurrent_acquires_have_one_winner(tmp_path: Path) -> None:
    with Store.in_dir(tmp_path) as store:
        winners: list[str] = []
        errors: list[Exception] = []

        def grab(name: str) -> None:
            try:
                store.change_lease("t", lambda cur, now: lease_acquire(cur, name, 0, now))
                winners.append(name)
            except LeaseConflictError as exc:
                errors.append(exc)

        threads = [threading.Thread(target=grab, args=(f"agent-{i}",)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(winners) == 1 and len(errors) == 7
        lease = store.get_lease("t")
        assert lease.holder == winners[0] and lease.epoch == 1


def test_a_store_closed_twice_closes_no_file_it_does_not_own(tmp_path: Path) -> None:
    """``AuthzServer.stop(grace)`` closes its store in a thread, and its caller may close it
    too: the second close used to close the principals stamp's descriptor number again,
    which by then another file held (a subprocess's pipe, in CI: ``Bad file descriptor``)."""
    store = Store.in_dir(tmp_path)
    store.close()
    other = [os.open(tmp_path / f"other-{i}", os.O_RDWR | os.O_CREAT) for i in range(8)]  # take the freed numbers
    try:
        store.close()
        for fd in other:
            os.fstat(fd)  # still open: raises OSError (EBADF) if the close took it
    finally:
        for fd in other:
            os.close(fd)


def test_closed_store_refuses_new_connections(tmp_path: Path) -> None:
    store = Store.in_dir(tmp_path)
    store.close()
    failures: list[Exception] = []

    def use() -> None:  # a new thread needs a new connection
        try:
            store.list_grants()
        except RuntimeError as exc:
            failures.append(exc)

    t = threading.Thread(target=use)
    t.start()
    t.join()
    assert len(failures) == 1


def test_migration_from_the_first_schema_keeps_the_decision_log(tmp_path: Path) -> None:
    import sqlite3

    from handrail.authz._sqlite_migrations import MIGRATIONS as _MIGRATIONS

    path = tmp_path / "authz.sqlite"
    with sqlite3.connect(path) as conn:
        conn.executescript(_MIGRATIONS[0][2])
        conn.execute(
            "CREATE TABLE migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at_ms INTEGER NOT NULL)"
        )
        conn.execute("INSERT INTO migrations VALUES (1, 'initial', 0)")
        conn.execute(
            "INSERT INTO decisions VALUES ('old-id', 5, 'exe', 'agent-a', 't', 1, 'submit', 'http://x/', 'button',"
            " 'Save', '', '', 0, 'act', 0, 'POLICY_FORBID', 'no', '[\"p\"]', 'g', 1)"
        )
        conn.execute("INSERT INTO grants VALUES ('g', 'agent-a', 't', '[\"submit\"]', '[]', 0, 'op', '', 1, NULL)")
    conn.close()
    with Store(path) as store:
        record = store.get_decision("old-id")
        assert record.decision.reason == "POLICY_FORBID" and record.decision.policies == ("p",)
        assert record.caller == "exe" and record.request.element_name == "Save"
        (grant,) = store.list_grants()
        assert grant.grant_id == "g" and grant.path_globs == () and not grant.single_use
        assert store.new_decision_id() > "000000000001"


def test_decision_journal_is_replayed_after_a_crash(tmp_path: Path) -> None:
    from handrail.authz._core import CheckInput, Decision, DecisionRecord

    store = Store.in_dir(tmp_path, journal=True)
    ids = [store.new_decision_id() for _ in range(3)]
    for i, decision_id in enumerate(ids):
        request = CheckInput("agent-a", "t", 1, "submit", element_name=f"b{i}")
        decision = Decision(True, "ALLOW", "ok", decision_id)
        store.record_decision(DecisionRecord(decision_id, i, "exe", request, decision))
    (journal,) = tmp_path.glob("*.decisions.journal")
    with journal.open("ab") as f:
        f.write(b'[999, "torn')  # a write cut short: never acknowledged
    # a crash: the store is never closed or flushed; its journal stays behind
    with Store.in_dir(tmp_path, journal=True) as again:
        assert [again.get_decision(i).request.element_name for i in ids] == ["b0", "b1", "b2"]
        assert again.count_decisions() == 3
        assert int(again.new_decision_id()[:12], 16) == 4
    assert not list(tmp_path.glob("*.decisions.journal"))


def test_the_sqlite_store_implements_the_whole_protocol() -> None:
    import inspect

    from handrail.authz import AuthzStore, SqliteStore

    methods = [n for n, v in vars(AuthzStore).items() if inspect.isfunction(v) and not n.startswith("_")]
    assert len(methods) >= 29
    for name in methods:
        ours, theirs = inspect.signature(getattr(AuthzStore, name)), inspect.signature(getattr(SqliteStore, name))
        assert ours == theirs, name


def test_the_authorizer_uses_the_store_through_the_protocol_only() -> None:
    import ast
    import inspect

    from handrail.authz import AuthzStore, _authorizer, _service

    protocol = {n for n in vars(AuthzStore) if not n.startswith("_")}
    for module in (_authorizer, _service):
        tree = ast.parse(inspect.getsource(module))
        used = {
            node.attr
            for node in ast.walk(tree)
            if isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Attribute | ast.Name)
            and (getattr(node.value, "attr", None) or getattr(node.value, "id", None)) == "store"
        }
        # serve() opens the SQLite store and starts its checkpointer: the one place that knows SQLite
        assert used - protocol <= {"in_dir", "start_checkpointer"}, module.__name__
