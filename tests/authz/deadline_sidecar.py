"""The sidecar the deadline tests of both stores share (``test_deadline_pg.py``,
``test_deadline_sqlite.py``): 8 handler threads (on PostgreSQL, a pool of four
connections), the principals exe, op and agent-a, agent-a holding the lease on
:data:`TARGET`; and what those tests ask of it."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from handrail.authz import AuthzClient, AuthzServer, Decision, GrantInfo, serve
from handrail.authz._errors import AuthzError
from tests.authz.conftest import ADMIN, LEASE_GRANT_NOTE

TARGET = "browser:1"
DEADLINE_S = 1.0
HOLD_S = 2.5  # a blocker lets go well after every caller has given up

_PRINCIPALS = (("exe", "executor"), ("op", "operator"), ("agent-a", "agent"))


@dataclass
class DeadlineSidecar:
    """A started sidecar; ``where``: its store's file (SQLite) or DSN (PostgreSQL)."""

    server: AuthzServer
    address: str
    where: str
    tokens: dict[str, str]
    epoch: int

    def client(self, who: str, timeout_s: float = 5.0) -> AuthzClient:
        return AuthzClient(self.address, self.tokens[who], timeout_s=timeout_s)

    def allows_of(self, principal: str) -> list[str]:
        return [d.decision_id for d in self.server.store.list_decisions(principal=principal) if d.decision.allow]


@contextlib.contextmanager
def deadline_sidecar(data: Path, **serve_kwargs: Any) -> Iterator[DeadlineSidecar]:
    """``serve(data, ..., **serve_kwargs)`` set up as above; stopped at the end."""
    server, port = serve(data, "127.0.0.1:0", max_workers=8, **serve_kwargs)
    try:
        store = server.store
        tokens = {name: store.add_principal(name, role) for name, role in _PRINCIPALS}
        server.authorizer.grant(ADMIN, GrantInfo("", "agent-a", "*", ("read",), note=LEASE_GRANT_NOTE))
        where = str(serve_kwargs.get("store") or data / "authz.sqlite")
        side = DeadlineSidecar(server, f"127.0.0.1:{port}", where, tokens, 0)
        with side.client("exe") as exe:
            side.epoch = exe.acquire(TARGET, holder="agent-a", ttl_ms=3_600_000).epoch
        yield side
    finally:
        server.stop(None)


def single_use(side: DeadlineSidecar, **scope: Any) -> GrantInfo:
    """A single-use grant of submit on :data:`TARGET` to agent-a."""
    with side.client("op") as op:
        return op.grant("agent-a", TARGET, ["submit"], [], single_use=True, **scope)


def timed_check(side: DeadlineSidecar, timeout_s: float, **kwargs: Any) -> tuple[float, Decision | AuthzError]:
    """One check of agent-a's submit with a deadline of ``timeout_s``: (seconds it took,
    the decision or the error)."""
    with side.client("exe", timeout_s) as exe:
        began = time.monotonic()
        try:
            answer: Decision | AuthzError = exe.check("agent-a", TARGET, side.epoch, "submit", **kwargs)
        except AuthzError as exc:
            answer = exc
        return time.monotonic() - began, answer


def cut_short_lines(caplog: pytest.LogCaptureFixture, method: str) -> list[str]:
    """The sidecar's lines about calls of ``method`` cut short; no traceback logged at all."""
    assert not [r for r in caplog.records if r.exc_info is not None], "a traceback was logged"
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith(f"authz: {method} cut short:")]
