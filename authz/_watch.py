"""Pushing changes to watchers: an in-process hub with sequence numbers and a replay buffer.

The authorizer publishes an event after each change has committed; every subscriber whose
targets it concerns gets it on its own bounded queue. Sequence numbers start, per server
process, at the store's clock in microseconds, so they keep growing across restarts. The last
:data:`REPLAY_EVENTS` events are kept so that a watcher that reconnects with ``since_seq``
misses nothing; when the buffer no longer reaches back that far, the subscription says so
(:attr:`Subscription.gap`) and the caller sends the current state instead.
"""

from __future__ import annotations

import collections
import fnmatch
import itertools
import threading
from collections.abc import Callable, Iterable

from handrail.authz._models import WatchEventInfo

#: How many recent events are kept for ``since_seq`` replays.
REPLAY_EVENTS = 10_000

#: How many undelivered events a subscriber may have before it is cut off.
MAX_BACKLOG = 10_000


class SubscriptionClosed(Exception):
    """The hub closed, or the subscriber fell too far behind (``overflowed``)."""

    def __init__(self, overflowed: bool) -> None:
        super().__init__("watcher fell behind" if overflowed else "the sidecar is stopping")
        self.overflowed = overflowed


def concerns(event: WatchEventInfo, targets: frozenset[str]) -> bool:
    """Whether a subscriber of ``targets`` (empty: all) should see ``event``."""
    if not targets or not event.target:
        return True
    if event.target in targets:
        return True
    # a grant's target may be a pattern ("browser:*")
    return event.kind == "grant" and any(fnmatch.fnmatchcase(t, event.target) for t in targets)


class Subscription:
    """One watcher's queue. :meth:`get` blocks; :meth:`close` ends it from any thread."""

    def __init__(self, hub: EventHub, targets: frozenset[str]) -> None:
        self.targets = targets
        self.gap = False
        """The requested ``since_seq`` was older than the replay buffer."""
        self._hub = hub
        self._events: collections.deque[WatchEventInfo] = collections.deque()
        self._cond = threading.Condition()
        self._closed = False
        self._overflowed = False

    def _push(self, event: WatchEventInfo) -> None:
        with self._cond:
            if self._closed:
                return
            if len(self._events) >= MAX_BACKLOG:
                self._overflowed = self._closed = True
            else:
                self._events.append(event)
            self._cond.notify()

    def fell_behind(self) -> None:
        """End the subscription as one that fell behind: its watcher must watch again with
        ``since_seq`` (and is resynced where events cannot be replayed)."""
        with self._cond:
            self._overflowed = self._closed = True
            self._cond.notify_all()

    def get(self, timeout: float | None = None) -> WatchEventInfo | None:
        """The next event, or None after ``timeout`` seconds.

        Raises:
            SubscriptionClosed: the subscription or the hub was closed.
        """
        with self._cond:
            if not self._events and not self._closed:
                self._cond.wait(timeout)
            if self._events and not self._overflowed:
                return self._events.popleft()
            if self._closed:
                raise SubscriptionClosed(self._overflowed)
            return None

    def close(self) -> None:
        """Stop receiving; a blocked :meth:`get` raises."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._hub._unsubscribe(self)


class EventHub:
    """Fan-out of :class:`WatchEventInfo` to subscribers, in sequence order.

    Args:
        first_seq: the sequence number of the first event.
    """

    def __init__(self, first_seq: int) -> None:
        self._seq = itertools.count(first_seq)
        self._last = first_seq - 1
        self._lock = threading.Lock()
        self._recent: collections.deque[WatchEventInfo] = collections.deque(maxlen=REPLAY_EVENTS)
        self._subs: list[Subscription] = []
        self._closed = False
        self.on_remote: Callable[[WatchEventInfo], None] | None = None
        """Called with each event another replica published (a shared hub only)."""

    @property
    def last_seq(self) -> int:
        """The sequence number of the latest event (``first_seq - 1`` before any)."""
        return self._last

    def publish(self, **fields: object) -> WatchEventInfo:
        """Stamp an event with the next sequence number and deliver it."""
        with self._lock:
            seq = next(self._seq)
            event = WatchEventInfo(seq=seq, **fields)  # type: ignore[arg-type]
            self._last = seq
            self._recent.append(event)
            subs = list(self._subs)
        for sub in subs:
            if concerns(event, sub.targets):
                sub._push(event)
        return event

    def subscribe(self, targets: Iterable[str], since_seq: int = 0) -> Subscription:
        """A new subscription; with ``since_seq``, the buffered events after it come first.

        A ``since_seq`` past the last event this hub issued was never issued here: it came
        from another data dir, a restored copy, or a clock that went back at a restart.
        Waiting for the sequence to pass it would drop every change until then; the
        subscription starts with a resync instead (:attr:`Subscription.gap`)."""
        sub = Subscription(self, frozenset(targets))
        with self._lock:
            if self._closed:
                sub._closed = True
                return sub
            if since_seq > 0 and since_seq < self._last:
                oldest = self._recent[0].seq if self._recent else self._last + 1
                if oldest > since_seq + 1:
                    sub.gap = True
                for event in self._recent:
                    if event.seq > since_seq and concerns(event, sub.targets):
                        sub._events.append(event)
            elif since_seq > self._last:  # never issued here: see the docstring
                sub.gap = True
            self._subs.append(sub)
        return sub

    def _unsubscribe(self, sub: Subscription) -> None:
        with self._lock:
            if sub in self._subs:
                self._subs.remove(sub)

    @property
    def subscribers(self) -> int:
        """How many subscriptions are open."""
        return len(self._subs)

    def close(self) -> None:
        """End every subscription (server stop)."""
        with self._lock:
            self._closed = True
            subs, self._subs = self._subs, []
        for sub in subs:
            with sub._cond:
                sub._closed = True
                sub._cond.notify_all()
