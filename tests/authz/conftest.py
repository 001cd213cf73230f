"""Fixtures for the authz tests: a real sidecar in-process on a free loopback port."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from handrail.authz import AuthzClient, AuthzServer, GrantInfo, serve
from handrail.authz._models import Principal
from handrail.authz._policies import DEFAULT_POLICIES_DIR

ADMIN = Principal("admin", "admin")
LEASE_GRANT_NOTE = "standing read grant: lets the tests hold leases"


def granted(grants: list[GrantInfo]) -> list[GrantInfo]:
    """``grants`` without the fixture's standing read grants."""
    return [g for g in grants if g.note != LEASE_GRANT_NOTE]


class FakeClock:
    """The store's clock, moved by hand (unix ms)."""

    def __init__(self) -> None:
        self.now = time.time_ns() // 1_000_000

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> None:
        self.now += ms


@dataclass
class Sidecar:
    server: AuthzServer
    address: str
    data_dir: Path
    clock: FakeClock
    tokens: dict[str, str]
    _clients: list[AuthzClient] = field(default_factory=list)

    def client(self, name: str) -> AuthzClient:
        """A client authenticated as the named principal (closed at teardown)."""
        c = AuthzClient(self.address, self.tokens[name])
        self._clients.append(c)
        return c

    @property
    def store_args(self) -> list[str]:
        """Where the CLI's store commands find this sidecar's store: ``--store`` for a
        PostgreSQL one, else ``--data-dir``."""
        dsn = getattr(self.server.store, "dsn", "")
        return ["--store", dsn] if dsn else ["--data-dir", str(self.data_dir)]

    def add(self, name: str, role: str) -> AuthzClient:
        self.tokens[name] = self.server.store.add_principal(name, role)
        return self.client(name)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def policies_dir(tmp_path: Path, name: str = "policies", **files: str) -> Path:
    """A policies directory: the shipped schema and defaults, plus ``files`` (name: text)."""
    directory = tmp_path / name
    directory.mkdir()
    for shipped in ("schema.cedarschema", "default.cedar"):
        shutil.copy(DEFAULT_POLICIES_DIR / shipped, directory)
    for file, text in files.items():
        (directory / file).write_text(text)
    return directory


MakeSidecar = Callable[..., Sidecar]


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.slow)])
def store_kind(request: pytest.FixtureRequest) -> str:
    """Which store the sidecars of a test use: every sidecar test runs on both (the
    PostgreSQL run is slow-marked: it needs the session's PostgreSQL server)."""
    return str(request.param)


@pytest.fixture
def make_sidecar(
    tmp_path: Path, clock: FakeClock, store_kind: str, request: pytest.FixtureRequest
) -> Iterator[MakeSidecar]:
    """Start a sidecar in-process with ``serve(**kwargs)``; stopped at teardown. On
    PostgreSQL each sidecar gets a fresh schema (pass ``store=`` to share one)."""
    made: list[Sidecar] = []

    def make(*, lease_grants: bool = True, **kwargs: Any) -> Sidecar:
        data = tmp_path / f"data{len(made)}"
        if store_kind == "postgresql":
            kwargs.setdefault("store", request.getfixturevalue("pg_dsn")())
        kwargs.setdefault("clock", clock)
        server, port = serve(data, "127.0.0.1:0", **kwargs)
        store = server.store
        tokens = {
            "admin": store.add_principal("admin", "admin"),
            "op": store.add_principal("op", "operator"),
            "exe": store.add_principal("exe", "executor"),
            "agent-a": store.add_principal("agent-a", "agent"),
            "agent-b": store.add_principal("agent-b", "agent"),
        }
        side = Sidecar(server, f"127.0.0.1:{port}", data, clock, tokens)
        made.append(side)
        if lease_grants:
            # Only a grant holder may take a target's lease: each agent gets a standing
            # read grant on every target, so that the tests below can hold leases.
            for agent in ("agent-a", "agent-b"):
                side.server.authorizer.grant(ADMIN, GrantInfo("", agent, "*", ("read",), note=LEASE_GRANT_NOTE))
        return side

    try:
        yield make
    finally:
        for side in made:
            for c in side._clients:
                c.close()
            side.server.stop(None)


@pytest.fixture
def sidecar(make_sidecar: MakeSidecar) -> Sidecar:
    return make_sidecar()
