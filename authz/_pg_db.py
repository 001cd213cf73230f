"""One PostgreSQL database: its connection pool, its clock, the errors it raises, and the
recorded migrations of the sidecar's schema.

Every part of :class:`~handrail.authz.PgStore` shares one :class:`PgDatabase`. Connections
come from a ``psycopg_pool`` pool (the last one returned is handed out first) and run in
autocommit: a state change is one statement (a lease compare-and-set, a conditional
``UPDATE``) or one explicit transaction. Several sidecar replicas share the database;
nothing here caches rows.

**The clock.** Expiry is judged by the database server's clock, inside the statement that
acts on it: every statement that needs "now" takes :data:`NOW`, an SQL expression that is
the server's ``clock_timestamp()`` in unix ms, or the test clock when the store was given
one (the contract tests move time by hand on both stores).

**Errors.** :meth:`PgDatabase.run` is the edge for psycopg's errors: a lost connection, a
server that is down or a pool that has no connection in time become
:class:`StoreUnavailableError` (UNAVAILABLE on the wire, so a client fails over or fails
closed). A call marked idempotent is tried again on another connection first (a connection
the server ended while it sat in the pool fails on first use), up to once per connection the
pool may hold plus one (every pooled one may have been ended), while the call is younger
than :data:`~handrail._dsn.RETRY_WITHIN_S`. A statement the server
refuses or cannot run (a privilege revoked, a table renamed away, a read-only session) is
:class:`StoreUnavailableError` too, logged in one line: an integrity or data error, which
callers handle, stays psycopg's.

**The caller's deadline** (:mod:`._deadline`) bounds :meth:`PgDatabase.run`: a wait for a
pooled connection ends a margin before it (:class:`StoreBusyError`, UNAVAILABLE, naming the
database, not the pool's 5 s later), no statement starts once it has passed
(:class:`DeadlineExceededError`), and a state change's transaction runs under a
``statement_timeout`` that ends at it (:meth:`PgDatabase.bound`).

**The check path's statements** (:class:`Statement`) go through libpq's prepared-statement
calls directly, not psycopg's cursor, and :meth:`PgDatabase.run` takes its connection from
the pool without the pool's context manager: a check on a remembered snapshot took 410 us
of this process's CPU in a warm loop through the cursor and 225 us this way (the query's
conversion, each parameter's adaptation, the cursor and its waiting generator cost more
CPU than the rest of the check).
"""

from __future__ import annotations

import logging
import re
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, NamedTuple, TypeVar, cast

import psycopg
import psycopg_pool
from psycopg import pq
from psycopg.adapt import Transformer
from psycopg.conninfo import conninfo_to_dict

from handrail._dsn import RETRY_WITHIN_S, connect_options, first_line, redact, why_no_connection
from handrail.authz import _deadline as deadline
from handrail.authz import _pg_session as session
from handrail.authz._errors import DeadlineExceededError, StoreBusyError, StoreUnavailableError
from handrail.authz._pg_pool import LastInFirstOut
from handrail.authz._pg_wait import Waiter, spin_us_from_env

log = logging.getLogger("handrail.authz.pg")

_T = TypeVar("_T")

#: The store's clock in SQL: the test clock's value when one is given (the ``now``
#: parameter), else the database server's clock in unix ms.
NOW = "coalesce(%(now)s::bigint, (extract(epoch from clock_timestamp()) * 1000)::bigint)"


def describe(dsn: str) -> str:
    """The DSN without its password, for messages and logs."""
    try:
        parts = conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        return "postgresql://?"
    host = parts.get("host", "localhost")
    port = parts.get("port", "5432")
    user = f"{parts['user']}@" if parts.get("user") else ""
    return redact(f"postgresql://{user}{host}:{port}/{parts.get('dbname', '')}", dsn)  # a password cut into the host


class Statement:
    """One statement run through libpq's ``PQprepare`` (once per connection) and
    ``PQexecPrepared``: see :meth:`PgDatabase.execute`.

    Its SQL takes named parameters as psycopg's does (``%(name)s``; ``%%`` is ``%``). They
    are sent as text, untyped, so the server infers each one's type from where it stands;
    cast it in the SQL (``%(now)s::bigint``) where it cannot.

    Args:
        name: the prepared statement's name on each connection (unique in the process).
        sql: the statement.

    Attributes:
        name, sql: as libpq takes them (bytes, ``$1``... for the parameters).
        params: the parameters' names, in the order of their numbers.
    """

    def __init__(self, name: str, sql: str) -> None:
        params: list[str] = []

        def number(match: re.Match[str]) -> str:
            if match.group(0) == "%%":
                return "%"
            param = match.group(1)
            if param is None:
                raise ValueError(f"statement {name!r}: only named parameters, not {match.group(0)!r}")
            if param not in params:
                params.append(param)
            return f"${params.index(param) + 1}"

        self.name = name.encode()
        self.sql = re.sub(r"%%|%\((\w+)\)s|%[a-z]", number, sql).encode()
        self.params = tuple(params)

    def args(self, values: Mapping[str, object]) -> list[bytes | None]:
        """The parameters as text (None, bool, int or str; a missing one is a KeyError)."""
        return [_text(values[p]) for p in self.params]


