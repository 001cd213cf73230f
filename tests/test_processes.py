"""Operators' mistakes get one line and an exit code, never a traceback or a shared port.

The servers are started as a user would (``python -m handrail ...``). A read-only data
directory is made read-only for real: as root (who writes anywhere, whatever the mode
bits say) the command runs in a mount namespace of its own where the directory is bound
read-only (``unshare -m`` and ``mount --bind -o ro``); otherwise the directory loses its
write bits.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from handrail.authz import Store
from handrail.recorder import Ledger
from tests.conftest import Stack

pytestmark = pytest.mark.slow


def handrail(
    *args: str, env: dict[str, str] | None = None, read_only: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m handrail ARGS``; with ``read_only``, that directory cannot be written."""
    command = [sys.executable, "-m", "handrail", *args]
    if read_only is not None:
        if os.geteuid() == 0:
            if shutil.which("unshare") is None or subprocess.run(["unshare", "-m", "true"], check=False).returncode:
                pytest.skip("running as root without unshare -m: cannot make a directory read-only")
            bind = f'mount --bind -o ro "{read_only}" "{read_only}" && exec "$@"'
            command = ["unshare", "-m", "sh", "-c", bind, "sh", *command]
        else:
            read_only.chmod(0o555)
    return subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        env={**os.environ, **(env or {})},
    )


def one_line(out: subprocess.CompletedProcess[str]) -> str:
    """The run failed with exactly one line on stderr and nothing like a traceback."""
    assert out.returncode != 0, out.stdout
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, out.stderr
    assert "Traceback" not in out.stderr and "<" not in lines[0], out.stderr
    return lines[0]


def executor_serve(
    authz: str, token: str, data_dir: Path, listen: str = "127.0.0.1:0", **kw: Any
) -> subprocess.CompletedProcess[str]:
    return handrail(
        "executor", "serve", "--listen", listen, "--authz", authz, "--data-dir", str(data_dir),
        env={"HANDRAIL_TOKEN": token}, **kw,
    )  # fmt: skip


def test_the_executor_checks_its_own_token_at_start(stack: Stack, tmp_path: Path) -> None:
    assert "refuses this executor's token (TOKEN_UNKNOWN)" in one_line(
        executor_serve(stack.authz.address, "not-a-token", tmp_path / "a")
    )
    assert "not an executor" in one_line(executor_serve(stack.authz.address, stack.operator.token, tmp_path / "b"))
    assert "cannot reach the authz sidecar" in one_line(
        executor_serve("127.0.0.1:1", stack.executor_principal.token, tmp_path / "c")
    )


def test_the_console_checks_its_back_ends_at_start(stack: Stack) -> None:
    def console(*args: str) -> subprocess.CompletedProcess[str]:
        return handrail("console", "--listen", "127.0.0.1:0", "--start-timeout", "1", *args)

    assert "cannot reach the authz sidecar at 127.0.0.1:1" in one_line(console("--authz", "127.0.0.1:1"))
    assert "cannot reach the executor at 127.0.0.1:1" in one_line(
        console("--authz", stack.authz.address, "--executor", stack.executor.address, "--executor", "127.0.0.1:1")
    )
    # Replicas: the sidecar answers when any of them does. The console gets past the check
    # here (to a port it cannot take); none answering is one line naming them all.
    replicas = f"127.0.0.1:1,{stack.authz.address}"
    taken = console("--authz", replicas, "--executor", stack.executor.address, "--listen", stack.executor.address)
    assert one_line(taken).endswith("Address already in use")
    none = one_line(console("--authz", "127.0.0.1:1,127.0.0.1:2"))
    assert "cannot reach the authz sidecar at any of 127.0.0.1:1, 127.0.0.1:2" in none
    for bad, says in (("127.0.0.1:99999", "the port must be 1 to 65535"), (",", "no sidecar address given")):
        assert f"cannot start: authz address: {'' if bad == ',' else repr(bad) + ': '}{says}" in one_line(
            console("--authz", bad)
        )


def test_no_port_sharing_and_one_executor_per_data_dir(stack: Stack, tmp_path: Path) -> None:
    token = stack.executor_principal.token
    taken = one_line(executor_serve(stack.authz.address, token, tmp_path / "d", listen=stack.executor.address))
    assert taken.endswith("the port is taken")
    assert "another executor is serving" in one_line(executor_serve(stack.authz.address, token, stack.data_dir))
    second_sidecar = handrail("authz", "serve", "--data-dir", str(tmp_path / "e"), "--listen", stack.authz.address)
    assert one_line(second_sidecar).endswith("the port is taken")


@pytest.mark.parametrize(
    ("listen", "says"),
    [
        ("unix:", "no socket path after 'unix:'"),  # gRPC took it and said it listened
        ("unix:///", "no socket path after 'unix:'"),
        ("unix:{tmp}/no/such/authz.sock", "there is no directory {tmp}/no/such"),
    ],
)
def test_a_socket_file_to_listen_on_that_cannot_be_is_one_line(
    stack: Stack, tmp_path: Path, listen: str, says: str
) -> None:
    listen, says = listen.format(tmp=tmp_path), says.format(tmp=tmp_path)
    sidecar = one_line(handrail("authz", "serve", "--data-dir", str(tmp_path / "a"), "--listen", listen))
    assert sidecar == f"handrail-authz: cannot start: cannot listen on {listen}: {says}"
    executor = executor_serve(stack.authz.address, stack.executor_principal.token, tmp_path / "x", listen=listen)
    assert one_line(executor).endswith(f"cannot listen on {listen}: {says}")


def test_a_read_only_data_dir_is_one_line(stack: Stack, tmp_path: Path) -> None:
    data = tmp_path / "ro"
    data.mkdir()
    with Store(data / "authz.sqlite") as store:
        store.add_principal("someone", "agent")
    assert "cannot" in one_line(
        handrail("authz", "principal", "add", "x", "--role", "agent", "--data-dir", str(data), read_only=data)
    )
    assert "cannot" in one_line(
        executor_serve(stack.authz.address, stack.executor_principal.token, data, read_only=data)
    )


def test_ledger_commands_read_an_auditors_read_only_copy(tmp_path: Path) -> None:
    live = tmp_path / "live"
    ledger = Ledger(live / "ledger.sqlite")
    for i in range(5):
        ledger.append("note", session_id="s_1", body={"i": i})
    copy = tmp_path / "copy"
    copy.mkdir()
    for name in ("ledger.sqlite", "ledger.sqlite-wal", "ledger.sqlite.head"):  # as it is, WAL included
        if (live / name).exists():
            shutil.copyfile(live / name, copy / name)
    ledger.close()
    for command in (["verify"], ["tail", "-n", "3"], ["export"], ["timeline", "--session", "s_1"]):
        out = handrail("ledger", *command, "--data-dir", str(copy), read_only=copy)
        assert out.returncode == 0, (command, out.stderr)
    verify = handrail("ledger", "verify", "--data-dir", str(copy), read_only=copy)
    assert verify.stdout.startswith("ok: 5 entries")
    assert sorted(p.name for p in copy.iterdir()) == sorted(
        n for n in ("ledger.sqlite", "ledger.sqlite-wal", "ledger.sqlite.head") if (copy / n).exists()
    )  # nothing was written next to it
