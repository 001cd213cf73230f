"""The authorization sidecar: scope grants, control leases, approvals, Cedar policies, decisions.

Run it with ``handrail authz serve``; talk to it with :class:`AuthzClient` or
:class:`AsyncAuthzClient`. The operator's guide is ``docs/authz.md``.

The modules, bottom up (each imports only modules above it in this list)::

    _errors            the error tree
    _deadline          the caller's deadline, carried from the servicer to the stores
    _models            the records (checks, decisions, grants, leases, approvals, events)
                       and the sidecar's own words (Role, GrantState, ApprovalStatus ...)
    _urls              URLs and origins as a browser parses them (WHATWG, ada-url)
    _core              the pure rules: validation, who may do what, lease transitions
    _decide            the decision function (lease, scope, Cedar, approvals)
    _text              text as a person reads it: invisible characters, look-alike letters
    _risk              the risk class of an element: destructive, from its name and context
    _policy_index      which Cedar policies can fire for a request
    _policies          the Cedar policy engine
    _explain           redaction of the log, the approval a check asks for, explaining a decision
    _reach             what agents never reach (the console's origins) and a person's input
    _lease_changes     lease changes as values (acquire, renew, takeover ...), callable as
                       the transitions of _core
    _watch             the in-process event hub behind Watch
    _journal           the memory-mapped decision journal files
    _decision_archive  the file a prune of the decision log archives decisions to
    _store             the storage seam: the AuthzStore protocol
    _store_parts       the AuthzStore methods both stores hand to one of their parts
    _sqlite_db         SQLite: one file's connections and its atomic() transaction
    _sqlite_schema     SQLite: columns, rows to records and back
    _sqlite_migrations SQLite: the recorded, versioned schema
    _sqlite_principals, _sqlite_grants, _sqlite_leases, _sqlite_approvals
                       SQLite: one table each
    _sqlite_decisions  SQLite: the decision log, its journal and checkpointer thread
    _sqlite            SqliteStore: the parts above put together behind AuthzStore
    _pg_session        PostgreSQL: each session's settings; a state change ended at its deadline
    _pg_pool           PostgreSQL: the connection pool (the connection put back last first)
    _pg_wait           PostgreSQL: a check's answer, polled for a moment when that is faster
    _pg_db             PostgreSQL: the connection pool, the database's clock, psycopg's
                       errors, recorded migrations
    _pg_schema         PostgreSQL: the versioned schema
    _pg_leases         PostgreSQL: one compare-and-set statement per lease change
    _pg_principals     PostgreSQL: principals, read with the clock in one statement per call
    _pg_grants         PostgreSQL: grants, and a check's one-statement snapshot
    _pg_approvals      PostgreSQL: approvals under row locks, and the decision log
    _pg_watch          PostgreSQL: the change log, LISTEN/NOTIFY and the hub of each replica
    _pg                PgStore: the PostgreSQL parts put together behind AuthzStore
    _identity          who a caller is; whether a named principal is a live agent
    _person_checks     the console's part: a person's input at the wheel, every lease
    _watch_part        the authorizer's side of Watch: subscribing, publishing changes
    _replay            a check sent again after its answer was lost: the allow it already had
    _authorizer        the sidecar's behaviour over an AuthzStore (no gRPC)
    _wire              protobuf messages to records and back, and the wire enums
    _wire_responses    the servicer's responses
    _wire_calls        the clients' requests (one builder per RPC) and their decoders
    _service           the gRPC servicer and serve()
    _channel           the clients' gRPC edge: channels, metadata, error mapping
    _balance           several replicas behind one client: balancing and failover
    _client            AuthzClient (blocking) and WatchStream
    _async_client      AsyncAuthzClient
    _cli_commands      what each command does and prints
    _cli               the command line's parsers
"""

from __future__ import annotations

import typing

from handrail import _lazy
from handrail._vocabulary import VERBS, Reason, Verb
from handrail.authz._async_client import AsyncAuthzClient
from handrail.authz._balance import parse_addresses
from handrail.authz._client import RESYNC_SEQ, AuthzClient, WatchStream
from handrail.authz._errors import (
    AlreadyExistsError,
    AuthzError,
    AuthzRpcError,
    AuthzUnavailableError,
    InvalidArgumentError,
    LeaseConflictError,
    NotFoundError,
    PermissionDeniedError,
    PolicyError,
    StoreUnavailableError,
    UnauthenticatedError,
)
from handrail.authz._models import (
    ApprovalInfo,
    ApprovalStatus,
    Decision,
    DecisionRecord,
    ElementContext,
    GrantInfo,
    GrantState,
    HolderKind,
    LeaseInfo,
    PrincipalInfo,
    PrincipalState,
    Role,
    WatchEventInfo,
)
from handrail.authz._sqlite import SqliteStore, Store
from handrail.authz._store import AuthzStore
from handrail.authz._urls import ParsedUrl, parse_url

if typing.TYPE_CHECKING:
    from handrail.authz._authorizer import Authorizer
    from handrail.authz._pg import PgStore
    from handrail.authz._policies import PolicyEngine
    from handrail.authz._service import AuthzServer, serve

# The sidecar's own parts, imported on first use: a client (the executor's) need not load
# PostgreSQL's driver, Cedar and the gRPC server to ask a sidecar.
__getattr__ = _lazy.lazy_exports(
    __name__,
    {
        "Authorizer": "handrail.authz._authorizer",
        "PgStore": "handrail.authz._pg",
        "PolicyEngine": "handrail.authz._policies",
        "AuthzServer": "handrail.authz._service",
        "serve": "handrail.authz._service",
    },
)


__all__ = [
    "RESYNC_SEQ",
    "VERBS",
    "AlreadyExistsError",
    "ApprovalInfo",
    "ApprovalStatus",
    "AsyncAuthzClient",
    "Authorizer",
    "AuthzClient",
    "AuthzError",
    "AuthzRpcError",
    "AuthzServer",
    "AuthzStore",
    "AuthzUnavailableError",
    "Decision",
    "DecisionRecord",
    "ElementContext",
    "GrantInfo",
    "GrantState",
    "HolderKind",
    "InvalidArgumentError",
    "LeaseConflictError",
    "LeaseInfo",
    "NotFoundError",
    "ParsedUrl",
    "PermissionDeniedError",
    "PgStore",
    "PolicyEngine",
    "PolicyError",
    "PrincipalInfo",
    "PrincipalState",
    "Reason",
    "Role",
    "SqliteStore",
    "Store",
    "StoreUnavailableError",
    "UnauthenticatedError",
    "Verb",
    "WatchEventInfo",
    "WatchStream",
    "parse_addresses",
    "parse_url",
    "serve",
]
