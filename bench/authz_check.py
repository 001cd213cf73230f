"""Benchmark: the authz ``Check`` round trip against a bare gRPC echo, in one run.

Both servers run as separate processes configured alike (grpc's sync server on a thread pool
of 32, loopback, no SO_REUSEPORT); one client process measures both with the same channel
settings and the same bearer metadata, alternating blocks of echo and Check calls so that
drift hits both. The echo request is the serialized CheckRequest, so both carry the same
bytes in.

The sidecar holds 10,000 grants (500 agents x 20 targets) and 200 Cedar policies: the 3
shipped defaults plus 197 generated ones in a mix an operator might write (per-origin and
per-verb forbids, per-agent path rules, element-name rules, approval rules). Every measured
Check is a real decision that is logged before it is answered (WAL, synchronous=NORMAL: it
survives kill -9 of the sidecar); the checks cycle through 50 agents, each holding its
target's lease, and through 20 element names, and all are allowed.

No measured check reaches Cedar: the policy index rules out every policy that could apply
(the shipped navigation rule cannot fire for a navigation to a granted origin, and no other
rule's guards hold), and the answer is still Cedar's (a property test holds the index to
the whole policy set). ``check_navigate_*`` is the latency of the navigation checks.
So that the cost of a decision Cedar has to make is on record too, a third series, timed in
the same alternating blocks but outside the target mix, clicks "Delete draft N" buttons:
the shipped destructive-control rule's condition holds, the index cannot rule it out, and
Cedar decides (allowed: those agents' grants carry ``delete``). ``check_cedar_*`` are its
figures.

Run: ``python bench/authz_check.py [--quick]``. Prints readable lines, then one JSON line.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import emit, pct, summary

from handrail._cpus import parse_cpus, pin_process, span
from handrail.authz import GrantInfo, SqliteStore
from handrail.authz._policies import DEFAULT_POLICIES_DIR
from handrail.proto.authz.v1 import authz_pb2 as pb
from handrail.scenarios import ServerProcess, start_server

N_AGENTS = 500
N_TARGETS = 20  # per agent: 10,000 grants
N_POLICIES = 200
ACTIVE_AGENTS = 50
NAMES = [f"Button {i}" for i in range(20)]
ORIGIN = "https://app.example.test"
POOL = 32
SERVER_OPTIONS = [("grpc.so_reuseport", 0)]
ECHO_READY = "echo listening on "


# --- the echo server (a process of its own) ----------------------------------------------------


def run_echo_server(cpus: str | None = None, insert_dsn: str | None = None) -> None:
    """A trivial unary service, bytes in, the same bytes out, served like the sidecar
    (``cpus``: kept on those CPUs, as the sidecar's ``--cpus`` keeps it). With
    ``insert_dsn``, each call first runs one prepared INSERT of its bytes on that PostgreSQL
    (one connection per thread, autocommit, ``synchronous_commit`` off as the sidecar's
    decision sessions): the floor of any service that writes one row per call."""
    if cpus is not None:
        pin_process(parse_cpus(cpus))  # before gRPC starts its threads: they inherit it
    write = _one_insert(insert_dsn) if insert_dsn else None

    def echo(request: bytes, context: grpc.ServicerContext) -> bytes:
        if write is not None:
            write(request)
        return request

    handler = grpc.method_handlers_generic_handler(
        "bench.Echo",
        {"Echo": grpc.unary_unary_rpc_method_handler(echo, request_deserializer=None, response_serializer=None)},
    )
    server = grpc.server(ThreadPoolExecutor(max_workers=POOL), options=SERVER_OPTIONS)
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print(f"{ECHO_READY}127.0.0.1:{port}", flush=True)
    server.wait_for_termination()


def _one_insert(dsn: str) -> Callable[[bytes], None]:
    """A function that inserts its bytes as one row (a prepared statement, one round trip)."""
    import psycopg  # only the floor needs it

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS bench_floor (id bigserial PRIMARY KEY, at timestamptz"
                     " NOT NULL DEFAULT now(), request bytea NOT NULL)")  # fmt: skip
    local = threading.local()

    def write(request: bytes) -> None:
        conn = getattr(local, "conn", None)
        if conn is None:
            conn = local.conn = psycopg.connect(dsn, autocommit=True)
            conn.execute("SET synchronous_commit = off")
            conn.pgconn.prepare(b"floor", b"INSERT INTO bench_floor (request) VALUES ($1)")
        result = conn.pgconn.exec_prepared(b"floor", [request], param_formats=[1])
        if result.status != psycopg.pq.ExecStatus.COMMAND_OK:
            raise RuntimeError(result.get_error_message())

    return write


def start_echo(cpus: set[int] | None = None, insert_dsn: str | None = None) -> tuple[subprocess.Popen[str], str]:
    """The echo server; ``cpus``: kept on those CPUs, as the sidecar's ``--cpus`` keeps it;
    ``insert_dsn``: each call also writes one row there (see :func:`run_echo_server`)."""
    argv = [sys.executable, __file__, "--echo-server"]
    argv += [] if cpus is None else ["--cpus", span(frozenset(cpus))]
    argv += [] if insert_dsn is None else ["--insert", insert_dsn]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith(ECHO_READY):
        proc.kill()
        raise RuntimeError(f"echo server did not start: {line!r}")
    return proc, line[len(ECHO_READY) :].strip()


# --- the sidecar's state -----------------------------------------------------------------------


def write_policies(directory: Path) -> int:
    directory.mkdir()
    for name in ("schema.cedarschema", "default.cedar"):
        shutil.copy(DEFAULT_POLICIES_DIR / name, directory)
    verbs = ["read", "input", "navigate", "submit", "purchase", "delete", "upload", "download"]
    rules = []
    for i in range(N_POLICIES - 3):
        kind = i % 5
        if kind == 0:
            verb = verbs[i % len(verbs)]
            rules.append(
                f'@id("block-origin-{i}")\nforbid (principal, action == Action::"{verb}", '
                f'resource)\nwhen {{ context.origin == "https://blocked-{i}.example.test" }};'
            )
        elif kind == 1:
            rules.append(
                f'@id("agent-{i}-no-admin")\nforbid (principal == Agent::"agent-{i}", action, '
                f'resource)\nwhen {{ context.path like "/admin/{i}/*" }};'
            )
        elif kind == 2:
            rules.append(
                f'@id("name-rule-{i}")\nforbid (principal, action in [Action::"submit", '
                f'Action::"input"], resource)\nwhen {{ context.element_name_lower like '
                f'"*forbidden {i}*" }};'
            )
        elif kind == 3:
            rules.append(
                f'@id("approve-purchase-{i}")\n@approval("required")\nforbid (principal, '
                f'action == Action::"purchase", resource)\nwhen {{ context.origin == '
                f'"https://shop-{i}.example.test" }};'
            )
        else:
            verb = verbs[(i // 5) % len(verbs)]
            rules.append(
                f'@id("window-rule-{i}")\nforbid (principal, action == Action::"{verb}", '
                f'resource)\nwhen {{ context.window_class == "blocked-{i}" }};'
            )
    (directory / "bench.cedar").write_text("\n\n".join(rules) + "\n")
    return len(rules) + 3


def seed(data_dir: Path) -> dict[str, str]:
    """Principals, 10,000 grants and the leases of the active agents, written directly."""
    tokens: dict[str, str] = {}
    with SqliteStore.in_dir(data_dir) as store:
        tokens["exe"] = store.add_principal("bench-exe", "executor")
        tokens["op"] = store.add_principal("bench-op", "operator")
        for a in range(N_AGENTS):  # a check acts only for an agent that exists and is live
            store.add_principal(f"agent-{a}", "agent")
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
        from handrail.authz._core import lease_acquire

        for a in range(ACTIVE_AGENTS):
            store.change_lease(
                f"browser:{a}-0",
                lambda cur, now, a=a: lease_acquire(cur, f"agent-{a}", 3_600_000, now),
            )
    return tokens


def check_requests(*, destructive: bool = False) -> list[bytes]:
    """Every fifth check is a navigation to a granted origin (the shipped navigation rule
    applies but cannot fire); the others are clicks on ordinary buttons (no policy can fire).
    Cedar is not asked about any of them. ``destructive``: every check clicks "Delete draft
    N" instead, which Cedar decides."""
    out = []
    for i in range(ACTIVE_AGENTS * len(NAMES)):
        a, n = i % ACTIVE_AGENTS, i % len(NAMES)
        navigate = i % 5 == 4 and not destructive
        out.append(
            pb.CheckRequest(
                principal=f"agent-{a}",
                target=f"browser:{a}-0",
                lease_epoch=1,
                verb=pb.VERB_NAVIGATE if navigate else pb.VERB_SUBMIT,
                resource=pb.Resource(
                    url=f"{ORIGIN}/account/settings?tab={n}",
                    element_role="" if navigate else "button",
                    element_name="" if navigate else f"Delete draft {n}" if destructive else NAMES[n],
                ),
                action_id=f"act-{i}",
                fingerprint=f"{i:064x}",
                observation_id=f"obs-{i}",
            ).SerializeToString()
        )
    return out


# --- measuring ---------------------------------------------------------------------------------


def _timed(call: Callable[[bytes], bytes], payloads: list[bytes], n: int, start: int) -> list[float]:
    samples = []
    k = len(payloads)
    for i in range(n):
        payload = payloads[(start + i) % k]
        t0 = time.perf_counter()
        call(payload)
        samples.append(time.perf_counter() - t0)
    return samples


def sustained(
    make_call: Callable[[], Callable[[bytes], bytes]],
    payloads: list[bytes],
    threads: int,
    seconds: float,
) -> float:
    stop = threading.Event()
    counts = [0] * threads
    errors: list[BaseException] = []

    def worker(w: int) -> None:
        call = make_call()
        i = w
        try:
            while not stop.is_set():
                call(payloads[i % len(payloads)])
                counts[w] += 1
                i += threads
        except BaseException as exc:  # reported below
            errors.append(exc)

    pool = [threading.Thread(target=worker, args=(w,)) for w in range(threads)]
    t0 = time.perf_counter()
    for t in pool:
        t.start()
    time.sleep(seconds)
    stop.set()
    for t in pool:
        t.join()
    elapsed = time.perf_counter() - t0
    if errors:
        raise errors[0]
    return sum(counts) / elapsed


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--echo-server", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--cpus", default=None, help=argparse.SUPPRESS)  # the echo server's
    parser.add_argument("--insert", default=None, help=argparse.SUPPRESS)  # the echo server's floor DSN
    parser.add_argument("--quick", action="store_true", help="fewer samples (a smoke run)")
    parser.add_argument("--samples", type=int, default=0)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args()
    if args.echo_server:
        run_echo_server(args.cpus, args.insert)
        return 0
    samples = args.samples or (1000 if args.quick else 8000)
    seconds = 1.0 if args.quick else args.seconds

    tmp = Path(tempfile.mkdtemp(prefix="authz-bench-"))
    authz: ServerProcess | None = None
    echo_proc: subprocess.Popen[str] | None = None
    try:
        policies = write_policies(tmp / "policies")
        t0 = time.perf_counter()
        tokens = seed(tmp / "data")
        print(f"seeded {N_AGENTS * N_TARGETS} grants in {time.perf_counter() - t0:.1f} s")
        authz = start_server(
            "authz",
            [
                "authz",
                "serve",
                "--data-dir",
                str(tmp / "data"),
                "--listen",
                "127.0.0.1:0",
                "--policies",
                str(tmp / "policies"),
                "--log-level",
                "WARNING",
            ],
            ready_prefix="handrail-authz listening on ",
        )
        echo_proc, echo_address = start_echo()
        metadata = (("authorization", f"Bearer {tokens['exe']}"),)
        payloads = check_requests()
        cedar_payloads = check_requests(destructive=True)

        def channel_call(address: str, method: str) -> Callable[[bytes], bytes]:
            channel = grpc.insecure_channel(address)
            stub = channel.unary_unary(method)

            def call(payload: bytes) -> bytes:
                return stub(payload, metadata=metadata, timeout=5)  # type: ignore[no-any-return]

            return call

        echo = channel_call(echo_address, "/bench.Echo/Echo")
        check = channel_call(authz.address, "/handrail.authz.v1.Authz/Check")
        reply = pb.CheckResponse.FromString(check(payloads[0]))
        if not reply.allow:
            raise SystemExit(f"the bench check is refused: {reply}")
        for p in payloads[:200] + cedar_payloads[:200]:
            assert pb.CheckResponse.FromString(check(p)).allow
        _timed(echo, payloads, 500, 0)
        _timed(check, payloads, 500, 0)

        _timed(check, cedar_payloads, 500, 0)
        echo_s: list[float] = []
        check_s: list[float] = []
        cedar_s: list[float] = []
        block = 500
        for start in range(0, samples, block):
            echo_s += _timed(echo, payloads, block, start)
            check_s += _timed(check, payloads, block, start)
            if start % (4 * block) == 0:  # a quarter as many: it is on record, not in the mix
                cedar_s += _timed(check, cedar_payloads, block, start)

        echo_rate = sustained(lambda: channel_call(echo_address, "/bench.Echo/Echo"), payloads, args.threads, seconds)
        check_rate = sustained(
            lambda: channel_call(authz.address, "/handrail.authz.v1.Authz/Check"),
            payloads,
            args.threads,
            seconds,
        )
        with SqliteStore.in_dir(tmp / "data") as store:
            logged = store.count_decisions()
    finally:
        if authz is not None:
            authz.stop()
        if echo_proc is not None:
            echo_proc.kill()
            echo_proc.wait()
            if echo_proc.stdout is not None:
                echo_proc.stdout.close()
        shutil.rmtree(tmp, ignore_errors=True)

    figures: dict[str, float | int] = {}
    figures.update(summary("echo", echo_s))
    figures.update(summary("check", check_s))
    e50, e99 = statistics.median(echo_s), pct(echo_s, 99)
    c50, c99 = statistics.median(check_s), pct(check_s, 99)
    figures["p50_ratio"] = round(c50 / e50, 3)
    figures["p99_ratio"] = round(c99 / e99, 3)
    figures["check_added_p50_us"] = round((c50 - e50) * 1e6, 1)
    navigate = [x for i, x in enumerate(check_s) if i % 5 == 4]
    figures["check_navigate_p50_ms"] = round(statistics.median(navigate) * 1000, 3)
    figures["check_navigate_p99_ms"] = round(pct(navigate, 99) * 1000, 3)
    figures["check_cedar_p50_ms"] = round(statistics.median(cedar_s) * 1000, 3)
    figures["check_cedar_p99_ms"] = round(pct(cedar_s, 99) * 1000, 3)
    figures["checks_per_s"] = round(check_rate)
    figures["echo_per_s"] = round(echo_rate)
    figures["client_threads"] = args.threads
    figures["samples"] = len(check_s)
    figures["grants"] = N_AGENTS * N_TARGETS
    figures["policies"] = policies
    figures["decisions_logged"] = logged
    figures["cores"] = os.cpu_count() or 0
    targets = {"p50_ratio_max": 1.3, "p99_ratio_max": 2.0, "checks_per_s_min": 1000}
    met = figures["p50_ratio"] <= 1.3 and figures["p99_ratio"] <= 2.0 and check_rate >= 1000
    print(f"echo   p50 {e50 * 1e6:7.0f} us   p99 {e99 * 1e6:7.0f} us   {echo_rate:7.0f} calls/s")
    print(f"check  p50 {c50 * 1e6:7.0f} us   p99 {c99 * 1e6:7.0f} us   {check_rate:7.0f} checks/s")
    print(
        f"ratios p50 {figures['p50_ratio']:.2f} (target <= 1.3)   p99 {figures['p99_ratio']:.2f}"
        f" (target <= 2.0)   {args.threads} client threads, {seconds:.0f} s"
    )
    print(
        f"a check Cedar decides (not in the mix): p50 {figures['check_cedar_p50_ms'] * 1000:.0f} us   "
        f"p99 {figures['check_cedar_p99_ms'] * 1000:.0f} us"
    )
    print(
        f"store: {figures['grants']} grants, {policies} policies, {logged} decisions logged; {figures['cores']} cores"
    )
    emit("authz_check", figures, targets, met)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
