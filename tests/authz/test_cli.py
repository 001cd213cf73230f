"""The command line: serve as a real process, principals, operator commands."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from handrail.authz import AuthzClient, SqliteStore, Store, _cli
from handrail.authz._policies import DEFAULT_POLICIES_DIR
from tests.authz.conftest import Sidecar, granted
from tests.conftest import reap


def _handrail(*args: str) -> list[str]:
    return [sys.executable, "-m", "handrail", *args]


@contextlib.contextmanager
def _serving(*args: str) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """``handrail authz serve ARGS`` as a process, and the address its ready line names;
    killed at the end if the test did not stop it."""
    proc = subprocess.Popen(
        _handrail("authz", "serve", *args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        assert line.startswith("handrail-authz listening on "), line
        yield proc, line.rsplit(" ", 1)[1]
    finally:
        reap(proc)


@pytest.mark.slow
def test_serve_prints_listening_line_answers_health_and_stops(tmp_path: Path) -> None:
    with _serving("--data-dir", str(tmp_path), "--listen", "127.0.0.1:0") as (proc, address):
        assert address.startswith("127.0.0.1:")
        assert int(address.rsplit(":", 1)[1]) > 0
        with grpc.insecure_channel(address) as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            for service in ("handrail.authz.v1.Authz", ""):
                reply = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=5)
                assert reply.status == health_pb2.HealthCheckResponse.SERVING
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0
    assert (tmp_path / "authz.sqlite").exists()


@pytest.mark.slow
def test_serve_on_a_unix_socket_names_its_path_and_a_client_reaches_it(tmp_path: Path) -> None:
    socket = f"unix:{tmp_path / 'authz.sock'}"
    with SqliteStore.in_dir(tmp_path / "data") as store:
        token = store.add_principal("op", "operator")
    with _serving("--data-dir", str(tmp_path / "data"), "--listen", socket) as (proc, address):
        assert address == socket  # (gRPC reports "port" 1 for a socket file)
        with AuthzClient(address, token) as client:
            assert client.list_grants() == []
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0
        assert proc.stderr is not None
        assert f"on {socket} since" in proc.stderr.read()


def _cpus_of(pid: int) -> dict[int, str]:
    """Each thread of ``pid``: the CPUs it may run on, as the kernel lists them."""
    found = {}
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            status = Path(f"/proc/{pid}/task/{task}/status").read_text()
        except FileNotFoundError:  # ended meanwhile
            continue
        found[int(task)] = next(
            ln.split(":", 1)[1].strip() for ln in status.splitlines() if ln.startswith("Cpus_allowed_list")
        )
    return found


@pytest.mark.slow
def test_serve_cpus_keeps_every_thread_on_the_cpu_given(tmp_path: Path) -> None:
    cpu = max(os.sched_getaffinity(0))
    with _serving("--data-dir", str(tmp_path), "--listen", "127.0.0.1:0", "--cpus", str(cpu)) as (proc, address):
        with grpc.insecure_channel(address) as channel:  # handler threads start on demand: make some
            stub = health_pb2_grpc.HealthStub(channel)
            futures = [stub.Check.future(health_pb2.HealthCheckRequest(), timeout=5) for _ in range(8)]
            assert all(f.result().status == health_pb2.HealthCheckResponse.SERVING for f in futures)
        threads = _cpus_of(proc.pid)
        assert len(threads) > 5  # gRPC's, the poller, the handlers, the store's
        assert set(threads.values()) == {str(cpu)}
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0
        assert proc.stderr is not None
        assert f"authz kept on CPU {cpu}" in proc.stderr.read()


@pytest.mark.slow
@pytest.mark.parametrize("cpus", ["9999", "1-0", "two", ""])
def test_serve_cpus_refused_in_one_line_before_anything_opens(tmp_path: Path, cpus: str) -> None:
    result = subprocess.run(
        _handrail("authz", "serve", "--data-dir", str(tmp_path / "d"), "--listen", "127.0.0.1:0", "--cpus", cpus),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.startswith(f"handrail-authz: cannot start: --cpus {cpus!r}: ")
    assert result.stderr.count("\n") == 1
    assert not (tmp_path / "d").exists()  # refused before the store or its lock was made


@pytest.mark.slow
def test_serve_with_broken_policy_exits_with_file_and_line(tmp_path: Path) -> None:
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "schema.cedarschema").write_text((DEFAULT_POLICIES_DIR / "schema.cedarschema").read_text())
    broken = policies / "broken.cedar"
    broken.write_text('// header\n\n@id("x")\nforbid (principal, action, resource\n  when { true };\n')
    result = subprocess.run(
        _handrail(
            "authz",
            "serve",
            "--data-dir",
            str(tmp_path / "d"),
            "--listen",
            "127.0.0.1:0",
            "--policies",
            str(policies),
        ),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert f"{broken}:3: " in result.stderr
    assert result.stdout == ""


def test_principal_add_and_list(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = ["--data-dir", str(tmp_path)]
    add = ["authz", "principal", "add"]
    assert _cli.main([*add, "alice", "--role", "operator", *data]) == 0
    token = capsys.readouterr().out.strip()
    assert len(token) >= 24
    assert _cli.main([*add, "bob", "--role", "agent", "--token", "tok", *data]) == 0
    assert capsys.readouterr().out.strip() == "tok"
    assert _cli.main([*add, "bob", "--role", "agent", *data]) == 1
    assert "already exists" in capsys.readouterr().err
    assert _cli.main(["authz", "principal", "list", *data]) == 0
    out = capsys.readouterr().out
    assert "alice\toperator" in out and "bob\tagent" in out
    with Store.in_dir(tmp_path) as store:
        assert store.authenticate(token) is not None
        assert store.authenticate("tok") is not None
        # tokens are stored hashed
        rows = store.db.reader().execute("SELECT token_sha256 FROM principals").fetchall()
        assert all(len(r[0]) == 64 and r[0] not in (token, "tok") for r in rows)


def test_operator_commands(sidecar: Sidecar, capsys: pytest.CaptureFixture[str]) -> None:
    remote = ["--authz", sidecar.address, "--token", sidecar.tokens["op"]]

    def run(*args: str) -> tuple[int, str, str]:
        code = _cli.main([*args, *remote])
        out, err = capsys.readouterr()
        return code, out, err

    code, out, _ = run(
        "grant",
        "--principal",
        "agent-a",
        "--target",
        "t1",
        "--verbs",
        "submit,input",
        "--origin",
        "http://127.0.0.1:8000",
        "--ttl",
        "60",
        "--note",
        "demo",
    )
    assert code == 0
    grant_id = out.strip()
    code, out, _ = run("grants", "--principal", "agent-a")
    assert code == 0 and grant_id in out and "submit,input" in out and "active" in out
    sidecar.client("agent-a").acquire("t1")
    code, out, _ = run("lease", "t1")
    assert "held by agent agent-a (epoch 1" in out
    code, out, _ = run("takeover", "t1", "--note", "mine")
    assert code == 0 and "held by human op (epoch 2" in out
    code, out, _ = run("handback", "t1", "--next", "agent-a")
    assert code == 0 and "free (epoch 3)" in out and "reserved for agent-a" in out
    code, out, _ = run("revoke", grant_id)
    assert code == 0 and grant_id in out
    code, _, err = run("revoke", "nope")
    assert code == 1 and "NOT_FOUND" in err and "Traceback" not in err
    code, _, err = run("grant", "--principal", "p", "--target", "t", "--verbs", "fly")
    assert code == 1 and "verb" in err


def test_operator_command_without_token(capsys: pytest.CaptureFixture[str]) -> None:
    env_token = os.environ.pop("HANDRAIL_TOKEN", None)
    try:
        assert _cli.main(["lease", "t", "--token", ""]) == 1
        assert "no token" in capsys.readouterr().err
    finally:
        if env_token is not None:
            os.environ["HANDRAIL_TOKEN"] = env_token


def test_grant_scope_flags_close_task_watch_and_reload(sidecar: Sidecar, capsys: pytest.CaptureFixture[str]) -> None:
    remote = ["--authz", sidecar.address, "--token", sidecar.tokens["op"]]
    code = _cli.main(
        [
            "grant", "--principal", "agent-a", "--target", "browser:*", "--verbs", "submit,delete",
            "--origin", "https://shop.test", "--path", "/account/*", "--role", "button",
            "--name", "Delete*", "--single-use", "--task", "t-1", "--require-approval", "delete",
            "--approval-timeout", "30", "--allow-password-input", *remote,
        ]
    )  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 0, err
    grant_id = out.strip()
    (grant,) = granted(sidecar.client("op").list_grants("agent-a"))
    assert grant.grant_id == grant_id and grant.single_use and grant.task_id == "t-1"
    assert grant.path_globs == ("/account/*",) and grant.name_patterns == ("Delete*",)
    assert grant.require_approval_verbs == ("delete",) and grant.approval_timeout_ms == 30_000
    assert _cli.main(["grants", "--principal", "agent-a", *remote]) == 0
    assert "single use" in capsys.readouterr().out

    seen: list[int] = []
    watcher = threading.Thread(target=lambda: seen.append(_cli.main(["watch", "--count", "1", *remote])), daemon=True)
    watcher.start()
    deadline = time.monotonic() + 5
    while sidecar.server.authorizer.hub.subscribers < 1:
        assert time.monotonic() < deadline
        time.sleep(0.005)
    assert _cli.main(["close-task", "t-1", *remote]) == 0
    watcher.join(5)
    out = capsys.readouterr().out
    assert seen == [0] and "1 grant(s) ended" in out and "grant close" in out
    assert _cli.main(["authz", "reload", *remote]) == 0
    assert "reloaded: 5 policies" in capsys.readouterr().out
