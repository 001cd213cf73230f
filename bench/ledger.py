"""Ledger benchmark: durable intent+result pairs per second, verify and recovery of 1 M entries.

Usage: ``python bench/ledger.py [--entries N] [--pairs N] [--dir D] [--no-pg]``

(a) Durable pairs: every ``append`` returns only after the transaction holding its entry
    committed with ``synchronous=FULL`` (an fsync of the WAL). Measured with one writer
    (one Ledger, one SQLite connection) serving one session, then eight sessions at once
    (group commit folds their appends into shared transactions). Baseline, same run, same
    disk: plain ``sqlite3`` inserts of the same rows, one autocommit INSERT each, WAL and
    ``synchronous=FULL``, no hashing, no head, no indexes.
(b) ``verify`` of a ledger of ``--entries`` entries (default 1,000,000).
(c) ``recover`` on that ledger, where 1% of the intents lack a result; then ``unresolved``.
(d) On PostgreSQL (a private server started for the run, ``fsync`` and
    ``synchronous_commit`` on): intent and result latency of one session through the
    ledger (each append one statement, committed before it returns), and pairs per second
    of eight sessions (group commit). Baseline, same run, same server: the same rows as
    plain autocommit inserts through psycopg (prepared), into a table of the same
    columns with no index, no hashing and no head. Skipped (and said so) when no
    PostgreSQL binaries are installed, or with ``--no-pg``.

The big ledger is built with ``Ledger._bulk_load`` (one transaction, same hash chain; the
run checks that ``verify`` accepts it). The files go to ``--dir`` (default /var/tmp,
which is on disk where /tmp may be tmpfs).
"""

from __future__ import annotations

import argparse
import random
import shutil
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import emit, summary

from handrail.recorder import Ledger, canonical_json

PARAMS = {
    "action": "click",
    "ref": "e12",
    "role": "button",
    "name": "Turn off auto-renew",
    "fingerprint": "3f1c9a" * 8,
    "decision_id": "dec-0123456789",
}
MESSAGE = "done; the page was re-observed"
EXTRA = {"decision_id": "dec-0123456789"}


def pairs_one_session(ledger: Ledger, n: int) -> tuple[float, list[float], list[float]]:
    intents: list[float] = []
    results: list[float] = []
    start = time.perf_counter()
    for i in range(n):
        t0 = time.perf_counter()
        ledger.intent("s-one", f"a{i}", f"k{i}", "agent-1", 3, PARAMS)
        t1 = time.perf_counter()
        ledger.result("s-one", f"a{i}", f"k{i}", "agent-1", 3, "DONE", "ALLOW", "OBSERVED", True,
                      MESSAGE, EXTRA)  # fmt: skip
        results.append(time.perf_counter() - t1)
        intents.append(t1 - t0)
    return time.perf_counter() - start, intents, results


def pairs_many_sessions(ledger: Ledger, sessions: int, n: int) -> tuple[float, list[float]]:
    barrier = threading.Barrier(sessions + 1)
    latencies: list[list[float]] = [[] for _ in range(sessions)]

    def session(k: int) -> None:
        barrier.wait()
        for i in range(n):
            t0 = time.perf_counter()
            ledger.intent(f"s{k}", f"a{k}-{i}", f"k{i}", "agent-1", 3, PARAMS)
            ledger.result(f"s{k}", f"a{k}-{i}", f"k{i}", "agent-1", 3, "DONE", "ALLOW",
                          "OBSERVED", True, MESSAGE, EXTRA)  # fmt: skip
            latencies[k].append(time.perf_counter() - t0)

    threads = [threading.Thread(target=session, args=(k,)) for k in range(sessions)]
    for thread in threads:
        thread.start()
    barrier.wait()
    start = time.perf_counter()
    for thread in threads:
        thread.join()
    return time.perf_counter() - start, [s for per in latencies for s in per]


