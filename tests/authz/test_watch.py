"""Watch pushes lease, grant, approval and policy changes as they commit."""

from __future__ import annotations

import asyncio
import queue
import threading
import time
from collections.abc import Iterator

import pytest

from handrail.authz import AsyncAuthzClient, AuthzClient, AuthzRpcError, WatchEventInfo
from tests.authz.conftest import Sidecar

TARGET = "browser:1"


class Watcher:
    """Runs ``client.watch`` on a thread and queues what arrives."""

    def __init__(self, client: AuthzClient, targets: list[str], since_seq: int = 0) -> None:
        self.events: queue.Queue[WatchEventInfo] = queue.Queue()
        self._iter = client.watch(targets, since_seq)
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            for event in self._iter:
                self.events.put(event)
        except BaseException as exc:  # surfaced by next()
            self.error = exc

    def next(self, timeout: float = 2.0) -> WatchEventInfo:
        try:
            return self.events.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no event within {timeout} s (error: {self.error})") from None

    def close(self) -> None:
        self._iter.close()


@pytest.fixture
def watch(sidecar: Sidecar) -> Iterator[type[Watcher]]:
    made: list[Watcher] = []

    class Made(Watcher):
        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, **kwargs)  # type: ignore[arg-type]
            made.append(self)

    yield Made
    for w in made:
        w.close()


def _wait_subscribed(s: Sidecar, n: int = 1) -> None:
    deadline = time.monotonic() + 5
    while s.server.authorizer.hub.subscribers < n:
        assert time.monotonic() < deadline, "the watch did not start"
        time.sleep(0.005)


def test_takeover_arrives_within_a_second(sidecar: Sidecar, watch: type[Watcher]) -> None:
    exe = sidecar.client("exe")
    exe.acquire(TARGET, holder="agent-a")
    w = watch(exe, [TARGET])
    _wait_subscribed(sidecar)
    t0 = time.monotonic()
    lease = sidecar.client("op").take_over(TARGET, note="mine")
    event = w.next(timeout=1.0)
    elapsed = time.monotonic() - t0
    assert elapsed < 1.0
    assert (event.kind, event.change, event.target) == ("lease", "takeover", TARGET)
    assert event.lease == lease and event.lease.holder_kind == "human"
    assert event.at_ms == sidecar.clock.now and event.seq > 0


def test_every_kind_of_change(sidecar: Sidecar, watch: type[Watcher]) -> None:
    exe, op = sidecar.client("exe"), sidecar.client("op")
    w = watch(exe, [TARGET])
    _wait_subscribed(sidecar)
    lease = exe.acquire(TARGET, holder="agent-a")
    grant = op.grant("agent-a", TARGET, ["submit"], [], require_approval_verbs=["submit"], single_use=True)
    d = exe.check("agent-a", TARGET, lease.epoch, "submit", fingerprint="f")
    op.approve(d.approval_id)
    assert exe.check("agent-a", TARGET, lease.epoch, "submit", fingerprint="f").allow
    op.revoke(grant.grant_id)
    exe.release(TARGET, lease.epoch, holder="agent-a")
    op.reload_policies()
    seen = [w.next() for _ in range(9)]
    assert [(e.kind, e.change) for e in seen] == [
        ("lease", "acquire"),
        ("grant", "grant"),
        ("approval", "create"),
        ("approval", "approve"),
        ("grant", "consume"),
        ("approval", "use"),
        ("grant", "revoke"),
        ("lease", "release"),
        ("policy", "reload"),
    ]
    assert [e.seq for e in seen] == sorted(e.seq for e in seen)
    assert seen[1].grant_id == grant.grant_id and seen[1].grant == grant
    assert seen[2].approval_id == d.approval_id and seen[2].approval_status == "PENDING"
    assert seen[5].approval_status == "USED"


def test_targets_filter_and_pattern_grants(sidecar: Sidecar, watch: type[Watcher]) -> None:
    exe, op = sidecar.client("exe"), sidecar.client("op")
    w = watch(exe, [TARGET])
    _wait_subscribed(sidecar)
    exe.acquire("browser:2", holder="agent-b")
    op.grant("agent-a", "browser:*", ["read"], [])
    event = w.next()
    assert (event.kind, event.target) == ("grant", "browser:*")
    assert w.events.empty()


