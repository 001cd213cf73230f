"""The caller's deadline, carried from each RPC to the store that does the call's work.

A client that gives up (its deadline passes) is answered by its own gRPC library; the
sidecar is not told, and without this module it would go on: wait its pool's 5 s for a
database connection, then decide, log an allow nobody receives and, worse, consume a
single-use grant for a caller that is gone (its retry is then denied). So the servicer
runs each unary handler inside :class:`CallDeadline`, which puts the call's deadline in a
context variable (each gRPC call runs in a context of its own), and the stores read it:

* **a wait for a shared part of the store** (a pooled PostgreSQL connection; SQLite's one
  writer, in this process or, through its busy timeout, the file's in another) ends a
  margin before the deadline (:func:`wait_s`): :class:`StoreBusyError`, UNAVAILABLE,
  naming the database. The margin (a tenth of the call's time, at most
  100 ms) is for the answer to reach the caller while it still listens: the store was
  saturated, which is passing, so the client may try another replica or fail closed
  knowing why;
* **once the deadline has passed, no statement is started** (:func:`start`):
  :class:`DeadlineExceededError`, DEADLINE_EXCEEDED: nobody is waiting for the answer,
  and the code is the one the caller's own library reported;
* **a state change's statements end at the deadline** where the driver allows it
  (:func:`left_ms`: PostgreSQL's ``statement_timeout``, set inside the change's
  transaction; a row lock waited on is the usual cause), rolled back: DEADLINE_EXCEEDED.
  On SQLite nothing waits once the writer is held;
* **once a state change has committed** (:func:`changed`) the deadline no longer applies
  to the call: what follows (the change's Watch event, the answer) is done as for a call
  without one, since a change made must also be told.

What is left is the commit itself: a change whose commit began before the deadline may
end after it (its ``COMMIT``, an fsync, and the answer's way back). The caller then hears
DEADLINE_EXCEEDED, fails closed, and the change stands, logged with its decision. That
window is a round trip and a disk flush, where it was the pool's 5 s, and no design that
commits and then answers can close it: the answer may always be lost after the commit.

Each call cut short this way is logged in one line (WARNING), never a traceback. Code
outside a call (the expiry thread, the command line) has no deadline and waits as before;
so does ``Watch``, a stream that lives as long as its caller.
"""

from __future__ import annotations

import logging
import math
import time
from contextvars import ContextVar
from typing import NamedTuple

from handrail.authz._errors import DeadlineExceededError, StoreBusyError

log = logging.getLogger("handrail.authz")

#: The most a wait keeps back from the deadline for the answer's way back.
MAX_MARGIN_S = 0.1

#: The least a bounded wait lasts (an idle connection or a free writer is still taken).
MIN_WAIT_S = 0.001

#: A remaining time above this is no deadline (gRPC's "infinite future").
_NO_DEADLINE_S = 1e8


class _Deadline(NamedTuple):
    at: float  # time.monotonic() when the caller gives up
    margin: float  # seconds a wait keeps back for the answer


#: A call without a deadline (or whose deadline was lifted); None: no call at all.
_NONE = _Deadline(math.inf, 0.0)

_CALL: ContextVar[_Deadline | None] = ContextVar("handrail_authz_deadline", default=None)


class CallDeadline:
    """Run an RPC's handler under its deadline: ``with CallDeadline(remaining_s, method):``
    (``remaining_s`` is gRPC's ``context.time_remaining()``; None: none). The handler is
    refused at once when it is spent, and every store call inside is bounded by it. A call
    cut short (:class:`DeadlineExceededError`, :class:`StoreBusyError`) is logged here in
    one line, naming ``method``. (A class, not a generator: it wraps every call, and costs
    a third as much.)

    Raises:
        DeadlineExceededError: on entering, the deadline was spent before the handler began.
    """

    __slots__ = ("_method", "_remaining_s", "_token")

    def __init__(self, remaining_s: float | None, method: str) -> None:
        self._remaining_s = remaining_s
        self._method = method

    def __enter__(self) -> None:
        remaining = self._remaining_s
        deadline = _NONE
        if remaining is not None and remaining < _NO_DEADLINE_S:
            deadline = _Deadline(time.monotonic() + remaining, min(MAX_MARGIN_S, remaining / 10))
        self._token = _CALL.set(deadline)
        if remaining is not None and remaining <= 0:
            exc = DeadlineExceededError("the caller's deadline passed before the call was served (nothing done)")
            self.__exit__(DeadlineExceededError, exc, None)
            raise exc

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        _CALL.reset(self._token)
        if isinstance(exc, (DeadlineExceededError, StoreBusyError)):
            log.warning("authz: %s cut short: %s", self._method, exc)


def in_call() -> bool:
    """Whether this thread is serving an RPC (with a deadline or not)."""
    return _CALL.get() is not None


def left_s() -> float | None:
    """Seconds until this call's deadline (negative once passed); None without one."""
    deadline = _CALL.get()
    return None if deadline is None or deadline is _NONE else deadline.at - time.monotonic()


def left_ms() -> int | None:
    """:func:`left_s` in whole milliseconds (rounded up), at least 1, for a timeout
    setting; None without a deadline."""
    left = left_s()
    return None if left is None else max(1, math.ceil(left * 1000))


def start(what: str) -> None:
    """Refuse to start ``what`` once this call's deadline has passed.

    Raises:
        DeadlineExceededError: it has.
    """
    deadline = _CALL.get()
    if deadline is not None and time.monotonic() >= deadline.at:
        raise DeadlineExceededError(f"the caller's deadline passed before {what} (not started)")


def wait_s(default_s: float, what: str) -> tuple[float, bool]:
    """How long to wait for a shared part of the store (a connection, the writer) to do
    ``what``: ``default_s``, or less to end a margin before this call's deadline; and
    whether the deadline set it.

    Raises:
        DeadlineExceededError: the deadline has passed (``what`` is not started).
    """
    deadline = _CALL.get()
    if deadline is None or deadline is _NONE:
        return default_s, False
    left = deadline.at - time.monotonic()
    if left <= 0:
        raise DeadlineExceededError(f"the caller's deadline passed before {what} (not started)")
    bounded = max(left - deadline.margin, MIN_WAIT_S)
    return (bounded, True) if bounded < default_s else (default_s, False)


def passed(slack_s: float = 0.0) -> bool:
    """Whether this call has a deadline and it has passed (or is within ``slack_s``)."""
    left = left_s()
    return left is not None and left <= slack_s


def changed() -> None:
    """This call has committed a state change: its deadline no longer applies to what it
    does next (publishing the change, reading its answer)."""
    if _CALL.get() is not None:
        _CALL.set(_NONE)
