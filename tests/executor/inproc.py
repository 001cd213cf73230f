"""The guarded loop in one process, for the invariant tests: nothing mocked above the seam.

- a real authz sidecar (``handrail.authz.serve``) on a free loopback port, with a temp
  SQLite store and a clock the test can move;
- optionally a loopback TCP proxy in front of it that the test can pause (the sidecar is
  slow: answers stop coming until the caller's deadline passes);
- a real ``Ledger`` in a temp dir;
- the executor's core (``GuardedExecutor``) with a ``FakeBackend`` in place of Chromium.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from handrail.authz import AsyncAuthzClient, AuthzServer, Store, serve
from handrail.executor import ActionKind, ActionSpec, ActResponse, Observation
from handrail.executor._faults import FaultPoint
from handrail.executor._guard import GuardedExecutor, OpenSpec
from handrail.executor._models import BackendKind
from handrail.executor._session import Session
from handrail.executor.testing import FakeBackend
from handrail.recorder import Entry, Ledger

ORIGIN = "https://shop.example"
_names = itertools.count(1)


class Clock:
    """The sidecar's clock: the wall clock, moved forward by ``advance``."""

    def __init__(self) -> None:
        self.offset_ms = 0

    def __call__(self) -> int:
        return int(time.time() * 1000) + self.offset_ms

    def advance(self, ms: int) -> None:
        self.offset_ms += ms


@dataclass
class Sidecar:
    """A running authz sidecar in this process, with an operator and an executor principal."""

    data_dir: Path
    server: AuthzServer
    port: int
    clock: Clock
    operator_token: str
    executor_token: str

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def add_agent(self) -> tuple[str, str]:
        name = f"agent-{next(_names)}"
        with Store(self.data_dir / "authz.sqlite") as store:
            return name, store.add_principal(name, "agent")

    def stop(self) -> None:
        self.server.stop(None)


def start_sidecar(data_dir: Path) -> Sidecar:
    data_dir.mkdir(parents=True, exist_ok=True)
    with Store(data_dir / "authz.sqlite") as store:
        operator = store.add_principal("operator-0", "operator")
        executor = store.add_principal("executor-0", "executor")
    clock = Clock()
    server, port = serve(data_dir, "127.0.0.1:0", clock=clock)
    return Sidecar(data_dir, server, port, clock, operator, executor)


class Proxy:
    """A loopback TCP forwarder; ``pause`` holds every byte until ``resume``."""

    def __init__(self, upstream: int) -> None:
        self._upstream = upstream
        self._open = asyncio.Event()
        self._open.set()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._server: asyncio.Server | None = None

    async def start(self) -> str:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        return f"127.0.0.1:{self._server.sockets[0].getsockname()[1]}"

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self._upstream)
        pumps = [
            asyncio.ensure_future(self._pump(reader, up_writer)),
            asyncio.ensure_future(self._pump(up_reader, writer)),
        ]
        self._tasks.update(pumps)
        await asyncio.gather(*pumps, return_exceptions=True)
        for w in (writer, up_writer):
            w.close()

    async def _pump(self, src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError):
            while data := await src.read(65536):
                await self._open.wait()
                dst.write(data)
                await dst.drain()
        dst.close()

    def pause(self) -> None:
        self._open.clear()

    def resume(self) -> None:
        self._open.set()

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


@dataclass
class Rig:
    """One executor core on a sidecar and a ledger, with one open session on a fake page."""

    sidecar: Sidecar
    core: GuardedExecutor
    authz: AsyncAuthzClient  # the executor's
    ops: AsyncAuthzClient  # an operator's
    ledger: Ledger
    backend: FakeBackend
    agent: str
    token: str
    target: str
    session: Session
    proxy: Proxy | None = None
    dead: bool = False  # as after a crash: left without closing anything
    _keys: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    async def observe(self) -> Observation:
        return await self.core.observe(self.session)

    def spec(self, kind: ActionKind = ActionKind.CLICK, *, key: str = "", **kw: Any) -> ActionSpec:
        """An action citing the latest observation: by default a click on "Pay" (e4)."""
        latest = self.session.latest
        assert latest is not None, "observe first"
        if kind in (ActionKind.CLICK, ActionKind.FILL, ActionKind.TYPE):
            kw.setdefault("ref", "e4" if kind is ActionKind.CLICK else "e3")
        kw.setdefault("observation_id", latest.observation_id)
        return ActionSpec(kind=kind, idempotency_key=key or f"k{next(self._keys)}", **kw)

    async def act(self, kind: ActionKind = ActionKind.CLICK, *, key: str = "", **kw: Any) -> ActResponse:
        return await self.core.act(self.session, self.spec(kind, key=key, **kw))

    def entries(self, action_id: str, kind: str | None = None) -> list[Entry]:
        return self.ledger.entries(action_id=action_id, kind=kind)

    def die(self) -> None:
        """Stop here as a killed process would: no session closes, no lease release.

        Its connections (to the sidecar, to the ledger file) close with it; its pending
        tasks end with the event loop.
        """
        self.dead = True

    def kinds(self, action_id: str) -> list[str]:
        """The kinds of the ledger's entries of one action, in order."""
        return [e.kind for e in self.entries(action_id)]


@contextlib.asynccontextmanager
async def running(
    sidecar: Sidecar,
    ledger_path: Path,
    *,
    backend: FakeBackend | None = None,
    agent: tuple[str, str] | None = None,
    target: str = "",
    verbs: tuple[str, ...] = ("submit", "input", "navigate"),
    watch: bool = True,
    deadline_s: float = 2.0,
    via_proxy: bool = False,
    fault: FaultPoint | None = None,
) -> AsyncIterator[Rig]:
    """An executor core on ``sidecar`` and the ledger at ``ledger_path``, one session open.

    ``watch=False`` leaves the core unstarted: no ledger recovery and no Watch stream, so
    each dispatch asks the sidecar for the lease. ``agent`` reuses a principal (a restart).
    """
    backend = backend or FakeBackend()
    name, token = agent or sidecar.add_agent()
    target = target or f"browser:{name}"
    proxy = Proxy(sidecar.port) if via_proxy else None
    address = await proxy.start() if proxy is not None else sidecar.address
    authz = AsyncAuthzClient(address, sidecar.executor_token, timeout_s=deadline_s)
    ops = AsyncAuthzClient(sidecar.address, sidecar.operator_token)
    ledger = Ledger(ledger_path)
    core = GuardedExecutor(authz, ledger, backend.open, fault=fault)
    rig: Rig | None = None
    try:
        if agent is None and verbs:
            await ops.grant(name, target, list(verbs), [ORIGIN])
        if watch:
            await core.start()
            deadline = time.monotonic() + 5
            while not core.watching_leases and time.monotonic() < deadline:
                await asyncio.sleep(0.005)
            assert core.watching_leases, "the sidecar's Watch stream did not come up"
        info = await core.open_session(
            token=token, agent="", target=target, spec=OpenSpec(BackendKind.BROWSER, target, "", None)
        )
        session = core.sessions.get(info.session_id, token)
        rig = Rig(sidecar, core, authz, ops, ledger, backend, name, token, target, session, proxy)
        yield rig
    finally:
        if proxy is not None:
            proxy.resume()
        if rig is None or not rig.dead:
            await core.close()
        await authz.close()
        await ops.close()
        ledger.close()
        if proxy is not None:
            await proxy.close()