def test_expiry_is_noticed_by_the_store_clock(sidecar: Sidecar, watch: type[Watcher]) -> None:
    exe, op = sidecar.client("exe"), sidecar.client("op")
    lease = exe.acquire(TARGET, holder="agent-a", ttl_ms=1_000)
    op.grant("agent-a", TARGET, ["read"], [], sidecar.clock.now + 2_000)
    op.grant("agent-a", TARGET, ["submit"], [], require_approval_verbs=["submit"],
             approval_timeout_ms=3_000)  # fmt: skip
    exe.check("agent-a", TARGET, lease.epoch, "submit", fingerprint="f")
    w = watch(exe, [TARGET])
    _wait_subscribed(sidecar)
    sidecar.clock.advance(1_000)
    e = w.next()
    assert (e.kind, e.change) == ("lease", "expire") and e.lease is not None
    assert e.lease.holder_kind == "" and e.lease.epoch == lease.epoch
    sidecar.clock.advance(1_000)
    e = w.next()
    assert (e.kind, e.change) == ("grant", "expire")
    sidecar.clock.advance(1_000)
    e = w.next()
    assert (e.kind, e.change, e.approval_status) == ("approval", "expire", "EXPIRED")
    time.sleep(0.1)
    assert w.events.empty()  # each expiry is told once


def test_since_seq_replays_and_resyncs(sidecar: Sidecar, watch: type[Watcher]) -> None:
    exe, op = sidecar.client("exe"), sidecar.client("op")
    first = exe.acquire(TARGET, holder="agent-a")
    w = watch(exe, [TARGET])
    _wait_subscribed(sidecar)
    op.take_over(TARGET)
    seq = w.next().seq
    lease = op.hand_back(TARGET, first.epoch + 1)
    op.take_over(TARGET)
    replay = watch(exe, [TARGET], since_seq=seq)
    assert [(e.change, e.seq) for e in (replay.next(), replay.next())] == [
        ("handback", seq + 1),
        ("takeover", seq + 2),
    ]
    # a sequence number older than this process: the current state, marked resync
    resync = watch(exe, [TARGET], since_seq=1)
    e = resync.next()
    assert (e.kind, e.change) == ("lease", "resync")
    assert e.lease is not None and e.lease.epoch == lease.epoch + 1
    # one this sidecar never issued (another data dir, a restored database, a clock that
    # went back at a restart): the current state too, not silence until the sequence
    # passes it (every change until then would be missed)
    ahead = watch(exe, [TARGET], since_seq=2**63 - 1)
    e = ahead.next()
    assert (e.kind, e.change, e.lease.epoch if e.lease else None) == ("lease", "resync", lease.epoch + 1)
    op.hand_back(TARGET, lease.epoch + 1)
    assert ahead.next().change == "handback"  # and live changes after it


def test_who_may_watch(sidecar: Sidecar) -> None:
    with pytest.raises(AuthzRpcError) as err:
        next(iter(sidecar.client("agent-a").watch([TARGET])))
    assert err.value.code_name == "PERMISSION_DENIED"


def test_async_watch(sidecar: Sidecar) -> None:
    async def run() -> WatchEventInfo:
        async with AsyncAuthzClient(sidecar.address, sidecar.tokens["exe"]) as exe:
            events = exe.watch([TARGET])
            first = asyncio.ensure_future(events.__anext__())
            while sidecar.server.authorizer.hub.subscribers < 1:
                await asyncio.sleep(0.005)
            await asyncio.to_thread(sidecar.client("op").take_over, TARGET)
            event = await asyncio.wait_for(first, 1.0)
            await events.aclose()  # type: ignore[attr-defined]
            return event

    event = asyncio.run(run())
    assert (event.kind, event.change) == ("lease", "takeover")


def test_server_stop_ends_the_stream(sidecar: Sidecar, watch: type[Watcher]) -> None:
    w = watch(sidecar.client("exe"), [])
    _wait_subscribed(sidecar)
    sidecar.server.authorizer.hub.close()
    w._thread.join(5)
    assert not w._thread.is_alive()
