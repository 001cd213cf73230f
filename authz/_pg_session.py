"""What each pooled PostgreSQL session of the store is set up with, and how a state change
is ended at its caller's deadline (:meth:`~._pg_db.PgDatabase.bound`, ``bounded_one``).

**A session left in a transaction.** A replica stopped mid-transaction (``SIGSTOP``, a
host that froze, a GC pause without end) keeps its row locks: another replica's renewal of
that lease, or use of that approval, waits behind it for as long as it is stopped. So each
session ends itself after :data:`IDLE_IN_TRANSACTION_MS` idle inside a transaction (the
server closes it and rolls it back; the replica, when it resumes, gets a lost connection:
UNAVAILABLE, and a fresh connection next time), unless the role, the database or the
server already set a limit (``docs/deploy.md`` recommends ``10s`` there; a shorter one
wins). No store transaction waits on anything but the database, so none idles that long
unless its process has stopped.
"""

from __future__ import annotations

import weakref
from typing import Any

import psycopg

from handrail.authz import _deadline as deadline

#: How long a session of the store may sit idle inside a transaction, in ms.
IDLE_IN_TRANSACTION_MS = 5000

#: The name the store's sessions show in ``pg_stat_activity`` unless the DSN (or
#: ``PGAPPNAME``) gives one: libpq's ``fallback_application_name``, so an operator's own
#: ``application_name`` (one per replica, say) is kept.
APPLICATION_NAME = "handrail-authz"

#: Set on each new session (after its ``synchronous_commit``): the idle-in-transaction
#: limit where none is set.
SETTINGS = (
    f"SELECT set_config('idle_in_transaction_session_timeout', '{IDLE_IN_TRANSACTION_MS}', false)"
    " WHERE current_setting('idle_in_transaction_session_timeout') = '0'"
)

#: Set this transaction's statement_timeout (ms, as text).
BOUND = "SELECT set_config('statement_timeout', %s, true)"

#: The statement_timeout each session started with (the role's, the database's or the
#: server's; ms, 0 = none), read when it is set up: only a ``SET`` in the session could
#: change it, and the store runs none. (``pg_settings`` materializes every setting:
#: ~0.5 ms a read, kept off the calls.)
_SESSION_TIMEOUT_MS: weakref.WeakKeyDictionary[psycopg.Connection[Any], int] = weakref.WeakKeyDictionary()


def configure(conn: psycopg.Connection[Any], synchronous_commit: str) -> None:
    """Set up a new session of the store's pool: its ``synchronous_commit``,
    :data:`SETTINGS`, and what :func:`bound_ms` needs of it."""
    conn.execute(f"SET synchronous_commit = {synchronous_commit}; {SETTINGS}")
    row = conn.execute("SELECT setting::bigint FROM pg_settings WHERE name = 'statement_timeout'").fetchone()
    _SESSION_TIMEOUT_MS[conn] = int(row[0]) if row else 0


def bound_ms(conn: psycopg.Connection[Any]) -> int | None:
    """The statement_timeout that ends at this call's deadline, never longer than the
    session's own (a session :func:`configure` did not set up counts as having none);
    None without a deadline."""
    ms = deadline.left_ms()
    if ms is None:
        return None
    own = _SESSION_TIMEOUT_MS.get(conn, 0)
    return min(ms, own) if own else ms
