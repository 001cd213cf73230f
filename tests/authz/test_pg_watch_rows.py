"""Watch across replicas against change-log rows this version did not write: a newer
replica's event (fields this version does not know) is delivered, a row no version can
read ends each stream as one that fell behind (its watcher resyncs) and the listener lives
on; and a schema whose name is too long for a NOTIFY channel still serves and watches.

Every test here needs the session's PostgreSQL server: all are slow-marked.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest

from handrail.authz import AuthzRpcError, AuthzServer, serve
from handrail.authz._pg import channel_for
from handrail.scenarios._postgres import PrivatePostgres, fresh_schema
from tests.authz.test_replicas import TARGET, Replicas, _Watch
from tests.authz.test_replicas import replicas as replicas  # the fixture

pytestmark = pytest.mark.slow

_FOREIGN_ROW = (
    "WITH s AS (UPDATE change_counter SET seq = seq + 1 WHERE id = 1 RETURNING seq)"
    " INSERT INTO changes (seq, at_ms, kind, target, change, dedupe, event)"
    " SELECT s.seq, 0, 'lease', %(target)s, 'takeover', NULL, %(event)s FROM s"
    " RETURNING seq, pg_notify(%(channel)s, seq::text)"
)


def _write_row(r: Replicas, event: str) -> int:
    """Append ``event`` to the change log as a replica of another version would."""
    server = r.servers[0]
    assert isinstance(server, AuthzServer)
    channel = channel_for(server.store.db.schema)  # type: ignore[attr-defined]
    with psycopg.connect(r.dsn, autocommit=True) as conn:
        row = conn.execute(_FOREIGN_ROW, {"target": TARGET, "event": event, "channel": channel}).fetchone()
    assert row is not None
    return int(row[0])


def _last_row(r: Replicas) -> str:
    with psycopg.connect(r.dsn, autocommit=True) as conn:
        row = conn.execute("SELECT event FROM changes ORDER BY seq DESC LIMIT 1").fetchone()
    assert row is not None
    return str(row[0])


def _until(watch: _Watch, change: str) -> object:
    while True:
        event = watch.next(timeout=5.0)
        if event.change == change:
            return event


def test_an_event_with_fields_this_version_does_not_know_is_delivered(replicas: Callable[..., Replicas]) -> None:
    r = replicas(2)
    op = r.client("op", 0)
    lease = op.take_over(TARGET, note="first")
    op.hand_back(TARGET, lease.epoch)
    newer = json.loads(_last_row(r))
    newer["added_by_a_newer_version"] = {"x": 1}
    if newer.get("lease"):
        newer["lease"]["also_new"] = True
    on_b = _Watch(r.client("exe", 1))
    try:
        time.sleep(0.2)
        seq = _write_row(r, json.dumps(newer))
        got = on_b.next(timeout=5.0)
        assert (got.seq, got.change) == (seq, newer["change"])
        op.take_over(TARGET, note="after it")  # and the listener lives on
        assert _until(on_b, "takeover") is not None
    finally:
        on_b.close()


def test_an_unreadable_row_ends_each_stream_as_behind_and_the_listener_lives_on(
    replicas: Callable[..., Replicas],
) -> None:
    r = replicas(2)
    client = r.client("exe", 1)
    stream = client.watch([TARGET])
    ended: list[BaseException] = []

    def drain() -> None:
        try:
            for _ in stream:
                pass
        except BaseException as exc:  # what ended it
            ended.append(exc)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    time.sleep(0.3)
    seq = _write_row(r, "not json")
    reader.join(10)
    assert not reader.is_alive() and len(ended) == 1
    assert isinstance(ended[0], AuthzRpcError)
    assert (ended[0].code_name, ended[0].reason) == ("RESOURCE_EXHAUSTED", "WATCH_OVERFLOW")
    # watching again from before it: a resync (the current state), then live events
    again = _Watch(client, since_seq=seq - 1)
    try:
        assert again.next(timeout=5.0).change == "resync"
        t0 = time.monotonic()
        r.client("op", 0).take_over(TARGET, note="after the bad row")
        assert time.monotonic() - t0 < 0.4  # its publisher was not left waiting on the bad row
        assert _until(again, "takeover") is not None
    finally:
        again.close()


def test_a_schema_name_too_long_for_a_channel_still_serves_and_watches(
    postgres: PrivatePostgres, tmp_path: Path
) -> None:
    name, dsn = fresh_schema(postgres.dsn, prefix="tenant_" + "x" * 45)
    assert len(f"handrail_authz_{name}") > 63  # pg_notify refuses it; LISTEN cuts it short
    assert len(channel_for(name)) <= 63
    r = Replicas.__new__(Replicas)
    try:
        Replicas.__init__(r, dsn, 2, tmp_path)
        on_b = _Watch(r.client("exe", 1))
        try:
            time.sleep(0.2)
            lease = r.client("op", 0).take_over(TARGET, note="long schema")  # was INTERNAL
            assert lease.holder_kind == "human" or lease.epoch > 0
            assert _until(on_b, "takeover") is not None
        finally:
            on_b.close()
    finally:
        r.close()
        with psycopg.connect(postgres.dsn, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{name}" CASCADE')


@pytest.mark.parametrize(
    ("schema", "plain"),
    [("public", True), ("t_0123abcd", True), ("Tenant_A", True), ("tenant-a", False), ("x" * 49, False)],
)
def test_channel_names(schema: str, plain: bool) -> None:
    channel = channel_for(schema)
    assert (channel == f"handrail_authz_{schema}") == plain
    assert len(channel.encode()) <= 63 and channel.replace("_", "").isalnum()
    assert channel_for(schema) == channel  # every replica of the schema agrees


def test_serve_never_echoes_a_store_password(tmp_path: Path) -> None:
    for store in ("host=db password=Sekr3t dbname=h", "postgress://u:Sekr3t@db/h"):
        with pytest.raises(ValueError, match=r"must be a postgresql:// URL") as caught:
            serve(tmp_path, "127.0.0.1:0", store=store)
        assert "Sekr3t" not in str(caught.value)
