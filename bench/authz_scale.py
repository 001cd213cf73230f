"""Benchmark: the sidecar on SQLite, on PostgreSQL, and three PostgreSQL replicas behind the
client's balancing, against a bare gRPC echo, in one run.

The state is ``authz_check.py``'s: 10,000 grants (500 agents x 20 targets), 200 Cedar
policies, the 50 active agents holding their targets' leases; the checks are its mix (all
allowed, every one logged before it is answered). A private PostgreSQL server is started for
the run with its durable settings (``fsync`` on, ``synchronous_commit`` on for state
changes; a plain decision's commit does not wait for the disk, see ``docs/deploy.md``).

Every server is kept on one CPU, as ``docs/deploy.md`` advises for a small host: the echo,
the SQLite sidecar and the first replica on the last CPU this process may use (the echo
with ``sched_setaffinity``, the sidecars with ``--cpus``), the other replicas on the other
CPUs in turn. While it times a pair kept on that CPU, the timing thread is kept on the
others (``client_cpus``), so that the scheduler never runs the client on the server's CPU:
where it ran it was left to chance, and between blocks of one run it moved the echo's p50
from ~100 to ~200 us on a host whose CPUs wake fast. The three replicas, on every CPU, are
timed from anywhere, and so is the checks/s client. So that the setting's effect is on
record, the SQLite sidecar and one PostgreSQL sidecar are measured again left to the
scheduler, against a second echo left there too (``*_unpinned_*``); the targets are judged
on the kept pair, each check against the echo served the same way. Not judged either: the floor,
the echo kept on the sidecar's CPU and writing one row per call to the same PostgreSQL (one
prepared INSERT, ``pg_floor_*``: what one database round trip costs any service served
so); that check with PostgreSQL kept on the sidecar's CPU too; and a bare ``SELECT 1`` to a
backend on the caller's CPU and on another (``pg_db_on_sidecar_cpu_*``, ``pg_select1_*``).

Figures, each configuration measured in blocks alternating with its echo so that drift
hits both:

* ``Check`` p50/p99 over raw bytes (as ``authz_check.py``) for one SQLite sidecar, one
  PostgreSQL sidecar, and three PostgreSQL replicas called round robin;
* checks/s with ``--threads`` client threads through ``AuthzClient`` (the balancing
  client) for one PostgreSQL replica and for three;
* lease operations/s on PostgreSQL (acquire, renew, take over, hand back; each one
  compare-and-set statement), through the sidecar;
* how long a takeover made through one replica takes to reach the Watch streams of all
  three (p50/p99).
* not judged: WhoAmI/s of an agent's token through one replica, and the CPU each takes
  (client, replica, PostgreSQL): the check of its caller's token that an executor makes
  on every agent call, beside the checks (``pg1_whoami_per_s``, ``pg1_cpu_*_per_whoami``).

Targets: the SQLite sidecar's Check adds <= 150 us at p50 over the echo; the PostgreSQL
sidecar's p50 <= 2x the echo's; three replicas serve >= 1.5x the checks/s of one "or say
why not". For the last, the CPU that the run's own processes (this client, the sidecars,
PostgreSQL and its backends) spend per check is read from ``/proc`` during both checks/s
runs, with how busy the machine's cores were. At that cost per check the cores can serve
at most ``cores / cpu_per_check`` checks/s; when 1.5x one replica's rate is above that
ceiling, no number of replicas reaches the target on this machine, and the target is
reported "explained, not met" in ``target_status`` and left out of ``met`` (which then
judges the other two); ``met_leaves_out`` names it. A miss the CPU does not explain stays
"not met" and makes ``met`` false.

Run: ``flock /tmp/handrail-bench.lock python bench/authz_scale.py [--quick]``.
"""

from __future__ import annotations

import argparse
import os
import queue
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import emit, pct
from _pg_place import CpuMeter, client_cpus, place_postgres, round_trip_us, timing_thread_on
from authz_check import (
    ACTIVE_AGENTS,
    N_AGENTS,
    N_TARGETS,
    ORIGIN,
    _timed,
    check_requests,
    seed,
    start_echo,
    sustained,
    write_policies,
)

