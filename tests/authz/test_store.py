"""The SQLite store: file settings, migrations, lease compare-and-set under threads."""

from __future__ import annotations

import threading
from pathlib import Path

from handrail.authz import LeaseConflictError, Store
from handrail.authz._core import lease_acquire


def test_file_settings_and_migrations(tmp_path: Path) -> None:
    with Store.in_dir(tmp_path) as store:
        conn = store._conn()
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
        assert [r[0] for r in conn.execute("SELECT version FROM migrations")] == [1]
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


def test_closed_store_refuses_new_connections(tmp_path: Path) -> None:
    store = Store.in_dir(tmp_path)
    store.close()
    failures: list[Exception] = []

    def use() -> None:  # a new thread needs a new connection
        try:
            store.get_lease("t")
        except RuntimeError as exc:
            failures.append(exc)

    t = threading.Thread(target=use)
    t.start()
    t.join()
    assert len(failures) == 1