def _text(value: object) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, str):
        if "\0" in value:  # libpq would end the text at it: refused, as psycopg's cursor does
            raise psycopg.DataError("PostgreSQL text fields cannot contain NUL (0x00) bytes")
        return value.encode()
    if isinstance(value, bool):
        return b"t" if value else b"f"
    if isinstance(value, int):
        return str(value).encode()
    raise TypeError(f"a statement parameter is None, bool, int or str, not {type(value).__name__}")


_DONE = (pq.ExecStatus.TUPLES_OK, pq.ExecStatus.COMMAND_OK)


def _outcome(conn: psycopg.Connection[Any], result: pq.abc.PGresult) -> pq.abc.PGresult:
    """``result``, or the error it is, as psycopg's cursor raises it: a connection that
    broke is :class:`psycopg.OperationalError`; an error of the statement, its class."""
    if result.status in _DONE:
        return result
    if conn.pgconn.status != pq.ConnStatus.OK:
        raise psycopg.OperationalError(result.get_error_message() or "the connection was lost")
    raise psycopg.errors.error_from_result(result, encoding=conn.info.encoding)


#: How long a reading of the server's clock stands for it in :meth:`PgDatabase.clock_bound_ms`, in s.
CLOCK_REUSE_S = 1.0


class Migration(NamedTuple):
    """One step of the PostgreSQL schema: a version, a name, and its SQL (one script)."""

    version: int
    name: str
    sql: str


