"""Starting Handrail's servers as real child processes and waiting until they listen.

Used by the scenario replay, ``handrail demo``, the tests and the benchmarks.
"""

from __future__ import annotations

import os
import random
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["ServerProcess", "free_port", "start_authz", "start_executor", "start_server"]


_given: set[int] = set()
_given_lock = threading.Lock()


def _ephemeral_low() -> int:
    """Where the kernel's range of ports for outgoing connections begins."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on now, for a server that must be started (or restarted) at a
    known address.

    Not one the kernel hands out: a port from ``bind(0)`` is in the ephemeral range, where
    any process's next outgoing connection may take it before the server binds it (seen in
    CI: a replica's connection to PostgreSQL sat on the port picked for the next replica).
    So it is drawn below that range, and never the same one twice in this process.
    """
    low = _ephemeral_low()
    if low < 11_000:  # no room below the range: the kernel's pick, as good as it gets here
        with socket.socket() as s:
            s.bind((host, 0))
            return int(s.getsockname()[1])
    rng = random.Random()
    with _given_lock:
        for _ in range(200):
            port = rng.randrange(10_000, low)
            if port in _given:
                continue
            with socket.socket() as s:
                try:
                    s.bind((host, port))
                except OSError:
                    continue
            _given.add(port)
            return port
    raise RuntimeError(f"no free port below {low} on {host}")


@dataclass
class ServerProcess:
    """A server started with ``python -m handrail ...``; ``address`` is HOST:PORT."""

    name: str
    proc: subprocess.Popen[str]
    address: str
    output: list[str] = field(default_factory=list)
    pump: threading.Thread | None = None

    def stop(self, timeout: float = 10.0) -> int:
        """Stop it with SIGTERM (SIGKILL after ``timeout``); return its exit code."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout)
        self._close_output()
        return self.proc.returncode

    def _close_output(self) -> None:
        if self.pump is not None:
            self.pump.join(5)
        if self.proc.stdout is not None:
            self.proc.stdout.close()

    def kill(self) -> None:
        """``kill -9``: no chance to clean up."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self._close_output()


def start_server(
    name: str,
    args: Sequence[str],
    *,
    ready_prefix: str,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    timeout: float = 60.0,
) -> ServerProcess:
    """Run ``python -m handrail ARGS`` and wait for its ``<ready_prefix> HOST:PORT`` line.

    Raises:
        RuntimeError: the process exited or stayed silent past ``timeout``; the message
            carries what it printed.
    """
    full_env = dict(os.environ)
    full_env.update(env or {})
    full_env.setdefault("PYTHONUNBUFFERED", "1")
    proc = subprocess.Popen(
        [sys.executable, "-m", "handrail", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        env=full_env,
        cwd=cwd,
    )
    server = ServerProcess(name, proc, "")
    ready = threading.Event()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            server.output.append(line.rstrip("\n"))
            if not ready.is_set() and line.startswith(ready_prefix):
                server.address = line[len(ready_prefix) :].strip()
                ready.set()
        ready.set()

    server.pump = threading.Thread(target=pump, name=f"{name}-output", daemon=True)
    server.pump.start()
    deadline = time.monotonic() + timeout
    while not ready.wait(0.05):
        if time.monotonic() > deadline:
            server.kill()
            raise RuntimeError(f"{name} did not start within {timeout:.0f} s:\n" + "\n".join(server.output))
    if not server.address:
        server.stop()
        raise RuntimeError(f"{name} exited with {proc.returncode}:\n" + "\n".join(server.output))
    return server


def start_authz(data_dir: Path, *, policies: Path | None = None, extra: Sequence[str] = ()) -> ServerProcess:
    """Start ``handrail authz serve`` on a free loopback port with its data in ``data_dir``."""
    args = ["authz", "serve", "--data-dir", str(data_dir), "--listen", "127.0.0.1:0", *extra]
    if policies is not None:
        args += ["--policies", str(policies)]
    return start_server("authz", args, ready_prefix="handrail-authz listening on ")


def start_executor(
    data_dir: Path,
    authz_address: str,
    token: str,
    *,
    chromium: str | None = None,
    extra: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
) -> ServerProcess:
    """Start ``handrail executor serve`` on a free loopback port, talking to the sidecar at
    ``authz_address`` with the executor principal's ``token``."""
    args = [
        "executor",
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--authz",
        authz_address,
        "--data-dir",
        str(data_dir),
        *extra,
    ]
    if chromium:
        args += ["--chromium", chromium]
    return start_server(
        "executor",
        args,
        ready_prefix="handrail-executor listening on ",
        env={**(env or {}), "HANDRAIL_TOKEN": token},
    )
