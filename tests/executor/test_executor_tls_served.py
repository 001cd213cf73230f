"""A real ``handrail executor serve`` serving TLS with the files its environment names
(``HANDRAIL_EXECUTOR_TLS_CERT``, ``HANDRAIL_EXECUTOR_TLS_KEY``, as docs/deploy.md's
executor.env sets them), a real Chromium behind it, and each of its clients through its
real entry point: the SDK, ``handrail console`` (``HANDRAIL_EXECUTOR_CA``,
``HANDRAIL_EXECUTOR_SERVER_NAME``) and ``handrail mcp`` (``--executor-ca``). Each client
without the CA, or with a name but no CA, is refused at start in one line. Before, the
executor served plaintext only, and none of these clients could be told a CA."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from handrail.authz import AuthzClient, Store
from handrail.cli import main
from handrail.executor import ExecutorClient, ExecutorUnavailableError
from handrail.scenarios import ServerProcess, SubscriptionApp, free_port, start_authz, start_executor, start_server
from handrail.scenarios._postgres import SERVER_NAME, Certificates, make_certificates
from tests.mcp.client import mcp_args, stdio_session, text

pytestmark = [pytest.mark.slow, pytest.mark.browser]

CONSOLE_READY = "handrail-console listening on "


@dataclass
class Served:
    certs: Certificates
    authz: ServerProcess
    executor: ServerProcess
    operator: str
    agent: tuple[str, str]  # name, token
    app: SubscriptionApp
    console_port: int

    @property
    def port(self) -> str:
        return self.executor.address.rsplit(":", 1)[1]

    @property
    def target(self) -> str:
        return f"browser:{self.agent[0]}"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    pytest.importorskip("cryptography")
    root = tmp_path_factory.mktemp("executor-tls-served")
    certs = make_certificates(root / "certs")
    with Store(root / "authz.sqlite") as store:
        operator = store.add_principal("ops-tls", "operator")
        executor_token = store.add_principal("exe-tls", "executor")
        agent = ("agent-tls", store.add_principal("agent-tls", "agent"))
    console_port = free_port()
    authz = start_authz(root, extra=["--console-origin", f"http://127.0.0.1:{console_port}"])
    app = SubscriptionApp()
    app.start()
    try:
        with AuthzClient(authz.address, operator) as ops:
            ops.grant(agent[0], f"browser:{agent[0]}", ["navigate", "input", "submit"], [app.url])
        env = {"HANDRAIL_EXECUTOR_TLS_CERT": str(certs.server_cert), "HANDRAIL_EXECUTOR_TLS_KEY": str(certs.server_key)}
        executor = start_executor(root / "exe", authz.address, executor_token, env=env)
        try:
            yield Served(certs, authz, executor, operator, agent, app, console_port)
        finally:
            executor.stop()
    finally:
        app.stop()
        authz.stop()


def _env(**values: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HANDRAIL_EXECUTOR")}
    env.update(values)
    return env


def test_the_sdk_reaches_the_served_executor_over_tls_and_plaintext_does_not(served: Served) -> None:
    ca = served.certs.ca.read_bytes()
    token = served.agent[1]
    with ExecutorClient(f"localhost:{served.port}", token, root_certificates=ca) as sdk:
        session = sdk.open_session(target=served.target, start_url=served.app.url + "/")
        assert session.find("button", "Turn off auto-renew")  # a real page, observed over TLS
        session.close()
    with (
        ExecutorClient(served.executor.address, token, timeout_s=3) as plain,
        pytest.raises(ExecutorUnavailableError),
    ):
        plain.open_session(target=served.target)


def test_the_console_reaches_a_tls_executor_from_the_operators_environment(served: Served) -> None:
    token = served.agent[1]
    env = _env(HANDRAIL_EXECUTOR_CA=str(served.certs.ca), HANDRAIL_EXECUTOR_SERVER_NAME=SERVER_NAME)
    argv = ["console", "--authz", served.authz.address, "--executor", served.executor.address]
    argv += ["--listen", f"127.0.0.1:{served.console_port}"]
    with ExecutorClient(
        served.executor.address, token, root_certificates=served.certs.ca.read_bytes(), server_name=SERVER_NAME
    ) as sdk:
        session = sdk.open_session(target=served.target, start_url=served.app.url + "/")
        console = start_server("console", argv, ready_prefix=CONSOLE_READY, env=env)
        try:
            with httpx.Client(base_url=console.address, timeout=20) as c:
                csrf = re.search(r'name="csrf" value="([^"]+)"', c.get("/signin").text)
                assert csrf is not None
                r = c.post("/signin", data={"csrf": csrf.group(1), "token": served.operator, "next": "/"})
                assert r.status_code == 303, r.text
                overview = c.get("/").text
                assert session.session_id in overview and "executor 127.0.0.1" not in overview, overview
                assert c.get(f"/sessions/{session.session_id}").status_code == 200
        finally:
            console.stop()
            session.close()

    # Without the CA it would speak plaintext to a TLS executor: said at start, one line.
    refused = [
        (_env(), (), "handrail console: cannot reach the executor at"),
        (_env(), ("--executor-server-name", SERVER_NAME), "--executor-server-name needs --executor-ca"),
        (_env(HANDRAIL_EXECUTOR_CA=str(served.certs.other_ca)), (), "handrail console: cannot reach the executor"),
    ]
    for env, extra, said in refused:
        done = subprocess.run(
            [sys.executable, "-m", "handrail", *argv, "--start-timeout", "2", *extra],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
            check=False,
        )
        lines = done.stderr.strip().splitlines()
        assert done.returncode != 0 and len(lines) == 1 and said in lines[0], (extra, done.stderr)


def test_the_mcp_bridge_reaches_a_tls_executor(
    served: Served, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for variable in ("HANDRAIL_EXECUTOR_CA", "HANDRAIL_EXECUTOR_SERVER_NAME"):
        monkeypatch.delenv(variable, raising=False)
    token = served.agent[1]
    args = mcp_args(served.executor.address, token, served.target, served.app.url + "/")
    args += ["--executor-ca", str(served.certs.ca), "--executor-server-name", SERVER_NAME]

    async def run() -> str:
        async with stdio_session(args) as mcp:
            return text(await mcp.call_tool("browser_snapshot", {}))

    assert 'button "Turn off auto-renew"' in asyncio.run(run())

    common = ["mcp", "--executor", served.executor.address, "--token", token, "--target", served.target]
    for extra, code, said in (
        ([], 1, "handrail mcp: cannot reach the executor at"),
        (["--executor-ca", str(served.certs.other_ca)], 1, "handrail mcp: cannot reach the executor at"),
        (["--executor-server-name", SERVER_NAME], 2, "handrail mcp: --executor-server-name needs --executor-ca"),
        (["--executor-ca", str(Path(served.certs.directory) / "nope.pem")], 2, "cannot read --executor-ca"),
    ):
        assert main([*common, "--start-timeout", "2", *extra]) == code, extra
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and said in err, (extra, err)
