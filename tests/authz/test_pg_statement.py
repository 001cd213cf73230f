"""The check path's statements on PostgreSQL (:class:`~handrail.authz._pg_db.Statement`), run
through libpq's prepared-statement calls: parameters stay data whatever they hold, errors are
psycopg's as a cursor raises them, a lost connection is retried or UNAVAILABLE, and a
statement deallocated behind the store's back is prepared anew.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator

import psycopg
import pytest

from handrail.authz._errors import StoreUnavailableError
from handrail.authz._pg import PgStore
from handrail.authz._pg_db import PgDatabase, Statement
from handrail.scenarios._postgres import pg_url, terminate
from tests.recorder.test_pg_append import cut_after_the_pools_check

INSERT = Statement(
    "test_insert_note",
    "INSERT INTO notes (id, body, n, flag) VALUES (%(id)s, %(body)s, %(n)s, %(flag)s) RETURNING id",
)
HOSTILE = [
    "'); DROP TABLE notes; --",
    "%(id)s $1 %s %% \\x00 \\\\",
    "naïve — 漢字 🙂",
    "line\nbreak\ttab",
    "",
]


def test_named_parameters_are_numbered_in_order_and_shared() -> None:
    s = Statement("t", "SELECT %(a)s, %(b)s, %(a)s::bigint WHERE x LIKE 'a%%'")
    assert s.sql == b"SELECT $1, $2, $1::bigint WHERE x LIKE 'a%'"
    assert s.params == ("a", "b")
    assert s.args({"a": 7, "b": None, "unused": "x"}) == [b"7", None]
    assert Statement("t", "SELECT 1").args({}) == []


@pytest.mark.parametrize("sql", ["SELECT %s", "SELECT %(a)s, %d"])
def test_a_positional_parameter_is_refused_with_the_statement_named(sql: str) -> None:
    with pytest.raises(ValueError, match="statement 'odd': only named parameters"):
        Statement("odd", sql)


def test_parameters_are_text_of_none_bool_int_or_str_only() -> None:
    s = Statement("t", "SELECT %(v)s")
    assert [s.args({"v": v})[0] for v in (None, True, False, 0, -12, 2**62, "é")] == [
        None,
        b"t",
        b"f",
        b"0",
        b"-12",
        str(2**62).encode(),
        "é".encode(),
    ]
    with pytest.raises(TypeError, match="not float"):
        s.args({"v": 1.5})
    with pytest.raises(KeyError):
        s.args({})


def test_a_text_parameter_holding_nul_is_refused_not_cut_short() -> None:
    """libpq ends a text parameter at its first NUL: "agent-1\\0evil" would be sent as
    "agent-1". Refused as psycopg's own cursor refuses it."""
    s = Statement("t", "SELECT %(v)s")
    for value in ("agent-1\0evil", "\0", "x\0"):
        with pytest.raises(psycopg.DataError, match="cannot contain NUL"):
            s.args({"v": value})


# --- against the session's PostgreSQL ------------------------------------------------------------


@pytest.fixture
def db(pg_dsn: Callable[[], str]) -> Iterator[PgDatabase]:
    database = PgDatabase(pg_dsn(), min_size=1, max_size=1)  # one connection: the tests reach it
    database.run(lambda c: c.execute("CREATE TABLE notes (id TEXT PRIMARY KEY, body TEXT, n BIGINT, flag BOOLEAN)"))
    try:
        yield database
    finally:
        database.close()


def _rows(db: PgDatabase) -> list[tuple[object, ...]]:
    return db.run(lambda c: c.execute("SELECT id, body, n, flag FROM notes ORDER BY n").fetchall())


@pytest.mark.slow
def test_parameters_stay_data_whatever_they_hold(db: PgDatabase) -> None:
    for i, body in enumerate(HOSTILE):
        assert db.execute(INSERT, {"id": f"note-{i}", "body": body, "n": 2**62 + i, "flag": i % 2 == 0}) == 1
    assert db.execute(INSERT, {"id": "null", "body": None, "n": -1, "flag": None}) == 1
    assert _rows(db) == [
        ("null", None, -1, None),
        *((f"note-{i}", body, 2**62 + i, i % 2 == 0) for i, body in enumerate(HOSTILE)),
    ]


@pytest.mark.slow
def test_a_name_with_nul_never_reads_the_principal_before_it(pg_dsn: Callable[[], str]) -> None:
    """The store's one-statement reads go through :class:`Statement`: the name a NUL ends
    early must not be the one looked up."""
    with PgStore(pg_dsn(), pool_size=1) as store:
        store.add_principal("nul-agent", "agent")
        assert store.principal_now("nul-agent")[0] is not None
        for read in (store.principal_now, store.principal):
            with pytest.raises(psycopg.DataError, match="cannot contain NUL"):
                read("nul-agent\0evil")


