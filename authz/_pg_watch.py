"""Watch across replicas: a change log in PostgreSQL, LISTEN/NOTIFY, and a hub per replica.

:class:`SharedEventHub` is the :class:`~._watch.EventHub` of a sidecar over PostgreSQL.
Publishing an event appends it to the ``changes`` table in one statement that takes the
next sequence number from ``change_counter`` (its row lock orders appends by commit, so a
reader that sees number *n* sees every number below it) and ``NOTIFY``\\ s the schema's
channel with that number alone (ids only: a payload is limited to 8000 bytes). Each
replica's listener thread holds one connection that ``LISTEN``\\ s, and on every
notification (and once a second, whatever happens) reads the log after the last number it
delivered, in order, to its local subscribers. So a change made through any replica
reaches the Watch streams of every replica, each stream in one order.

Nothing is lost across a reconnect: the log is durable and numbered, so the listener
catches up from its last number after it reconnects, and a client that reconnects (to any
replica) with ``since_seq`` gets the events after it from the log, or a ``resync`` when
the log no longer reaches back that far (:data:`~._pg_schema.CHANGE_LOG_KEEP` events are
kept). An expiry noticed by several replicas is told once: the log refuses a second event
with the same ``dedupe`` key.

A replica killed between committing a change and appending its event loses that event
(the change itself stands, and every check sees it); watchers then learn the state from
their next ``GetLease``, or from the next event on the target.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import secrets
import threading
from collections.abc import Iterable
from typing import Any

import psycopg

from handrail._dsn import connect_options, first_line
from handrail.authz._errors import StoreUnavailableError
from handrail.authz._models import ApprovalInfo, GrantInfo, LeaseInfo, WatchEventInfo
from handrail.authz._pg_db import PgDatabase
from handrail.authz._pg_schema import CHANGE_LOG_KEEP
from handrail.authz._watch import EventHub, Subscription, concerns

log = logging.getLogger("handrail.authz.pg")

#: How often the listener reads the log when no notification came, in seconds.
POLL_S = 1.0

#: How long a publisher waits for its own event to reach this replica's watchers, in seconds.
DELIVERY_WAIT_S = 0.5

#: How many events one read of the log takes.
BATCH = 1000

_APPEND = (
    "WITH s AS (UPDATE change_counter SET seq = seq + 1 WHERE id = 1"
    " AND (%(dedupe)s::text IS NULL OR NOT EXISTS (SELECT 1 FROM changes WHERE dedupe = %(dedupe)s))"
    " RETURNING seq)"
    " INSERT INTO changes (seq, at_ms, kind, target, change, dedupe, event)"
    " SELECT s.seq, %(at)s, %(kind)s, %(target)s, %(change)s, %(dedupe)s, %(event)s FROM s"
    " RETURNING seq, pg_notify(%(channel)s, seq::text)"
)


def event_json(event: WatchEventInfo, origin: str) -> str:
    """An event as the change log stores it (without its seq), with the replica it came from."""
    data = dataclasses.asdict(event)
    data.pop("seq")
    data["origin"] = origin
    return json.dumps(data, separators=(",", ":"))


def event_from_json(seq: int, text: str) -> tuple[WatchEventInfo, str]:
    """The event a change log row holds, and the replica that published it. Fields this
    version does not know (a newer replica's, during a rolling upgrade) are left out.

    Raises:
        ValueError, TypeError, KeyError: the row is not an event this version can read.
    """
    data: dict[str, Any] = _known(WatchEventInfo, json.loads(text), "origin", "lease", "grant", "approval")
    origin = str(data.pop("origin", ""))
    lease = data.pop("lease", None)
    grant = data.pop("grant", None)
    approval = data.pop("approval", None)
    return (
        WatchEventInfo(
            seq=seq,
            lease=LeaseInfo(**_known(LeaseInfo, lease)) if lease else None,
            grant=GrantInfo(**_tuples(_known(GrantInfo, grant))) if grant else None,
            approval=ApprovalInfo(**_tuples(_known(ApprovalInfo, approval))) if approval else None,
            **data,
        ),
        origin,
    )


def _known(cls: type, values: object, *extra: str) -> dict[str, Any]:
    """The items of ``values`` (a JSON object) that name fields of the dataclass ``cls``
    (or one of ``extra``)."""
    if not isinstance(values, dict):
        raise TypeError(f"expected a JSON object, not {type(values).__name__}")
    names = {f.name for f in dataclasses.fields(cls)} | set(extra)
    return {k: v for k, v in values.items() if k in names and k != "seq"}


def readable(seq: int, text: str) -> tuple[WatchEventInfo, str] | None:
    """:func:`event_from_json`, or None for a row this version cannot read at all (written
    by hand, or by a version whose events differ in kind), said in one warning."""
    try:
        return event_from_json(seq, text)
    except Exception as exc:  # whatever shape a foreign row has: the listener must live on
        log.warning("authz: change #%d of the change log cannot be read (%s); its watchers resync", seq, exc)
        return None


def _tuples(values: dict[str, Any]) -> dict[str, Any]:
    return {k: tuple(v) if isinstance(v, list) else v for k, v in values.items()}


def dedupe_key(fields: dict[str, Any]) -> str | None:
    """The key that tells one expiry once, whichever replicas notice it (None: no key)."""
    if fields.get("change") != "expire":
        return None
    kind = fields.get("kind")
    lease = fields.get("lease")
    if kind == "lease" and isinstance(lease, LeaseInfo):
        return f"lease:{lease.target}:{lease.epoch}:expire"  # a lease lapses once per epoch
    key = fields.get("grant_id") or fields.get("approval_id")
    return f"{kind}:{key}:expire" if key else None


class SharedEventHub(EventHub):
    """An :class:`EventHub` whose events go through the database's change log.

    Args:
        db: the store's database.
        channel: the NOTIFY channel (one per schema).

    Attributes:
        on_remote: called (on the listener thread) with each event another replica published.
        origin: this replica's id in the log.
    """

    def __init__(self, db: PgDatabase, channel: str) -> None:
        super().__init__(first_seq=1)
        self._db = db
        self._channel = channel
        self.origin = secrets.token_hex(8)
        row = db.run(lambda c: c.execute("SELECT seq FROM change_counter WHERE id = 1").fetchone(), idempotent=True)
        self._last = self._pushed = int(row[0]) if row else 0
        self._stop = threading.Event()
        self._delivered = threading.Condition()
        self._caught_up = threading.Event()
        self._listener = threading.Thread(target=self._listen, name="authz-watch-listener", daemon=True)
        self._listener.start()
        self._caught_up.wait(5.0)

    # --- publishing -----------------------------------------------------------------------

    def publish(self, **fields: Any) -> WatchEventInfo:
        """Append an event to the change log (delivered by the listeners of every replica,
        this one's included); its seq is 0 when an equal expiry was told already."""
        event = WatchEventInfo(seq=0, **fields)
        params = {
            "at": event.at_ms,
            "kind": event.kind,
            "target": event.target,
            "change": event.change,
            "dedupe": dedupe_key(fields),
            "event": event_json(event, self.origin),
            "channel": self._channel,
        }

        def append(conn: psycopg.Connection[Any]) -> int:
            try:
                row = conn.execute(_APPEND, params).fetchone()
            except psycopg.errors.UniqueViolation:
                return 0  # another replica told the same expiry first
            return int(row[0]) if row else 0

        try:
            seq = self._db.run(append, what=f"the change log's append of a {event.kind} {event.change} event")
        except StoreUnavailableError as exc:
            if not exc.logged:  # (a refusal is one line already, naming the event)
                log.warning("authz: a %s %s event could not be logged: %s", event.kind, event.change, exc)
            return event
        # This replica's watchers have it before the call that made the change answers (a
        # watcher that subscribes afterwards does not get it as news).
        with self._delivered:
            self._delivered.wait_for(lambda: self._pushed >= seq or self._stop.is_set(), DELIVERY_WAIT_S)
        return dataclasses.replace(event, seq=seq)

    # --- subscribing ----------------------------------------------------------------------

    def subscribe(self, targets: Iterable[str], since_seq: int = 0) -> Subscription:
        """A new subscription; with ``since_seq``, the logged events after it come first (or
        :attr:`Subscription.gap` when the log no longer reaches back that far)."""
        sub = Subscription(self, frozenset(targets))
        with self._lock:
            if self._closed:
                sub._closed = True
                return sub
            self._subs.append(sub)  # live events after `last` from now on
            last = self._last
        if 0 < since_seq < last:
            try:
                replay, oldest = self._read_log(since_seq, last)
            except StoreUnavailableError:
                replay, oldest = [], last + 1
            if oldest > since_seq + 1:
                sub.gap = True
            with sub._cond:
                sub._events.extendleft(reversed([e for e in replay if concerns(e, sub.targets)]))
        elif since_seq > last:  # ahead of this replica: another's event in flight, or never issued
            sub.gap = True  # a resync loses nothing either way (see _watch.EventHub.subscribe)
        return sub

    def _read_log(self, after: int, upto: int) -> tuple[list[WatchEventInfo], int]:
        """Logged events in ``(after, upto]`` and the oldest seq the log still has."""

        def read(conn: psycopg.Connection[Any]) -> tuple[list[tuple[int, str]], int | None]:
            oldest = conn.execute("SELECT min(seq) FROM changes").fetchone()
            rows = conn.execute(
                "SELECT seq, event FROM changes WHERE seq > %s AND seq <= %s ORDER BY seq", (after, upto)
            ).fetchall()
            return rows, (oldest[0] if oldest else None)

        rows, oldest = self._db.run(read, idempotent=True)
        decoded = [readable(int(seq), str(text)) for seq, text in rows]
        if None in decoded:  # an event no one can be told: the watcher resyncs instead
            return [], upto + 1
        return [d[0] for d in decoded if d is not None], int(oldest) if oldest is not None else upto + 1

    # --- the listener ---------------------------------------------------------------------

    def _listen(self) -> None:
        delay = 0.05
        while not self._stop.is_set():
            try:
                with psycopg.connect(
                    self._db.dsn,
                    autocommit=True,
                    connect_timeout=5,
                    fallback_application_name="handrail-authz-listener",
                    **connect_options(self._db.dsn),
                ) as conn:
                    conn.execute(f'LISTEN "{self._channel}"')
                    delay = 0.05
                    self._catch_up(conn)
                    self._caught_up.set()
                    polls = 0
                    while not self._stop.is_set():
                        for _ in conn.notifies(timeout=POLL_S, stop_after=1):
                            pass
                        self._catch_up(conn)
                        polls += 1
                        if polls % 600 == 0:
                            self._prune(conn)
            except Exception as exc:  # a lost connection, or a bug: the listener lives on
                if self._stop.is_set():
                    return
                if isinstance(exc, psycopg.Error):
                    # one line, without the password (libpq's reason for a refused TLS
                    # connection runs to two: a missing CA file, a certificate's host name)
                    reason = first_line(exc, self._db.dsn)
                    log.warning("authz: the watch listener lost its connection (%s); reconnecting", reason)
                else:
                    log.exception("authz: the watch listener failed; starting again")
                self._caught_up.set()
                self._stop.wait(delay)
                delay = min(delay * 2, 2.0)

    def _catch_up(self, conn: psycopg.Connection[Any]) -> None:
        while True:
            rows = conn.execute(
                "SELECT seq, event FROM changes WHERE seq > %s ORDER BY seq LIMIT %s", (self._last, BATCH)
            ).fetchall()
            for seq, text in rows:
                decoded = readable(int(seq), str(text))
                if decoded is None:
                    self._unreadable(int(seq))
                else:
                    self._deliver(*decoded)
            if len(rows) < BATCH:
                return

    def _unreadable(self, seq: int) -> None:
        """Pass change ``seq``, which no watcher can be told: each stream ends as one that fell
        behind (its client watches again with ``since_seq`` and gets a resync: the current
        state), and whoever waits for its delivery stops waiting."""
        with self._lock:
            if seq <= self._last:
                return
            self._last = seq
            subs = list(self._subs)
        for sub in subs:
            sub.fell_behind()
        with self._delivered:
            self._pushed = seq
            self._delivered.notify_all()

    def _deliver(self, event: WatchEventInfo, origin: str) -> None:
        with self._lock:
            if event.seq <= self._last:
                return
            self._last = event.seq
            self._recent.append(event)
            subs = list(self._subs)
        for sub in subs:
            if concerns(event, sub.targets):
                sub._push(event)
        with self._delivered:
            self._pushed = event.seq
            self._delivered.notify_all()
        if origin != self.origin and self.on_remote is not None:
            try:
                self.on_remote(event)
            except Exception:  # the listener must outlive a bad handler (a thread boundary)
                log.exception("authz: handling a remote %s event failed", event.kind)

    @staticmethod
    def _prune(conn: psycopg.Connection[Any]) -> None:
        conn.execute(
            "DELETE FROM changes WHERE seq <= (SELECT seq FROM change_counter WHERE id = 1) - %s", (CHANGE_LOG_KEEP,)
        )

    def close(self) -> None:
        """Stop the listener (waking it with a notification) and end every subscription."""
        self._stop.set()
        with contextlib.suppress(StoreUnavailableError):  # else it stops at its next poll
            self._db.run(lambda c: c.execute("SELECT pg_notify(%s, 'stop')", (self._channel,)))
        self._listener.join(POLL_S + 5)
        super().close()