from handrail._cpus import span
from handrail.authz import AuthzClient, GrantInfo, PgStore, WatchEventInfo
from handrail.authz._lease_changes import Acquire
from handrail.proto.authz.v1 import authz_pb2 as pb
from handrail.scenarios import ServerProcess, start_server
from handrail.scenarios._postgres import private_postgres

READY = "handrail-authz listening on "

#: What ``CpuMeter.measure`` reports per operation, as printed in the figures.
CPU_KEYS = ("client_us", "sidecars_us", "postgres_us", "total_us")


def seed_pg(dsn: str) -> dict[str, str]:
    """The same principals, grants and leases as ``authz_check.seed``, in PostgreSQL."""
    tokens: dict[str, str] = {}
    with PgStore(dsn, pool_size=2) as store:
        tokens["exe"] = store.add_principal("bench-exe", "executor")
        tokens["op"] = store.add_principal("bench-op", "operator")
        for a in range(N_AGENTS):  # a check acts only for an agent that exists and is live
            token = store.add_principal(f"agent-{a}", "agent")
            tokens.setdefault("agent", token)
        grants = [
            GrantInfo(
                "",
                f"agent-{a}",
                f"browser:{a}-{t}",
                ("submit", "input", "navigate", "delete") if t == 0 else ("submit", "input", "navigate"),
                (ORIGIN,),
                note="bench",
            )
            for a in range(N_AGENTS)
            for t in range(N_TARGETS)
        ]
        store.add_grants(grants, "bench-op")
        for a in range(ACTIVE_AGENTS):
            store.change_lease(f"browser:{a}-0", Acquire(f"agent-{a}", 3_600_000))
    return tokens


def serve_args(policies: Path, *where: str, cpu: int | None = None) -> list[str]:
    pinned = [] if cpu is None else ["--cpus", str(cpu)]
    return [
        "authz", "serve", *where, "--listen", "127.0.0.1:0", "--policies", str(policies), "--log-level", "WARNING",
        *pinned,
    ]  # fmt: skip


def server_cpus() -> list[int]:
    """The CPUs the servers are kept on, the first for the echo, the SQLite sidecar and the
    first replica, the others in turn for the other replicas: the last CPU this process may
    use first (the client runs anywhere)."""
    return sorted(os.sched_getaffinity(0), reverse=True)


def raw_call(address: str, method: str, token: str) -> Callable[[bytes], bytes]:
    channel = grpc.insecure_channel(address)
    stub = channel.unary_unary(method)
    metadata = (("authorization", f"Bearer {token}"),)

    def call(payload: bytes) -> bytes:
        return stub(payload, metadata=metadata, timeout=5)  # type: ignore[no-any-return]

    return call


def round_robin(calls: list[Callable[[bytes], bytes]]) -> Callable[[bytes], bytes]:
    turn = [0]

    def call(payload: bytes) -> bytes:
        turn[0] += 1
        return calls[turn[0] % len(calls)](payload)

    return call


def latency(
    echo: Callable[[bytes], bytes],
    check: Callable[[bytes], bytes],
    payloads: list[bytes],
    samples: int,
    *,
    checks: bool = True,
    client: set[int] | None = None,
) -> tuple[list[float], list[float]]:
    """Alternating blocks of echo and Check (``checks`` False: another echo), timed from a
    thread kept on ``client`` (None: anywhere); both sample lists."""
    for p in payloads[:200]:
        answer = check(p)
        if checks and not (reply := pb.CheckResponse.FromString(answer)).allow:
            raise SystemExit(f"the bench check is refused: {reply}")
        if not checks and answer != p:
            raise SystemExit("the floor does not echo its request")
    echo_s: list[float] = []
    check_s: list[float] = []
    block = 500
    with timing_thread_on(client):
        _timed(echo, payloads, 300, 0)
        _timed(check, payloads, 300, 0)
        for start in range(0, samples, block):
            echo_s += _timed(echo, payloads, block, start)
            check_s += _timed(check, payloads, block, start)
    return echo_s, check_s


def through_client(
    address: str,
    token: str,
    ask: Callable[[AuthzClient, bytes], object],
    payloads: list[bytes],
    threads: int,
    seconds: float,
) -> float:
    """Calls/s of ``ask`` through the balancing client (``AuthzClient``, one per thread),
    ``threads`` at a time."""

    def make() -> Callable[[bytes], bytes]:
        client = AuthzClient(address, token, timeout_s=5.0)

        def call(payload: bytes) -> bytes:
            ask(client, payload)
            return payload

        return call

    return sustained(make, payloads, threads, seconds)