@pytest.mark.slow
def test_an_integrity_or_data_error_is_psycopgs_own_a_refusal_is_unavailable(db: PgDatabase) -> None:
    db.execute(INSERT, {"id": "a", "body": "x", "n": 1, "flag": True})
    with pytest.raises(psycopg.errors.UniqueViolation):
        db.execute(INSERT, {"id": "a", "body": "y", "n": 2, "flag": True})
    with pytest.raises(psycopg.errors.InvalidTextRepresentation):
        db.execute(INSERT, {"id": "b", "body": "x", "n": "twelve", "flag": True})
    with pytest.raises(StoreUnavailableError, match=r"refused statement test_missing: relation .* does not exist"):
        db.execute(Statement("test_missing", "SELECT * FROM no_such_table WHERE id = %(id)s::text"), {"id": "a"})
    # the connection is still good, and the statement still prepared on it
    assert db.execute(INSERT, {"id": "c", "body": "x", "n": 3, "flag": False}) == 1
    assert [r[0] for r in _rows(db)] == ["a", "c"]


@pytest.mark.slow
def test_a_statement_deallocated_behind_the_stores_back_is_prepared_anew(db: PgDatabase) -> None:
    db.execute(INSERT, {"id": "a", "body": "x", "n": 1, "flag": True})
    db.run(lambda c: c.execute("DEALLOCATE ALL"))  # as a pooler in between might
    assert db.execute(INSERT, {"id": "b", "body": "x", "n": 2, "flag": True}) == 1
    assert [r[0] for r in _rows(db)] == ["a", "b"]


@pytest.mark.slow
def test_a_lost_connection_is_retried_when_idempotent_else_unavailable(
    db: PgDatabase, pg_dsn: Callable[[], str]
) -> None:
    upsert = Statement(
        "test_upsert_note",
        "INSERT INTO notes (id, body, n, flag) VALUES (%(id)s, %(body)s, %(n)s, %(flag)s)"
        " ON CONFLICT (id) DO UPDATE SET body = EXCLUDED.body",
    )

    def kill_the_connection() -> None:
        pid = db.run(lambda c: c.info.backend_pid)
        with psycopg.connect(pg_dsn(), autocommit=True) as other:
            terminate(other, "pid = %s", (pid,))

    db.execute(upsert, {"id": "a", "body": "first", "n": 1, "flag": True})
    kill_the_connection()
    db.execute(upsert, {"id": "a", "body": "second", "n": 1, "flag": True}, idempotent=True)
    assert _rows(db) == [("a", "second", 1, True)]
    kill_the_connection()
    with pytest.raises(StoreUnavailableError, match="the store's database is unavailable"):
        db.execute(upsert, {"id": "a", "body": "third", "n": 1, "flag": True})
    assert _rows(db) == [("a", "second", 1, True)]


