"""Shared fixtures: real servers on loopback, a real Chromium, real SQLite files.

One authz sidecar and one executor (with its one Chromium) serve the whole test session;
each test gets its own agent principal, target and fixture app so tests stay independent.
"""

from __future__ import annotations

import asyncio
import itertools
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest

from handrail.authz import AuthzClient, Store
from handrail.executor import ConsoleClient, ExecutorClient
from handrail.proto.executor.v1 import executor_pb2 as pb
from handrail.proto.executor.v1 import executor_pb2_grpc as pb_grpc
from handrail.scenarios import ServerProcess, SubscriptionApp, start_authz, start_executor
from handrail.scenarios._postgres import PostgresUnavailable, PrivatePostgres, fresh_schema, test_database

_counter = itertools.count(1)


@dataclass
class Principal:
    name: str
    token: str


@dataclass
class Stack:
    """A running authz sidecar and executor, and the principals that use them."""

    data_dir: Path
    authz: ServerProcess
    executor: ServerProcess
    operator: Principal
    executor_principal: Principal

    def add_principal(self, role: str, prefix: str = "") -> Principal:
        name = f"{prefix or role}-{next(_counter)}"
        with Store(self.data_dir / "authz.sqlite") as store:
            return Principal(name, store.add_principal(name, role))

    def operator_client(self) -> AuthzClient:
        return AuthzClient(self.authz.address, self.operator.token)

    def close_sessions_of(self, agent: Principal) -> int:
        """Close the sessions ``agent`` left open on the shared executor; return how many.

        A test's session would otherwise live out its TTL (10 minutes), and a page with
        timers (a fixture app's clock, rows re-painted every 16 ms) keeps its renderer
        busy meanwhile: left open, they took more than one of CI's two cores for the rest
        of the suite. Sessions the test closed, or the executor already did, are not listed.
        """

        async def listed() -> list[str]:
            console = ConsoleClient(self.executor.address)
            try:
                return [s.session_id for s in await console.list_sessions(self.operator.token) if s.agent == agent.name]
            finally:
                await console.close()

        mine = asyncio.run(listed())
        with grpc.insecure_channel(self.executor.address) as channel:
            stub = pb_grpc.ExecutorStub(channel)  # type: ignore[no-untyped-call]
            for session_id in mine:
                try:
                    stub.CloseSession(
                        pb.CloseSessionRequest(session_id=session_id),
                        metadata=(("authorization", f"Bearer {agent.token}"),),
                        timeout=10,
                    )
                except grpc.RpcError as exc:  # closed meanwhile, or the test revoked the agent
                    if exc.code() not in (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.UNAUTHENTICATED):
                        raise
        return len(mine)


def new_stack(data_dir: Path) -> Iterator[Stack]:
    data_dir.mkdir(parents=True, exist_ok=True)
    with Store(data_dir / "authz.sqlite") as store:
        operator = Principal("operator-0", store.add_principal("operator-0", "operator"))
        executor = Principal("executor-0", store.add_principal("executor-0", "executor"))
    authz = start_authz(data_dir)
    try:
        exe = start_executor(data_dir, authz.address, executor.token)
        try:
            yield Stack(data_dir, authz, exe, operator, executor)
        finally:
            exe.stop()
    finally:
        authz.stop()


@pytest.fixture(scope="session")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """The session's shared sidecar and executor."""
    yield from new_stack(tmp_path_factory.mktemp("stack"))


@pytest.fixture
def app() -> Iterator[SubscriptionApp]:
    """A fresh subscription fixture app on a free port."""
    fixture = SubscriptionApp()
    fixture.start()
    try:
        yield fixture
    finally:
        fixture.stop()


@dataclass
class AgentSetup:
    principal: Principal
    target: str
    client: ExecutorClient


def grant_needing_approval(stack: Stack, agent: AgentSetup, origin: str) -> None:
    """Grant the agent navigate, input and submit on ``origin``, every submit approved first."""
    with stack.operator_client() as ops:
        ops.grant(
            agent.principal.name,
            agent.target,
            ["navigate", "input", "submit"],
            [origin],
            require_approval_verbs=["submit"],
        )


@pytest.fixture
def agent(stack: Stack) -> Iterator[AgentSetup]:
    """A new agent principal with its own target and an executor client."""
    principal = stack.add_principal("agent")
    client = ExecutorClient(stack.executor.address, principal.token)
    try:
        yield AgentSetup(principal, f"browser:{principal.name}", client)
    finally:
        client.close()
        stack.close_sessions_of(principal)


# --- PostgreSQL: one private server per test session, a fresh schema per user -----------------


@pytest.fixture(scope="session")
def postgres() -> Iterator[PrivatePostgres]:
    """The session's PostgreSQL server: ``$HANDRAIL_TEST_PG`` if set, else a private one
    (initdb in a temp dir, a free loopback port, run as an unprivileged user), stopped at
    the end. Only the tests that ask for it (all marked slow) start it."""
    try:
        server = test_database()
    except PostgresUnavailable as exc:
        pytest.fail(f"{exc} (scripts/bootstrap.sh installs Debian's postgresql)")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def pg_dsn(postgres: PrivatePostgres) -> Iterator[Callable[[], str]]:
    """Make DSNs of fresh, empty schemas of the session's server (dropped at teardown)."""
    made: list[str] = []

    def make() -> str:
        name, dsn = fresh_schema(postgres.dsn)
        made.append(name)
        return dsn

    yield make
    import psycopg

    with psycopg.connect(postgres.dsn, autocommit=True) as conn:
        for name in made:
            conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


@pytest.fixture
def role() -> Iterator[Callable[..., str]]:
    """Make a login role on the schema of a DSN (one of ``pg_dsn``'s), granted ``*grants``
    by that DSN's user (``{r}`` is the role, ``{s}`` the schema); the role's DSN. Dropped
    at teardown."""
    import secrets

    import psycopg
    from psycopg.conninfo import conninfo_to_dict

    from handrail.scenarios._postgres import pg_url

    made: list[tuple[str, str]] = []

    def make(dsn: str, *grants: str) -> str:
        name = f"role_{secrets.token_hex(4)}"
        schema = str(conninfo_to_dict(dsn)["options"]).split("=", 1)[1]
        made.append((dsn, name))
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute(f'CREATE ROLE "{name}" LOGIN')
            for sql in grants:
                admin.execute(sql.format(r=f'"{name}"', s=f'"{schema}"'))
        return pg_url(dsn, user=name)

    yield make
    for dsn, name in made:
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute(f'ALTER ROLE "{name}" RESET ALL')
            admin.execute(f'DROP OWNED BY "{name}"')
            admin.execute(f'DROP ROLE "{name}"')


def reap(proc: subprocess.Popen[str]) -> None:
    """A test's clean-up of a child process: killed if it still runs, its pipes closed."""
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Leave out the PostgreSQL run of a test marked ``sqlite_only``, or of a ledger test that
    asks for ``ledger_path`` (it reads the SQLite store's own files or internals)."""
    kept = []
    for item in items:
        callspec = getattr(item, "callspec", None)
        backend = callspec.params.get("store_kind") if callspec is not None else None
        if backend == "postgresql" and (
            item.get_closest_marker("sqlite_only") or "ledger_path" in getattr(item, "fixturenames", ())
        ):
            continue
        kept.append(item)
    if len(kept) != len(items):
        config.hook.pytest_deselected(items=[i for i in items if i not in kept])
        items[:] = kept