def client_rate(addresses: str, token: str, threads: int, seconds: float) -> float:
    """Checks/s through the balancing client, ``threads`` at a time."""

    def check(client: AuthzClient, payload: bytes) -> object:
        a = payload[0] % ACTIVE_AGENTS
        return client.check(
            f"agent-{a}", f"browser:{a}-0", 1, "submit", url=f"{ORIGIN}/account", element_role="button",
            element_name="Button 1",
        )  # fmt: skip

    return through_client(addresses, token, check, [bytes([i]) for i in range(ACTIVE_AGENTS)], threads, seconds)


def token_rate(address: str, exe_token: str, agent_token: str, threads: int, seconds: float) -> float:
    """WhoAmI/s of an agent's token through the balancing client: the check an executor
    makes of its caller's token on every call (``GuardedExecutor.session_for``)."""
    return through_client(address, exe_token, lambda c, _: c.who_am_i(token=agent_token), [b"."], threads, seconds)


def lease_rate(address: str, exe_token: str, op_token: str, threads: int, seconds: float) -> float:
    """Lease operations/s through one PostgreSQL replica: acquire, renew, take over, hand back."""
    ops = [0] * threads
    failed: list[BaseException] = []
    stop = threading.Event()

    def worker(w: int) -> None:
        exe = AuthzClient(address, exe_token, timeout_s=5.0)
        op = AuthzClient(address, op_token, timeout_s=5.0)
        target = f"browser:{w}-1"  # agent-w holds a grant on it (only a grant holder takes a lease)
        try:
            while not stop.is_set():
                lease = exe.acquire(target, holder=f"agent-{w}", ttl_ms=60_000)
                exe.renew(target, lease.epoch, holder=f"agent-{w}", ttl_ms=60_000)
                human = op.take_over(target, ttl_ms=60_000)
                op.hand_back(target, human.epoch)
                ops[w] += 4
        except Exception as exc:
            failed.append(exc)
        finally:
            exe.close()
            op.close()

    pool = [threading.Thread(target=worker, args=(w,)) for w in range(threads)]
    t0 = time.perf_counter()
    for t in pool:
        t.start()
    time.sleep(seconds)
    stop.set()
    for t in pool:
        t.join()
    if failed:
        raise SystemExit(f"a lease operation failed: {failed[0]}")
    return sum(ops) / (time.perf_counter() - t0)


