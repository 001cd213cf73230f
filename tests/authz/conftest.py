"""Fixtures for the authz tests: a real sidecar in-process on a free loopback port."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from handrail.authz import AuthzClient, AuthzServer, serve


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

    def add(self, name: str, role: str) -> AuthzClient:
        self.tokens[name] = self.server.store.add_principal(name, role)
        return self.client(name)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def sidecar(tmp_path: Path, clock: FakeClock) -> Iterator[Sidecar]:
    server, port = serve(tmp_path / "data", "127.0.0.1:0", clock=clock)
    store = server.store
    tokens = {
        "admin": store.add_principal("admin", "admin"),
        "op": store.add_principal("op", "operator"),
        "exe": store.add_principal("exe", "executor"),
        "agent-a": store.add_principal("agent-a", "agent"),
        "agent-b": store.add_principal("agent-b", "agent"),
    }
    side = Sidecar(server, f"127.0.0.1:{port}", tmp_path / "data", clock, tokens)
    try:
        yield side
    finally:
        for c in side._clients:
            c.close()
        server.stop(None)
