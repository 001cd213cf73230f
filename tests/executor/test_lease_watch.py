"""The executor's Watch of the sidecar (``LeaseKeeper``) across replicas: a stream lost
before it delivered any event resumes with the lease of each target as it is now, so a
takeover made while no stream was up still reaches the fences (with ``since_seq`` 0, "from
now", it never did, and once the new stream was live the fence stopped asking)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from handrail.authz import AsyncAuthzClient, AuthzClient, WatchEventInfo
from handrail.executor._lease import LeaseKeeper
from tests.authz.test_replicas import Replicas

pytestmark = pytest.mark.slow


class _Recording(LeaseKeeper):
    """A keeper whose pushed events are kept, not fenced (no sessions here)."""

    def __init__(self, authz: AsyncAuthzClient) -> None:
        super().__init__(authz, ledger=None, sessions=None, ttl_ms=30_000)  # type: ignore[arg-type]
        self.seen: list[WatchEventInfo] = []

    def _on_event(self, event: WatchEventInfo) -> None:
        self.seen.append(event)


async def _until(what: Callable[[], Any], timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not what():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)


def test_a_takeover_made_while_the_stream_moved_reaches_the_keeper(pg_dsn: Callable[[], str], tmp_path: Path) -> None:
    cluster = Replicas(pg_dsn(), 2, tmp_path)
    op = AuthzClient(cluster.addresses[1], cluster.tokens["op"])

    async def body() -> None:
        # the client's first call goes to the first replica in its list: the watch
        authz = AsyncAuthzClient(",".join(cluster.addresses), cluster.tokens["exe"])
        keeper = _Recording(authz)
        keeper.start()
        try:
            await _until(lambda: keeper._watch_live)
            cluster.servers[0].stop(None)  # its stream ends before any event
            await _until(lambda: not keeper._watch_live)
            lease = op.take_over("browser:1", ttl_ms=60_000)  # while no stream is up
            await _until(
                lambda: any(e.target == "browser:1" and e.lease and e.lease.epoch >= lease.epoch for e in keeper.seen)
            )
            assert keeper._watch_live
            (told,) = [e for e in keeper.seen if e.target == "browser:1"]
            assert told.change in ("resync", "takeover") and told.lease is not None
            assert told.lease.holder_kind == "human" and told.lease.holder == "op"
            # and the stream goes on from there: the hand-back is pushed as news
            op.hand_back("browser:1", lease.epoch)
            await _until(lambda: any(e.change == "handback" for e in keeper.seen))
        finally:
            await keeper.close()
            await authz.close()

    try:
        asyncio.run(body())
    finally:
        op.close()
        cluster.close()