def takeover_reach(addresses: list[str], token_op: str, token_exe: str, rounds: int) -> list[float]:
    """Seconds from just before a takeover is sent (round robin over the replicas) to the
    moment the last of the three replicas' Watch streams delivers it."""
    arrived: list[queue.Queue[WatchEventInfo]] = [queue.Queue() for _ in addresses]
    streams = []
    for i, address in enumerate(addresses):
        client = AuthzClient(address, token_exe, timeout_s=5.0)
        stream = client.watch(["reach:0"])

        def pump(stream: object = stream, q: queue.Queue[WatchEventInfo] = arrived[i]) -> None:
            try:
                for event in stream:  # type: ignore[attr-defined]
                    q.put(event)
            except Exception:
                return

        threading.Thread(target=pump, daemon=True).start()
        streams.append((client, stream))
    time.sleep(0.5)
    ops = [AuthzClient(a, token_op, timeout_s=5.0) for a in addresses]
    reach: list[float] = []
    try:
        for r in range(rounds):
            t0 = time.perf_counter()
            lease = ops[r % 3].take_over("reach:0", ttl_ms=60_000)
            for q in arrived:
                while True:
                    event = q.get(timeout=10)
                    if event.change == "takeover" and event.lease is not None and event.lease.epoch == lease.epoch:
                        break
            reach.append(time.perf_counter() - t0)
            ops[(r + 1) % 3].hand_back("reach:0", lease.epoch)
    finally:
        for client, stream in streams:
            stream.close()
            client.close()
        for c in ops:
            c.close()
    return reach


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="fewer samples (a smoke run)")
    parser.add_argument("--samples", type=int, default=0)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args()
    samples = args.samples or (1000 if args.quick else 5000)
    seconds = 1.5 if args.quick else args.seconds
    rounds = 50 if args.quick else 200

    tmp = Path(tempfile.mkdtemp(prefix="authz-scale-"))
    procs: list[ServerProcess] = []
    echo_proc: subprocess.Popen[str] | None = None
    free_echo_proc: subprocess.Popen[str] | None = None
    floor_proc: subprocess.Popen[str] | None = None
    pg = None
    figures: dict[str, Any] = {}
    tokens: dict[str, str] = {}
    try:
        policies = write_policies(tmp / "policies")
        cpus = server_cpus()
        client = client_cpus(cpus[0])
        echo_proc, echo_address = start_echo({cpus[0]})
        free_echo_proc, free_echo_address = start_echo()
        payloads = check_requests()

        # --- one SQLite sidecar: kept on one CPU (--cpus), then left to the scheduler -------
        sqlite_tokens = seed(tmp / "data")
        sq_where = ("--data-dir", str(tmp / "data"))
        echo = raw_call(echo_address, "/bench.Echo/Echo", sqlite_tokens["exe"])
        free_echo = raw_call(free_echo_address, "/bench.Echo/Echo", sqlite_tokens["exe"])
        sqlite = start_server("authz-sqlite", serve_args(tmp / "policies", *sq_where, cpu=cpus[0]), ready_prefix=READY)
        procs.append(sqlite)
        e_sq, c_sq = latency(
            echo,
            raw_call(sqlite.address, "/handrail.authz.v1.Authz/Check", sqlite_tokens["exe"]),
            payloads,
            samples,
            client=client,
        )
        sqlite_rate = client_rate(sqlite.address, sqlite_tokens["exe"], args.threads, seconds)
        sqlite.stop()
        procs.remove(sqlite)
        sqlite = start_server("authz-sqlite-free", serve_args(tmp / "policies", *sq_where), ready_prefix=READY)
        procs.append(sqlite)
        e_sqf, c_sqf = latency(
            free_echo, raw_call(sqlite.address, "/handrail.authz.v1.Authz/Check", sqlite_tokens["exe"]), payloads,
            samples,
        )  # fmt: skip
        sqlite_free_rate = client_rate(sqlite.address, sqlite_tokens["exe"], args.threads, seconds)
        sqlite.stop()
        procs.remove(sqlite)

        # --- PostgreSQL: one sidecar, then three replicas ----------------------------------
        pg = private_postgres(durable=True)
        dsn = pg.dsn
        t0 = time.perf_counter()
        tokens.update(seed_pg(dsn))
        print(f"seeded PostgreSQL with {N_AGENTS * N_TARGETS} grants in {time.perf_counter() - t0:.1f} s")
        replicas = [
            start_server(
                f"authz-pg{i}",
                serve_args(tmp / "policies", "--store", dsn, cpu=cpus[i % len(cpus)]),
                ready_prefix=READY,
            )
            for i in range(3)
        ]
        procs += replicas
        one = replicas[0].address
        echo = raw_call(echo_address, "/bench.Echo/Echo", tokens["exe"])
        one_check = raw_call(one, "/handrail.authz.v1.Authz/Check", tokens["exe"])
        e_pg, c_pg = latency(echo, one_check, payloads, samples, client=client)
        # Not judged: the floor, an echo served the same way that writes one row per call.
        floor_proc, floor_address = start_echo({cpus[0]}, insert_dsn=dsn)
        floor = raw_call(floor_address, "/bench.Echo/Echo", tokens["exe"])
        e_fl, c_fl = latency(echo, floor, payloads, samples, checks=False, client=client)
        floor_proc.kill()
        # Not judged: how much of that is this machine's cost of a hop to another CPU. The
        # same check with the database kept on the sidecar's CPU, and a bare round trip.
        assert pg.proc is not None
        everywhere = os.sched_getaffinity(pg.proc.pid)
        placed = place_postgres(pg.proc.pid, {cpus[0]})
        if placed:
            e_pgc, c_pgc = latency(echo, one_check, payloads, samples, client=client)
            place_postgres(pg.proc.pid, everywhere)
            other = next((c for c in cpus if c != cpus[0]), cpus[0])
            hops = {"same": round_trip_us(dsn, cpus[0], cpus[0]), "other": round_trip_us(dsn, cpus[0], other)}
        three = round_robin([raw_call(r.address, "/handrail.authz.v1.Authz/Check", tokens["exe"]) for r in replicas])
        e_pg3, c_pg3 = latency(echo, three, payloads, samples)
        all3 = ",".join(r.address for r in replicas)
        assert pg.proc is not None
        meter = CpuMeter([r.proc.pid for r in replicas], pg.proc.pid)
        pg1_rate, pg1_cpu = meter.measure(lambda: client_rate(one, tokens["exe"], args.threads, seconds))
        pg3_rate, pg3_cpu = meter.measure(lambda: client_rate(all3, tokens["exe"], args.threads, seconds))
        echo_rate = sustained(
            lambda: raw_call(echo_address, "/bench.Echo/Echo", tokens["exe"]), payloads, args.threads, seconds
        )
        leases = lease_rate(one, tokens["exe"], tokens["op"], 4, seconds)
        meter = CpuMeter([replicas[0].proc.pid], pg.proc.pid)
        whoami_rate, whoami_cpu = meter.measure(
            lambda: token_rate(one, tokens["exe"], tokens["agent"], args.threads, seconds)
        )
        reach = takeover_reach([r.address for r in replicas], tokens["op"], tokens["exe"], rounds)
        for replica in replicas:
            replica.stop()
            procs.remove(replica)
        free = start_server("authz-pg-free", serve_args(tmp / "policies", "--store", dsn), ready_prefix=READY)
        procs.append(free)
        free_echo = raw_call(free_echo_address, "/bench.Echo/Echo", tokens["exe"])
        e_pgf, c_pgf = latency(
            free_echo, raw_call(free.address, "/handrail.authz.v1.Authz/Check", tokens["exe"]), payloads, samples
        )
        pg_free_rate = client_rate(free.address, tokens["exe"], args.threads, seconds)
        with PgStore(dsn, pool_size=1) as store:
            logged = store.count_decisions()
    finally:
        for proc in procs:
            proc.stop()
        for echo_server in (echo_proc, free_echo_proc, floor_proc):
            if echo_server is not None:
                echo_server.kill()
                echo_server.wait()
                if echo_server.stdout is not None:
                    echo_server.stdout.close()
        if pg is not None:
            pg.stop()
        shutil.rmtree(tmp, ignore_errors=True)

    def us(x: float) -> float:
        return round(x * 1e6, 1)

    echo_all = e_sq + e_pg  # the judged pairs' echo
    figures["echo_p50_us"] = us(statistics.median(echo_all))
    figures["echo_p99_us"] = us(pct(echo_all, 99))
    free = (("sqlite_unpinned", e_sqf, c_sqf), ("pg_unpinned", e_pgf, c_pgf))
    for name, e_s, c_s in (("sqlite", e_sq, c_sq), ("pg", e_pg, c_pg), ("pg3", e_pg3, c_pg3), *free):
        figures[f"{name}_check_p50_us"] = us(statistics.median(c_s))
        figures[f"{name}_check_p99_us"] = us(pct(c_s, 99))
        figures[f"{name}_echo_p50_us"] = us(statistics.median(e_s))
        figures[f"{name}_added_p50_us"] = us(statistics.median(c_s) - statistics.median(e_s))
        figures[f"{name}_p50_ratio"] = round(statistics.median(c_s) / statistics.median(e_s), 3)
    figures["sqlite_checks_per_s"] = round(sqlite_rate)
    figures["sqlite_unpinned_checks_per_s"] = round(sqlite_free_rate)
    figures["pg1_checks_per_s"] = round(pg1_rate)
    figures["pg1_unpinned_checks_per_s"] = round(pg_free_rate)
    figures["pg3_checks_per_s"] = round(pg3_rate)
    figures["pg3_over_pg1"] = round(pg3_rate / pg1_rate, 3)
    for name, cpu in (("pg1", pg1_cpu), ("pg3", pg3_cpu)):
        for key in CPU_KEYS:
            figures[f"{name}_cpu_{key}_per_check"] = round(cpu[key], 1)
        figures[f"{name}_own_cpu_share"] = round(cpu["own_share"], 3)
        figures[f"{name}_machine_busy"] = round(cpu["machine_busy"], 3)
    cores = os.cpu_count() or 1
    # The most checks/s the machine's cores could serve at the CPU cost per check measured
    # with three replicas, if the client, the replicas and PostgreSQL had every core to
    # themselves. When 1.5x one replica's rate is above it, no placement of work reaches
    # the target on this machine: the target is explained (with these figures), not met.
    ceiling = cores / (pg3_cpu["total_us"] / 1e6)
    figures["pg3_cpu_ceiling_per_s"] = round(ceiling)
    figures["echo_per_s"] = round(echo_rate)
    figures["pg_floor_p50_us"] = us(statistics.median(c_fl))
    figures["pg_floor_p50_ratio"] = round(statistics.median(c_fl) / statistics.median(e_fl), 3)
    # What the 2x target leaves a check above the floor: its decision, its record and the
    # condition its insert judges all fit in this, or the target is missed. For scale, the
    # SQLite sidecar makes the same decision with no round trip (its added time).
    figures["pg_room_over_floor_us"] = us(2 * statistics.median(e_fl) - statistics.median(c_fl))
    if placed:
        figures["pg_db_on_sidecar_cpu_check_p50_us"] = us(statistics.median(c_pgc))
        figures["pg_db_on_sidecar_cpu_p50_ratio"] = round(statistics.median(c_pgc) / statistics.median(e_pgc), 3)
        figures["pg_select1_same_cpu_us"] = round(hops["same"], 1)
        figures["pg_select1_other_cpu_us"] = round(hops["other"], 1)
    figures["pg_lease_ops_per_s"] = round(leases)
    figures["pg1_whoami_per_s"] = round(whoami_rate)
    for key in CPU_KEYS:
        figures[f"pg1_cpu_{key}_per_whoami"] = round(whoami_cpu[key], 1)
    figures["takeover_to_all_watches_p50_ms"] = round(statistics.median(reach) * 1000, 2)
    figures["takeover_to_all_watches_p99_ms"] = round(pct(reach, 99) * 1000, 2)
    figures["client_threads"] = args.threads
    figures["samples"] = samples
    figures["grants"] = N_AGENTS * N_TARGETS
    figures["policies"] = policies
    figures["pg_decisions_logged"] = logged
    figures["cores"] = cores
    figures["servers_on_cpus"] = [cpus[i % len(cpus)] for i in range(3)]
    figures["timed_from_cpus"] = sorted(client) if client is not None else None
    targets = {"sqlite_added_p50_us_max": 150, "pg_p50_ratio_max": 2.0, "pg3_over_pg1_min": 1.5}
    status = {
        "sqlite_added_p50_us_max": "met" if figures["sqlite_added_p50_us"] <= 150 else "not met",
        "pg_p50_ratio_max": "met" if figures["pg_p50_ratio"] <= 2.0 else "not met",
        "pg3_over_pg1_min": "met" if figures["pg3_over_pg1"] >= 1.5 else "not met",
    }
    if status["pg3_over_pg1_min"] == "not met" and 1.5 * pg1_rate > ceiling:
        status["pg3_over_pg1_min"] = "explained, not met"
    # ``met`` judges the targets this machine can judge: an explained one is left out of it
    # (and stays "explained, not met" in target_status).
    met = all(v == "met" for v in status.values() if v != "explained, not met")
    figures["target_status"] = status
    figures["met_leaves_out"] = [k for k, v in status.items() if v == "explained, not met"]
    print(
        f"each server kept on one CPU (--cpus; the echo, the SQLite sidecar and replica 0 on CPU {cpus[0]}), the"
        f" targets judged there, timed from {'anywhere' if client is None else 'CPU ' + span(frozenset(client))};"
        " the 'anywhere' rows: the same sidecars left to the scheduler, against an echo left there too"
    )
    print(
        f"echo              p50 {figures['echo_p50_us']:7.0f} us  p99 {figures['echo_p99_us']:7.0f} us  {echo_rate:6.0f}/s"
    )
    labels = (("sqlite", "SQLite sidecar"), ("pg", "PostgreSQL, one"), ("pg3", "PostgreSQL, three"))
    frees = (("sqlite_unpinned", "SQLite, anywhere"), ("pg_unpinned", "PostgreSQL, anyw."))
    for name, label in (*labels, *frees):
        print(
            f"{label:17} p50 {figures[f'{name}_check_p50_us']:7.0f} us  p99 {figures[f'{name}_check_p99_us']:7.0f} us"
            f"  adds {figures[f'{name}_added_p50_us']:5.0f} us at p50 (ratio {figures[f'{name}_p50_ratio']:.2f})"
        )
    print(
        f"checks/s through AuthzClient, {args.threads} threads: SQLite {sqlite_rate:.0f} (anywhere"
        f" {sqlite_free_rate:.0f}), PostgreSQL one {pg1_rate:.0f} (anywhere {pg_free_rate:.0f}), three"
        f" {pg3_rate:.0f} ({figures['pg3_over_pg1']:.2f}x)"
    )
    for label, cpu in (("one replica", pg1_cpu), ("three replicas", pg3_cpu)):
        print(
            f"CPU per check, {label}: {cpu['total_us']:.0f} us (client {cpu['client_us']:.0f}, sidecars"
            f" {cpu['sidecars_us']:.0f}, PostgreSQL {cpu['postgres_us']:.0f}); this run used"
            f" {cpu['own_share']:.0%} of {cores} cores, the machine's cores were {cpu['machine_busy']:.0%} busy"
        )
    print(
        f"not judged: an echo served the same way that also writes one row per call (one prepared INSERT):"
        f" p50 {figures['pg_floor_p50_us']:.0f} us (ratio {figures['pg_floor_p50_ratio']:.2f}), the floor of any"
        " service that logs a row per call here; the PostgreSQL sidecar's check is above it by"
        f" {figures['pg_check_p50_us'] - figures['pg_floor_p50_us']:.0f} us; the 2x target leaves a check"
        f" {figures['pg_room_over_floor_us']:.0f} us above it for its decision, its record and its insert's"
        f" condition (the SQLite sidecar's decision, with no round trip, adds {figures['sqlite_added_p50_us']:.0f} us)"
    )
    if placed:
        print(
            f"not judged: with PostgreSQL kept on the sidecar's CPU too, the check's p50 is"
            f" {figures['pg_db_on_sidecar_cpu_check_p50_us']:.0f} us (ratio {figures['pg_db_on_sidecar_cpu_p50_ratio']:.2f});"
            f" a bare SELECT 1 takes {hops['same']:.0f} us to a backend on the caller's CPU and {hops['other']:.0f} us"
            " to one on another CPU (this machine's cost of waking another CPU, paid twice per check)"
        )
    print(f"lease operations/s on PostgreSQL (4 threads, one replica): {leases:.0f}")
    print(
        f"not judged: an executor's check of its caller's token (WhoAmI, one per agent call), {args.threads} threads,"
        f" one replica: {whoami_rate:.0f}/s, {whoami_cpu['total_us']:.0f} us of CPU each (client"
        f" {whoami_cpu['client_us']:.0f}, replica {whoami_cpu['sidecars_us']:.0f}, PostgreSQL"
        f" {whoami_cpu['postgres_us']:.0f})"
    )
    print(
        f"a takeover reaches all three replicas' Watch: p50 {figures['takeover_to_all_watches_p50_ms']:.1f} ms,"
        f" p99 {figures['takeover_to_all_watches_p99_ms']:.1f} ms ({len(reach)} takeovers)"
    )
    if status["pg3_over_pg1_min"] == "explained, not met":
        print(
            f"three replicas do not reach 1.5x one here, and cannot: a check costs {pg3_cpu['total_us']:.0f} us of"
            f" CPU across the client, the replicas and PostgreSQL, so {cores} cores serve at most {ceiling:.0f}"
            f" checks/s, below 1.5x one replica's {pg1_rate:.0f}/s; the target is explained, not met (see"
            " docs/deploy.md for what saturates)"
        )
    elif status["pg3_over_pg1_min"] == "not met":
        print(
            f"three replicas do not reach 1.5x one here although the CPU would allow {ceiling:.0f} checks/s:"
            " not met, and not explained by CPU"
        )
    emit("authz_scale", figures, targets, met)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
