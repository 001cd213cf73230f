"""``AsyncLedger``: a ledger's calls on one thread of their own, in order, awaited.

What the executor relies on: the event loop never runs a ledger call; calls land in the
chain in the order they were queued (awaited or not); cancelling an awaiter never
cancels its call; an awaiter gives up after its deadline while the call goes on; closing
drains every queued call.
"""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from handrail.recorder import AsyncLedger, Ledger, LedgerError


class SlowLedger(Ledger):
    """A SQLite ledger whose appends take ``delay_s`` longer (in the calling thread), and
    which notes the thread of each append."""

    delay_s = 0.0
    gate: threading.Event | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.threads: set[str] = set()

    def append_many(self, entries: Any) -> Any:
        self.threads.add(threading.current_thread().name)
        if self.gate is not None:
            self.gate.wait(10)
        time.sleep(self.delay_s)
        return super().append_many(entries)


def run(body: Any) -> None:
    asyncio.run(body())


def test_calls_run_off_the_loop_in_the_order_they_were_queued(tmp_path: Path) -> None:
    async def body() -> None:
        with SlowLedger(tmp_path / "l.sqlite") as ledger:
            ledger.delay_s = 0.01
            led = AsyncLedger(ledger)
            # awaited and queued-only calls, interleaved: the chain keeps the queue's order
            posted = [led.post(ledger.append, "note", session_id=f"p{i}") for i in range(3)]
            awaited = [asyncio.ensure_future(led.append("note", session_id=f"a{i}")) for i in range(3)]
            await asyncio.gather(*posted, *awaited)
            await led.aclose()
            assert [e.session_id for e in ledger.entries()] == ["p0", "p1", "p2", "a0", "a1", "a2"]
            assert ledger.threads == {"handrail-ledger"}
            assert ledger.verify().ok

    run(body)


def test_the_loop_goes_on_while_a_call_waits(tmp_path: Path) -> None:
    async def body() -> None:
        with SlowLedger(tmp_path / "l.sqlite") as ledger:
            ledger.delay_s = 0.5
            led = AsyncLedger(ledger)
            write = asyncio.ensure_future(led.append("note"))
            ticks = 0
            t0 = time.monotonic()
            while not write.done():
                await asyncio.sleep(0.01)
                ticks += 1
            assert time.monotonic() - t0 >= 0.4
            assert ticks >= 20, ticks  # the loop ran all along (it froze for 0.5 s before)
            await led.aclose()

    run(body)


def test_a_cancelled_awaiter_never_cancels_its_call(tmp_path: Path) -> None:
    async def body() -> None:
        with SlowLedger(tmp_path / "l.sqlite") as ledger:
            ledger.gate = threading.Event()
            led = AsyncLedger(ledger)
            first = asyncio.ensure_future(led.append("note", session_id="running"))
            queued = asyncio.ensure_future(led.append("note", session_id="queued"))
            await asyncio.sleep(0.05)
            first.cancel()
            queued.cancel()  # still in the queue: it runs anyway
            with pytest.raises(asyncio.CancelledError):
                await queued
            ledger.gate.set()
            await led.aclose()
            assert [e.session_id for e in ledger.entries()] == ["running", "queued"]

    run(body)


def test_an_awaiter_gives_up_at_its_deadline_and_the_call_still_lands(tmp_path: Path) -> None:
    async def body() -> None:
        with SlowLedger(tmp_path / "l.sqlite") as ledger:
            ledger.gate = threading.Event()
            led = AsyncLedger(ledger, deadline_s=0.2)
            t0 = time.monotonic()
            with pytest.raises(LedgerError) as caught:
                await led.intent("s", "a1", "k", "agent", 1, {"kind": "click", "ref": "e1"})
            assert caught.value.reason == "LEDGER_TIMEOUT"
            assert time.monotonic() - t0 < 1.0
            ledger.gate.set()
            await led.aclose()
            assert [e.kind for e in ledger.entries()] == ["intent"]  # written once the ledger answered

    run(body)


def test_closing_drains_every_queued_call_then_refuses_new_ones(tmp_path: Path) -> None:
    async def body() -> None:
        with SlowLedger(tmp_path / "l.sqlite") as ledger:
            ledger.delay_s = 0.05
            led = AsyncLedger(ledger)
            for i in range(5):
                led.post(ledger.append, "note", session_id=str(i))
            await led.aclose()
            assert ledger.count() == 5
            with pytest.raises(LedgerError):
                await led.append("note")

    run(body)


def test_a_failed_call_raises_its_own_error_and_the_thread_serves_the_next(tmp_path: Path) -> None:
    async def body() -> None:
        with Ledger(tmp_path / "l.sqlite") as ledger:
            led = AsyncLedger(ledger)
            with pytest.raises(LedgerError) as caught:
                await led.reconcile("s", "no-such-action", "agent", "HAPPENED", "looked")
            assert caught.value.reason == "NOT_FOUND"
            assert (await led.append("note")).seq == 1
            await led.aclose()

    run(body)