class PgDatabase:
    """The pool of one PostgreSQL database and the store's clock.

    Args:
        dsn: a libpq connection string or ``postgresql://`` URL.
        clock: the test clock (unix ms); None (the default) means the server's clock.
        min_size, max_size: the pool's bounds.
        connect_timeout_s: how long a new connection may take.
        synchronous_commit: the setting for this pool's sessions (``"off"`` for a pool
            whose commits may lag a moment behind the call).

    Attributes:
        dsn: the DSN.
        schema: the schema the tables live in (the first of the ``search_path``).
    """

    def __init__(
        self,
        dsn: str,
        clock: Callable[[], int] | None = None,
        *,
        min_size: int = 2,
        max_size: int = 16,
        connect_timeout_s: float = 5.0,
        synchronous_commit: str = "on",
        name: str = "handrail-authz",
        spin_us: int | None = None,
    ) -> None:
        self.dsn = dsn
        self._waiter = Waiter(spin_us_from_env() if spin_us is None else spin_us)
        self._clock = clock
        self._closed = False
        self._check_lock = threading.Lock()
        self._clock_read: tuple[int, float] | None = None  # (now_ms, time.monotonic() when asked)
        # The statements prepared on each pooled connection (it is used by one thread at a time).
        self._prepared: weakref.WeakKeyDictionary[psycopg.Connection[Any], set[bytes]] = weakref.WeakKeyDictionary()

        def configure(conn: psycopg.Connection[Any]) -> None:
            session.configure(conn, synchronous_commit)

        self.pool: psycopg_pool.ConnectionPool[psycopg.Connection[Any]] = LastInFirstOut(
            dsn,
            kwargs={
                "autocommit": True,
                "connect_timeout": max(1, int(connect_timeout_s)),
                "fallback_application_name": session.APPLICATION_NAME,
                **connect_options(dsn),
            },
            min_size=min_size,
            max_size=max_size,
            configure=configure,
            open=False,
            timeout=connect_timeout_s,
            reconnect_timeout=0,  # keep trying to refill for as long as the process lives
            name=name,
        )
        why = why_no_connection(dsn, connect_timeout_s, describe(dsn))
        if why:
            raise StoreUnavailableError(why)
        try:
            self.pool.open(wait=True, timeout=connect_timeout_s)
        except psycopg_pool.PoolTimeout:
            self.pool.close()
            raise StoreUnavailableError(f"cannot connect to {describe(dsn)} within {connect_timeout_s:g} s") from None
        self.schema = str(self.run(lambda c: c.execute("SELECT current_schema()").fetchone()[0]))  # type: ignore[index]

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    def now(self) -> int | None:
        """The value of the ``now`` parameter of :data:`NOW` (None: the server's clock)."""
        return self._clock() if self._clock is not None else None

    def now_ms(self) -> int:
        """The store's clock, in unix ms (a round trip, unless a test clock is set)."""
        if self._clock is not None:
            return self._clock()
        sent = time.monotonic()
        row = self.run(lambda c: c.execute(f"SELECT {NOW}", {"now": None}).fetchone(), idempotent=True)
        assert row is not None
        self._clock_read = (int(row[0]), sent)
        return int(row[0])

    def clock_bound_ms(self) -> int | None:
        """A time the server's clock has not reached yet: the last :meth:`now_ms` read
        moved on by this host's monotonic clock since that read was sent (an upper bound,
        however long its round trip took). None with a test clock, or when that read is
        older than :data:`CLOCK_REUSE_S` (the server's clock may have been stepped since)."""
        read = self._clock_read
        if self._clock is not None or read is None:
            return None
        elapsed = time.monotonic() - read[1]
        if elapsed > CLOCK_REUSE_S:
            return None
        return read[0] + int(elapsed * 1000) + 1

    def run(
        self,
        work: Callable[[psycopg.Connection[Any]], _T],
        *,
        idempotent: bool = False,
        what: str = "a statement",
        refusals: bool = True,
    ) -> _T:
        """Run ``work`` on a pooled connection (autocommit); map psycopg's connection errors,
        and the server's refusals of a statement.

        Args:
            work: what to do with the connection.
            idempotent: doing it twice is the same as once: after a connection error it is
                tried again on another connection (the failed one is thrown away), up to
                once per connection the pool may hold plus one, while the call is younger
                than :data:`~handrail._dsn.RETRY_WITHIN_S`.
            what: what ``work`` runs, for the message of a refusal.
            refusals: map the server's refusals (False: raise them as psycopg's, for a
                caller that words them itself).

        Under a call's deadline (:mod:`._deadline`) the wait for a connection ends a margin
        before it, and ``work`` is not started once it has passed.

        Raises:
            StoreBusyError: no connection came free within the pool's timeout or, sooner,
                what the caller's deadline left (its message names the database).
            DeadlineExceededError: the caller's deadline passed before ``work`` could
                start, or while a statement :meth:`bound` had bounded ran (rolled back).
            StoreUnavailableError: the database cannot be reached (or the pool is closed),
                or it refuses the statement: a privilege revoked, a table, column or
                function missing, a read-only session (logged at WARNING in one line). An
                integrity or data error (``UniqueViolation``, a bad value), which callers
                handle, and an error psycopg raises itself are raised as they are.
        """
        attempts = self.pool.max_size + 1 if idempotent else 1
        began = time.monotonic()
        for attempt in range(attempts):
            # no longer than the caller waits (and not at all once it has given up)
            wait, by_deadline = deadline.wait_s(self.pool.timeout, what)
            try:
                # getconn/putconn, not pool.connection(): half the CPU, and on a connection in
                # autocommit the "with conn" that adds has nothing to commit or roll back (an
                # explicit transaction is the work's own, and a connection put back in one is
                # rolled back by the pool)
                conn = self.pool.getconn(wait)
                try:
                    deadline.start(what)  # it may have passed while waiting
                    return work(conn)
                finally:
                    self.pool.putconn(conn)
            except psycopg_pool.PoolClosed:  # (these two are OperationalErrors too: first)
                raise StoreUnavailableError("the store is closed") from None
            except psycopg_pool.PoolTimeout:  # every connection busy: not tried again
                raise self._busy(wait, by_deadline) from None
            except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
                if isinstance(exc, psycopg.errors.QueryCanceled) and deadline.passed(_SLACK_S):  # by bound()
                    raise DeadlineExceededError(
                        f"the caller's deadline passed while {what} ran: cancelled, nothing of it committed"
                    ) from None
                if attempt + 1 < attempts and not self._closed and time.monotonic() - began < RETRY_WITHIN_S:
                    self._check()
                    continue
                raise StoreUnavailableError(f"the store's database is unavailable: {first_line(exc)}") from None
            except psycopg.DatabaseError as exc:
                if not refusals or not _refusal(exc):
                    raise
                problem = first_line(exc, self.dsn)
                log.warning("authz: the store's database refused %s: %s", what, problem)
                refused = StoreUnavailableError(f"the store's database refused {what}: {problem}")
                refused.logged = True
                raise refused from None
        raise AssertionError("unreachable")

    def _busy(self, wait: float, by_deadline: bool) -> StoreBusyError:
        """The error of a wait for a connection that timed out after ``wait`` seconds."""
        stats = self.pool.get_stats()
        size, idle = stats.get("pool_size", 0), stats.get("pool_available", 0)
        why = " (what the caller's deadline left, less a margin for the answer)" if by_deadline else ""
        where = describe(self.dsn)
        if size >= self.pool.max_size and not idle:
            where += f" (all {size} connections of this replica in use)"
        return StoreBusyError(f"no connection to {where} within {wait:.3g} s{why}")

    @staticmethod
    def bound(conn: psycopg.Connection[Any]) -> None:
        """Inside a transaction on ``conn``: end its statements at the caller's deadline
        (a transaction-local ``statement_timeout``, never longer than the role's own), so
        that a state change waiting on a row lock is rolled back rather than committed for
        a caller that has given up (:meth:`run` raises :class:`DeadlineExceededError`).
        One round trip, and none for a call without a deadline."""
        ms = session.bound_ms(conn)
        if ms is not None:
            conn.execute(session.BOUND, (str(ms),))

    @staticmethod
    def bounded_one(conn: psycopg.Connection[Any], sql: str, params: Mapping[str, Any]) -> tuple[Any, ...] | None:
        """The first row of one statement that changes state (``sql``, autocommit), ended
        at the caller's deadline as :meth:`bound` ends a transaction's, in ONE round trip:
        the timeout and the statement go in one pipeline with one sync, which PostgreSQL
        runs as one implicit transaction (the setting dies with it; a statement cancelled
        by it rolls the whole back). Without a deadline, the statement as it is."""
        ms = session.bound_ms(conn)
        if ms is None:
            return conn.execute(sql, params).fetchone()
        with conn.pipeline():
            conn.execute(session.BOUND, (str(ms),))
            cur = conn.execute(sql, params)
        return cur.fetchone()

    def execute(self, statement: Statement, values: Mapping[str, object], *, idempotent: bool = False) -> int:
        """Run ``statement`` with ``values`` on a pooled connection (autocommit), prepared
        there the first time; return how many rows it returned. Errors as :meth:`run`'s
        (an integrity or data error of the statement itself is psycopg's, as a cursor
        raises it)."""
        args = statement.args(values)
        return self.run(
            lambda conn: self._exec(conn, statement, args).ntuples, idempotent=idempotent, what=_named(statement)
        )

    def fetch(
        self, statement: Statement, values: Mapping[str, object], *, idempotent: bool = False
    ) -> list[tuple[Any, ...]]:
        """:meth:`execute`, returning the rows, each value loaded as a cursor loads it."""
        args = statement.args(values)

        def work(conn: psycopg.Connection[Any]) -> list[tuple[Any, ...]]:
            result = self._exec(conn, statement, args)
            loader = Transformer(conn)
            loader.set_pgresult(result)
            return loader.load_rows(0, result.ntuples, tuple)

        return self.run(work, idempotent=idempotent, what=_named(statement))

    def _exec(self, conn: psycopg.Connection[Any], statement: Statement, args: list[bytes | None]) -> pq.abc.PGresult:
        """``statement``'s result on ``conn``, prepared there first if it is not yet."""
        pgconn = conn.pgconn
        prepared = self._prepared.get(conn)
        if prepared is None:
            prepared = self._prepared[conn] = set()
        # NULLs are None, which libpq takes (psycopg's own calls pass them; its stub of
        # exec_prepared leaves them out)
        values = cast("list[bytes]", args)
        for retry in (False, True):
            if statement.name not in prepared:
                _outcome(conn, pgconn.prepare(statement.name, statement.sql))
                prepared.add(statement.name)
            try:
                return _outcome(conn, self._waiter.exec_prepared(pgconn, statement.name, values))
            except psycopg.errors.InvalidSqlStatementName:  # deallocated behind our back
                if retry:  # (DEALLOCATE, a pooler in between): prepared anew, once
                    raise
                prepared.discard(statement.name)
        raise AssertionError("unreachable")

    @contextmanager
    def transaction(self, conn: psycopg.Connection[Any]) -> Iterator[psycopg.Connection[Any]]:
        """A transaction on ``conn`` (committed when the block ends, rolled back on error)."""
        with conn.transaction():
            yield conn

    def _check(self) -> None:
        """Drop the pool's idle connections that the server has ended (one thread at a time)."""
        if self._check_lock.acquire(blocking=False):
            try:
                self.pool.check()
            except psycopg_pool.PoolClosed:
                pass
            finally:
                self._check_lock.release()

    def migrate(self, steps: tuple[Migration, ...]) -> list[int]:
        """Apply the steps not yet recorded in ``migrations``; the versions applied.

        The recorded versions are read first, with no lock and nothing created: on a
        database that has every step (the usual start of a replica) that is all, so a role
        with only its tables' rights (no ``CREATE`` on the schema) starts. Only when a step
        is missing are they applied, in one transaction under an advisory lock, after
        reading the versions again under it (replicas starting together on an empty
        database apply each step once: the first to take the lock applies them, the others
        then find them recorded).

        Raises:
            StoreUnavailableError: the database does not answer, or refuses a step (the
                role may not create in the schema, a name clashes), or records a step this
                version does not know (a newer version migrated it): one line naming it.
        """
        known = sorted(s.version for s in steps)
        applied: list[int] = []
        step = "the migrations table"

        def recorded(conn: psycopg.Connection[Any]) -> set[int]:
            # the table in the schema the store's tables are created in (not one of that
            # name further down the search_path)
            where = "to_regclass(quote_ident(current_schema()) || '.migrations')"
            row = conn.execute(f"SELECT {where} IS NOT NULL").fetchone()
            if not row or not row[0]:
                return set()
            done = {int(r[0]) for r in conn.execute("SELECT version FROM migrations")}
            newer = sorted(v for v in done if not known or v > known[-1])
            if newer:
                raise _Refused(
                    f"the store's schema at {describe(self.dsn)} is at migration {newer[-1]}, this version knows"
                    f" {_span(known)}: upgrade handrail before starting this replica"
                )
            return done

        def read(conn: psycopg.Connection[Any]) -> bool:
            return set(known) <= recorded(conn)

        def work(conn: psycopg.Connection[Any]) -> None:
            nonlocal step
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(hashtext(current_schema() || '.handrail_authz'))")
                conn.execute(
                    "CREATE TABLE IF NOT EXISTS migrations ("
                    " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at_ms BIGINT NOT NULL)"
                )
                done = recorded(conn)
                for version, name, sql in steps:
                    if version in done:
                        continue
                    step = f"migration {version} ({name})"
                    try:
                        conn.execute(sql.encode())  # a script: several statements, no parameters
                    except _EXISTS as exc:
                        if not done:
                            raise  # an empty or new table: a name clashes with another's
                        raise _Refused(
                            f"{describe(self.dsn)}: {step} is not recorded but its objects exist"
                            f" ({first_line(exc)}): the migrations table was edited"
                        ) from None
                    conn.execute(
                        f"INSERT INTO migrations (version, name, applied_at_ms) VALUES (%(v)s, %(n)s, {NOW})",
                        {"v": version, "n": name, "now": self.now()},
                    )
                    applied.append(version)

        try:
            if self.run(read, refusals=False):
                return []
            self.run(work, refusals=False)
        except _Refused as exc:
            raise StoreUnavailableError(str(exc)) from None
        except psycopg.Error as exc:  # refused by the database (a lost connection is run's)
            raise StoreUnavailableError(
                f"{describe(self.dsn)} refused {step}: {first_line(exc)} (the role must be able to"
                " create tables, functions and triggers in the schema, or own them)"
            ) from None
        return applied

    def applied(self) -> list[int]:
        """The versions the database records as applied, in order."""
        rows = self.run(lambda c: c.execute("SELECT version FROM migrations ORDER BY version").fetchall())
        return [int(r[0]) for r in rows]

    def close(self) -> None:
        """Close the pool (waits for connections in use to come back)."""
        self._closed = True
        self.pool.close(timeout=5.0)


class _Refused(Exception):
    """:meth:`PgDatabase.migrate` refuses to go on (its message is the whole line)."""


#: A migration's objects that exist already.
_EXISTS = (
    psycopg.errors.DuplicateTable,
    psycopg.errors.DuplicateColumn,
    psycopg.errors.DuplicateFunction,
    psycopg.errors.DuplicateObject,
)


def _span(versions: list[int]) -> str:
    if not versions:
        return "none"
    return str(versions[0]) if len(versions) == 1 else f"{versions[0]}-{versions[-1]}"


def _refusal(exc: psycopg.DatabaseError) -> bool:
    """Whether ``exc`` is the server refusing or unable to run a statement (a privilege, a
    missing object, a read-only session...): an error the server sent (it has a SQLSTATE)
    that is not an integrity or data error, which callers catch (``UniqueViolation``)."""
    return exc.sqlstate is not None and not isinstance(exc, (psycopg.IntegrityError, psycopg.DataError))


#: How near the deadline a cancelled statement counts as cancelled by it (``bound`` rounds).
_SLACK_S = 0.005


def _named(statement: Statement) -> str:
    return f"statement {statement.name.decode()}"