def baseline_pairs(path: Path, n: int) -> float:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute(
        "CREATE TABLE entries (seq INTEGER PRIMARY KEY, ts_ms, kind, session_id, action_id, "
        "idempotency_key, principal, principal_kind, epoch, body, prev_hash, entry_hash)"
    )
    intent = canonical_json({"params": PARAMS})
    result = canonical_json({"outcome": "DONE", "reason": "ALLOW", "evidence": "OBSERVED",
                             "execution_started": True, "message": MESSAGE, "extra": EXTRA})  # fmt: skip
    sql = "INSERT INTO entries VALUES (NULL, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
    start = time.perf_counter()
    for i in range(n):
        for kind, body in (("intent", intent), ("result", result)):
            conn.execute(sql, (time.time_ns() // 1_000_000, kind, "s-one", f"a{i}", f"k{i}",
                               "agent-1", "agent", 3, body, "0" * 64, "1" * 64))  # fmt: skip
    elapsed = time.perf_counter() - start
    conn.close()
    return n / elapsed


def postgres_figures(pairs: int, sessions: int) -> dict[str, Any]:
    """(d): the ledger on a private PostgreSQL server, and plain inserts beside it."""
    import psycopg

    from handrail.recorder import open_ledger
    from handrail.scenarios._postgres import PostgresUnavailable, private_postgres

    try:
        server = private_postgres(durable=True)
    except PostgresUnavailable as exc:
        print(f"PostgreSQL: skipped ({str(exc).splitlines()[0]})")
        return {}
    try:
        with open_ledger(server.dsn, executor_id="bench-one") as ledger:
            pairs_one_session(ledger, 50)  # warm: connections made, statements prepared
            _, intents, results = pairs_one_session(ledger, pairs)
        per = pairs // sessions
        with open_ledger(server.dsn, executor_id="bench-many") as ledger:
            elapsed, _ = pairs_many_sessions(ledger, sessions, per)
            assert ledger.verify().ok
        with psycopg.connect(server.dsn, autocommit=True) as conn:
            conn.execute("CREATE TABLE plain (LIKE ledger_entries)")
            sql = "INSERT INTO plain VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
            body = canonical_json({"params": PARAMS})
            inserts: list[float] = []
            for i in range(pairs + 50):
                t0 = time.perf_counter()
                conn.execute(sql, ("plain", i, time.time_ns() // 1_000_000, "intent", "s-one", f"a{i}", f"k{i}",
                                   "agent-1", "agent", 3, body, "0" * 64, "1" * 64), prepare=True)  # fmt: skip
                inserts.append(time.perf_counter() - t0)
            inserts = inserts[50:]
    finally:
        server.stop()
    intent_ms, insert_ms = statistics.median(intents) * 1000, statistics.median(inserts) * 1000
    print(f"PostgreSQL: plain autocommit INSERT p50 {insert_ms:.3f} ms; ledger intent p50 {intent_ms:.3f} ms "
          f"({intent_ms / insert_ms:.2f}x), result p50 {statistics.median(results) * 1000:.3f} ms; "
          f"{sessions} sessions {per * sessions / elapsed:.0f} pairs/s")  # fmt: skip
    return {
        **summary("pg_intent_one_session", intents),
        **summary("pg_result_one_session", results),
        **summary("pg_baseline_insert", inserts),
        "pg_intent_over_insert_p50": round(intent_ms / insert_ms, 2),
        "pg_durable_pairs_per_s": round(per * sessions / elapsed),
    }


