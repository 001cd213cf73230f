"""A stack for the console's tests: a sidecar told the console's origin, an executor, the console.

The console's port is chosen first so that the sidecar's standing policy knows where the
console is (``--console-origin``); the console runs in-process on that port.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from handrail.authz import Store
from handrail.console import ConsoleConfig, RunningConsole, start_console
from handrail.scenarios import ServerProcess, free_port, start_authz, start_executor
from tests.conftest import Principal


@dataclass
class ConsoleStack:
    data_dir: Path
    authz: ServerProcess
    executor: ServerProcess
    console: RunningConsole
    operator: Principal
    executor_principal: Principal

    def add(self, role: str, prefix: str = "") -> Principal:
        name = f"{prefix or role}-{secrets.token_hex(3)}"
        with Store(self.data_dir / "authz.sqlite") as store:
            return Principal(name, store.add_principal(name, role))


@pytest.fixture(scope="session")
def console_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConsoleStack]:
    data_dir = tmp_path_factory.mktemp("console")
    with Store(data_dir / "authz.sqlite") as store:
        operator = Principal("ops-alice", store.add_principal("ops-alice", "operator"))
        executor = Principal("executor-c", store.add_principal("executor-c", "executor"))
    port = free_port()
    authz = start_authz(data_dir, extra=["--console-origin", f"http://127.0.0.1:{port}"])
    try:
        exe = start_executor(data_dir, authz.address, executor.token)
        try:
            console = start_console(
                ConsoleConfig(authz=authz.address, executors=(exe.address,), listen=f"127.0.0.1:{port}")
            )
            try:
                yield ConsoleStack(data_dir, authz, exe, console, operator, executor)
            finally:
                console.stop()
        finally:
            exe.stop()
    finally:
        authz.stop()