@pytest.mark.slow
def test_a_cut_that_lands_after_the_pools_check_is_retried_again(
    pg_dsn: Callable[[], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``pg_terminate_backend`` only signals, so a backend may go after the pool's check
    passed its connection: the retry's connection is dead too. Before: one retry, then
    UNAVAILABLE though the database was up."""
    dsn = pg_dsn()
    db = PgDatabase(pg_url(dsn, application_name="handrail-authz-under-test"), min_size=2, max_size=2)
    cut = "application_name = 'handrail-authz-under-test'"
    try:
        db.pool.wait(10)
        with psycopg.connect(dsn, autocommit=True) as admin:
            assert terminate(admin, cut) == 2
        late = cut_after_the_pools_check(monkeypatch, dsn, cut)  # (the store's pool is a ConnectionPool)
        assert db.run(lambda c: c.execute("SELECT 41 + 1").fetchone(), idempotent=True) == (42,)
        assert late and late[0] >= 1
    finally:
        monkeypatch.undo()
        db.close()


@pytest.mark.slow
def test_fetched_rows_are_what_a_cursor_reads(db: PgDatabase) -> None:
    for i, body in enumerate(HOSTILE):
        db.execute(INSERT, {"id": f"note-{i}", "body": body, "n": -(2**62) + i, "flag": i % 2 == 0})
    db.execute(INSERT, {"id": "null", "body": None, "n": 0, "flag": None})
    sql = "SELECT id, body, n, flag, n::text, xmin::text, %(tag)s::text, %(n)s::bigint FROM notes WHERE n <= %(n)s"
    values = {"tag": "it's %(n)s", "n": 0}
    fetched = db.fetch(Statement("test_fetch_notes", sql + " ORDER BY notes.n"), values)
    read = db.run(lambda c: c.execute(sql + " ORDER BY notes.n", values).fetchall())
    assert len(fetched) == len(HOSTILE) + 1
    assert fetched == read
    assert [[type(v) for v in row] for row in fetched] == [[type(v) for v in row] for row in read]
    assert db.fetch(Statement("test_fetch_none", "SELECT 1 WHERE false"), {}) == []


# --- the pool's lean path (getconn and putconn in the common case) --------------------------------


@pytest.mark.slow
def test_the_pool_gives_back_the_connection_put_back_last(pg_dsn: Callable[[], str]) -> None:
    database = PgDatabase(pg_dsn(), min_size=2, max_size=2)
    try:
        pool = database.pool
        first, second = pool.getconn(), pool.getconn()
        pool.putconn(first)
        pool.putconn(second)
        assert pool.getconn() is second  # last in, first out
        assert pool.getconn() is first
    finally:
        pool.putconn(first)
        pool.putconn(second)
        database.close()


@pytest.mark.slow
def test_a_connection_given_back_mid_transaction_is_never_handed_out_so(db: PgDatabase) -> None:
    """The lean path takes back only an idle connection; one in a transaction (or in a
    failed one) goes through psycopg_pool, which rolls it back."""
    pool = db.pool
    for spoil in ("INSERT INTO notes (id) VALUES ('left-open')", "SELECT 1/0"):
        conn = pool.getconn()
        conn.execute("BEGIN")
        with contextlib.suppress(psycopg.Error):
            conn.execute(spoil)
        pool.putconn(conn)
        again = pool.getconn()
        try:
            assert again.pgconn.transaction_status == psycopg.pq.TransactionStatus.IDLE
        finally:
            pool.putconn(again)
    assert _rows(db) == []  # the open transaction was rolled back, not committed


@pytest.mark.slow
def test_a_broken_connection_given_back_is_replaced_not_reused(db: PgDatabase, pg_dsn: Callable[[], str]) -> None:
    pool = db.pool
    conn = pool.getconn()
    pid = conn.info.backend_pid
    conn.close()
    pool.putconn(conn)
    assert db.run(lambda c: c.info.backend_pid, idempotent=True) != pid
    assert db.run(lambda c: c.execute("SELECT 1").fetchone()) == (1,)


@pytest.mark.slow
def test_a_waiting_caller_gets_the_connection_given_back(db: PgDatabase) -> None:
    """With the only connection out, a second caller waits; giving it back hands it to that
    caller at once (not after the pool's timeout), and a closed pool refuses plainly."""
    pool = db.pool
    held = pool.getconn()
    got: list[float] = []  # when the waiter got its connection

    def wait() -> None:
        conn = pool.getconn(timeout=10)
        got.append(time.monotonic())
        pool.putconn(conn)

    waiter = threading.Thread(target=wait)
    waiter.start()
    deadline = time.monotonic() + 10
    while not pool.get_stats().get("requests_queued") and time.monotonic() < deadline:
        time.sleep(0.01)  # until the waiter is queued
    assert pool.get_stats().get("requests_queued") == 1
    given_back = time.monotonic()
    pool.putconn(held)
    waiter.join(10)
    assert got and 0 <= got[0] - given_back < 5  # on the give-back, not the pool's timeout
    db.close()
    with pytest.raises(StoreUnavailableError, match=r"^the store is closed$"):
        db.run(lambda c: c.execute("SELECT 1"))


@pytest.mark.slow
def test_a_busy_pool_is_unavailable_once_not_waited_for_twice(pg_dsn: Callable[[], str]) -> None:
    """Every connection in use past the pool's timeout: UNAVAILABLE saying so, after one
    wait (psycopg_pool's PoolTimeout is an OperationalError too; it used to be taken for a
    lost connection and an idempotent call waited again)."""
    database = PgDatabase(pg_dsn(), min_size=1, max_size=1, connect_timeout_s=1.0)
    held = database.pool.getconn()
    try:
        t0 = time.monotonic()
        with pytest.raises(StoreUnavailableError, match=r"^no connection to postgresql://.* within 1 s$"):
            database.run(lambda c: c.execute("SELECT 1"), idempotent=True)
        assert time.monotonic() - t0 < 1.9
    finally:
        database.pool.putconn(held)
        database.close()
