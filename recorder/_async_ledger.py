"""A ledger for an event loop: every call runs on one thread of its own, in FIFO order.

:class:`AsyncLedger` wraps a :class:`Ledger` for asyncio code (the executor). A ledger call
may wait: SQLite's fsync and another process's write lock, PostgreSQL's round trips, its
pool's 10 s wait for a connection while the database is unreachable, or a query that hangs
on a network that stalls. Run on the event loop, that wait froze every session with it.
Here each call is handed to one dedicated thread and awaited:

- **One thread, FIFO.** Calls run one at a time in the order they were queued (the order
  of :meth:`submit`, of :meth:`call` and of the ledger methods below, as the loop made
  them). So the order of entries in the chain is the program order: a coroutine that
  awaits each write before the next keeps its entries in its own order, and a write queued
  without waiting (:meth:`post`) still lands after everything queued before it. Entries of
  concurrent sessions interleave, as they did. One thread also keeps a SQLite connection
  on one thread.
- **A queued call runs to its end.** Cancelling the coroutine that awaits it (a client gone,
  a deadline) stops the waiting, never the call: an intent is either durable or failed,
  never silently dropped because its caller left.
- **Waiting is bounded.** An awaiter gives up after ``deadline_s`` (queueing included) with
  :class:`LedgerError` (reason ``LEDGER_TIMEOUT``); the call itself still runs when the
  ledger answers, so whoever gave up must treat its write as *maybe* durable (the
  executor: not dispatched, and a result queued behind the intent; see ``_outcomes``).
- **Closing drains.** :meth:`aclose` takes no new call, waits (boundedly) for every queued
  one to finish, then ends the thread. The thread is a daemon: a process that dies
  mid-call leaves what a crash leaves, which recovery handles (intents without results
  become UNKNOWN).

The synchronous :class:`Ledger` stays what the CLI (``handrail ledger ...``) and tests use.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import logging
import queue
import threading
from collections.abc import Awaitable, Callable
from typing import Any, Concatenate, ParamSpec, TypeVar

from ._errors import LedgerError
from ._ledger import Ledger

__all__ = ["DEFAULT_DEADLINE_S", "AsyncLedger"]

log = logging.getLogger(__name__)

_P = ParamSpec("_P")
_T = TypeVar("_T")

#: How long an awaiter waits for its ledger call, queueing included (seconds). Longer than
#: a PostgreSQL ledger's wait for a pooled connection (10 s), whose own error says more.
DEFAULT_DEADLINE_S = 15.0

_Call = tuple["concurrent.futures.Future[Any]", Callable[[], Any]]


def _in_thread(method: Callable[Concatenate[Ledger, _P], _T]) -> Callable[Concatenate[AsyncLedger, _P], Awaitable[_T]]:
    """``Ledger.method``, run on the ledger thread and awaited (see :meth:`AsyncLedger.call`)."""

    async def run(self: AsyncLedger, /, *args: _P.args, **kwargs: _P.kwargs) -> _T:
        return await self.call(method, self.ledger, *args, **kwargs)

    run.__name__ = method.__name__
    run.__doc__ = f"Await :meth:`Ledger.{method.__name__}` on the ledger thread."
    return run


class AsyncLedger:
    """A :class:`Ledger` whose calls run on one dedicated thread, in order, awaited.

    Args:
        ledger: the ledger; this object does not close it (its opener does, after
            :meth:`aclose`).
        deadline_s: how long an awaiter waits for its call, queueing included.
    """

    def __init__(self, ledger: Ledger, *, deadline_s: float = DEFAULT_DEADLINE_S) -> None:
        self.ledger = ledger
        self.deadline_s = deadline_s
        self._calls: queue.SimpleQueue[_Call | None] = queue.SimpleQueue()
        self._lock = threading.Lock()  # guards _closed against a put after the stop
        self._closed = False
        self._thread = threading.Thread(target=self._work, name="handrail-ledger", daemon=True)
        self._thread.start()

    @property
    def location(self) -> str:
        """Where the entries are (see :attr:`Ledger.location`)."""
        return self.ledger.location

    # -- the thread ----------------------------------------------------------------------

    def _work(self) -> None:
        while (item := self._calls.get()) is not None:
            future, call = item
            if not future.set_running_or_notify_cancel():
                continue
            try:
                result = call()
            except BaseException as exc:  # the caller's to judge; the thread serves the next call
                future.set_exception(exc)
            else:
                future.set_result(result)

    def submit(self, fn: Callable[_P, _T], /, *args: _P.args, **kwargs: _P.kwargs) -> concurrent.futures.Future[_T]:
        """Queue ``fn(*args, **kwargs)`` for the ledger thread, after every call queued
        before it; return its future without waiting.

        Raises:
            LedgerError: the ledger thread is stopped (after :meth:`aclose`).
        """
        future: concurrent.futures.Future[_T] = concurrent.futures.Future()
        with self._lock:
            if self._closed:
                raise LedgerError(f"ledger {self.location}: the ledger thread is stopped", reason="LEDGER_CLOSED")
            self._calls.put((future, functools.partial(fn, *args, **kwargs)))
        return future

    async def wait(self, future: concurrent.futures.Future[_T], deadline_s: float | None = None) -> _T:
        """The result of a queued call; cancelling this coroutine never cancels the call.

        Raises:
            LedgerError: the call's own (a storage failure), or, ``deadline_s`` (default
                :attr:`deadline_s`) after the call was queued, reason ``LEDGER_TIMEOUT``:
                the call may still run later.
        """
        limit = self.deadline_s if deadline_s is None else deadline_s
        try:
            return await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(future)), limit)
        except TimeoutError:
            raise LedgerError(
                f"ledger {self.location} did not answer within {limit:g} s", reason="LEDGER_TIMEOUT"
            ) from None

    async def call(self, fn: Callable[_P, _T], /, *args: _P.args, **kwargs: _P.kwargs) -> _T:
        """Run ``fn(*args, **kwargs)`` on the ledger thread, in turn, and await it
        (:meth:`submit`, then :meth:`wait`). Use it to make a check and the write it
        decides one step that no other ledger call can come between."""
        return await self.wait(self.submit(fn, *args, **kwargs))

    def post(self, fn: Callable[_P, _T], /, *args: _P.args, **kwargs: _P.kwargs) -> asyncio.Future[_T]:
        """Queue a call that nobody awaits (from a callback that cannot wait): it lands in
        the chain where it was queued. Its failure is logged; the returned future (of the
        running loop) tells whoever wants its outcome.
        """
        done = asyncio.wrap_future(self.submit(fn, *args, **kwargs))
        done.add_done_callback(functools.partial(self._posted, getattr(fn, "__name__", "call")))
        return done

    def _posted(self, name: str, done: asyncio.Future[Any]) -> None:
        if not done.cancelled() and done.exception() is not None:
            log.warning("ledger %s: a queued %s failed: %s", self.location, name, done.exception())

    async def aclose(self, timeout_s: float = 30.0) -> None:
        """Take no new call, wait (at most ``timeout_s``) for the queued ones, end the thread.

        A call still running after that (a ledger that does not answer) is abandoned to
        the daemon thread; what it leaves unwritten, recovery finds on the next start.
        """
        with self._lock:
            if self._closed:
                return
            drained: concurrent.futures.Future[None] = concurrent.futures.Future()
            self._calls.put((drained, lambda: None))
            self._calls.put(None)
            self._closed = True
        try:
            await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(drained)), timeout_s)
        except TimeoutError:
            log.error(
                "ledger %s: calls still queued after %g s at shutdown; an intent left without "
                "its result is marked UNKNOWN on the next start",
                self.location,
                timeout_s,
            )

    # -- the ledger's calls, awaited ---------------------------------------------------------

    append = _in_thread(Ledger.append)
    intent = _in_thread(Ledger.intent)
    result = _in_thread(Ledger.result)
    reconcile = _in_thread(Ledger.reconcile)
    lease_change = _in_thread(Ledger.lease_change)
    recover = _in_thread(Ledger.recover)
    unresolved = _in_thread(Ledger.unresolved)
    entries = _in_thread(Ledger.entries)
    tail = _in_thread(Ledger.tail)
    find_result_by_key = _in_thread(Ledger.find_result_by_key)
    find_intent_by_key = _in_thread(Ledger.find_intent_by_key)