def big_ledger_rows(
    entries: int, lacking: float, seed: int = 6
) -> Iterator[tuple[int, str, str, str, str, str, str, int, str]]:
    """Sessions of 48 actions; ``lacking`` of the intents have no result."""
    rng = random.Random(seed)
    ts = 1_700_000_000_000
    session_open = canonical_json({"target": "browser:shop", "start_url": "http://shop/"})
    done = canonical_json({"outcome": "DONE", "reason": "ALLOW", "evidence": "OBSERVED",
                           "execution_started": True, "message": MESSAGE, "extra": EXTRA})  # fmt: skip
    made = 0
    s = 0
    while made < entries:
        sid = f"s{s}"
        s += 1
        yield (ts, "session_open", sid, "", "", "agent-1", "agent", 3, session_open)
        made += 1
        for a in range(48):
            if made >= entries:
                return
            aid = f"{sid}-a{a}"
            params = canonical_json({"params": {**PARAMS, "ref": f"e{a}"}})
            yield (ts, "intent", sid, aid, f"k{a}", "agent-1", "agent", 3, params)
            made += 1
            if made < entries and rng.random() >= lacking:
                yield (ts, "result", sid, aid, f"k{a}", "agent-1", "agent", 3, done)
                made += 1
            ts += 3


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--pairs", type=int, default=2000, help="pairs per throughput run")
    parser.add_argument("--sessions", type=int, default=8)
    parser.add_argument("--dir", default="/var/tmp")
    parser.add_argument("--no-pg", action="store_true", help="skip (d), the ledger on PostgreSQL")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="handrail-bench-ledger-", dir=args.dir))
    try:
        return run(args, folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def run(args: argparse.Namespace, folder: Path) -> int:
    print(f"files in {folder}; synchronous=FULL, WAL")

    # (a) durable pairs per second
    base = baseline_pairs(folder / "baseline.sqlite", args.pairs)
    with Ledger(folder / "one.sqlite") as ledger:
        elapsed, intents, results = pairs_one_session(ledger, args.pairs)
        one = args.pairs / elapsed
        one_commits = ledger._commits
    per = args.pairs // args.sessions
    with Ledger(folder / "many.sqlite") as ledger:
        elapsed_many, pair_latency = pairs_many_sessions(ledger, args.sessions, per)
        many = per * args.sessions / elapsed_many
        many_commits = ledger._commits
        assert ledger.verify().ok
    print(f"baseline: plain sqlite3 autocommit inserts     {base:8.0f} pairs/s")
    print(f"ledger, 1 session (2 fsyncs per pair)          {one:8.0f} pairs/s  "
          f"({one / base:.2f}x baseline, {one_commits} commits)")  # fmt: skip
    print(f"ledger, {args.sessions} sessions, group commit              {many:8.0f} pairs/s  "
          f"({many / base:.2f}x baseline, {2 * per * args.sessions / many_commits:.1f} "
          f"entries per commit)")  # fmt: skip

    # (b) verify and (c) recovery of a big ledger
    big = folder / "big.sqlite"
    t0 = time.perf_counter()
    with Ledger(big) as ledger:
        ledger._bulk_load(big_ledger_rows(args.entries, lacking=0.01))
    build_s = time.perf_counter() - t0
    with Ledger(big) as ledger:
        t0 = time.perf_counter()
        report = ledger.verify()
        verify_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        recovered = ledger.recover()
        recover_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        again = ledger.recover()
        recover_again_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        unresolved = ledger.unresolved()
        unresolved_s = time.perf_counter() - t0
        size_mb = big.stat().st_size / 1e6
    print(f"built {report.count:,} entries ({size_mb:.0f} MB) in {build_s:.1f} s (bulk path)")
    print(f"verify: {verify_s:.2f} s, {report.message}; head file {report.head_file}")
    print(f"recover: {recover_s:.2f} s, {len(recovered):,} intents marked UNKNOWN; "
          f"again: {recover_again_s:.2f} s, {len(again)} more")  # fmt: skip
    print(f"unresolved: {unresolved_s:.2f} s, {len(unresolved):,} actions")

    # (d) on PostgreSQL
    pg = {} if args.no_pg else postgres_figures(min(args.pairs, 1000), args.sessions)

    figures = {
        "durable_pairs_per_s": round(many),
        "durable_pairs_per_s_one_session": round(one),
        "baseline_sqlite_pairs_per_s": round(base),
        "sessions": args.sessions,
        "entries_per_commit": round(2 * per * args.sessions / many_commits, 2),
        **summary("intent_one_session", intents),
        **summary("result_one_session", results),
        **summary("pair_group_commit", pair_latency),
        "entries": report.count,
        "verify_s": round(verify_s, 3),
        "recover_s": round(recover_s, 3),
        "recover_again_s": round(recover_again_s, 3),
        "unresolved_s": round(unresolved_s, 3),
        "recovered": len(recovered),
        "build_s": round(build_s, 1),
        **pg,
    }
    targets = {"durable_pairs_per_s": ">= 2000", "verify_s": "<= 5", "recover_s": "<= 5"}
    met = (
        report.ok
        and not again
        and len(unresolved) == len(recovered)
        and many >= 2000
        and verify_s <= 5
        and recover_s <= 5
    )
    emit("ledger", figures, targets, met)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
