"""The console in front of a sidecar that serves TLS, configured the way docs/deploy.md tells
operators to (``HANDRAIL_AUTHZ_CA``, ``HANDRAIL_AUTHZ_SERVER_NAME`` in the environment): it
starts, an operator signs in through it (the sidecar's client speaks TLS with that CA), and
each wrong setting is refused at start in one line. Before, ``handrail console`` read
neither variable: with the operators' environment of the doc it spoke plaintext to a TLS
sidecar and said it could not reach it, and no option named the certificate's host."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest

from handrail.authz import Store
from handrail.scenarios import ServerProcess, free_port, start_authz, start_server
from handrail.scenarios._postgres import SERVER_NAME, Certificates, make_certificates

pytestmark = pytest.mark.slow

READY = "handrail-console listening on "


@dataclass
class TlsSidecar:
    sidecar: ServerProcess
    other: ServerProcess  # a plaintext gRPC server standing in for the executor (the start check's)
    certs: Certificates
    operator_token: str
    console_port: int

    @property
    def port(self) -> str:
        return self.sidecar.address.rsplit(":", 1)[1]


@pytest.fixture(scope="module")
def tls_sidecar(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsSidecar]:
    pytest.importorskip("cryptography")
    root = tmp_path_factory.mktemp("console-tls")
    certs = make_certificates(root / "certs")
    (root / "a").mkdir()
    (root / "b").mkdir()
    with Store(root / "a" / "authz.sqlite") as store:
        token = store.add_principal("ops-tls", "operator")
    port = free_port()
    tls = ["--tls-cert", str(certs.server_cert), "--tls-key", str(certs.server_key)]
    sidecar = start_authz(root / "a", extra=["--console-origin", f"http://127.0.0.1:{port}", *tls])
    try:
        other = start_authz(root / "b")
        try:
            yield TlsSidecar(sidecar, other, certs, token, port)
        finally:
            other.stop()
    finally:
        sidecar.stop()


def _env(**values: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HANDRAIL_AUTHZ")}
    env.update(values)
    return env


def _console_argv(s: TlsSidecar, *extra: str) -> list[str]:
    return ["console", "--executor", s.other.address, "--listen", f"127.0.0.1:{s.console_port}", *extra]


def _refused(s: TlsSidecar, env: dict[str, str], *extra: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "handrail", *_console_argv(s, "--start-timeout", "2", *extra)]
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60, check=False)


def test_the_console_reaches_a_tls_sidecar_from_the_operators_environment(tls_sidecar: TlsSidecar) -> None:
    s = tls_sidecar
    env = _env(
        HANDRAIL_AUTHZ=f"localhost:{s.port}",
        HANDRAIL_AUTHZ_CA=str(s.certs.ca),
        HANDRAIL_AUTHZ_SERVER_NAME=SERVER_NAME,
    )
    console = start_server("console", _console_argv(s), ready_prefix=READY, env=env)
    try:
        with httpx.Client(base_url=console.address, timeout=10) as c:
            form = c.get("/signin")
            csrf = re.search(r'name="csrf" value="([^"]+)"', form.text)
            assert csrf is not None
            r = c.post("/signin", data={"csrf": csrf.group(1), "token": s.operator_token, "next": "/"})
            assert r.status_code == 303, r.text  # the sidecar said who the token is, over TLS
            assert c.get("/approvals").status_code == 200
    finally:
        console.stop()


@pytest.mark.parametrize(
    ("case", "settings", "options", "said"),
    [
        ("no CA: plaintext to a TLS sidecar", {}, (), "cannot reach the authz sidecar"),
        ("another CA", {"HANDRAIL_AUTHZ_CA": "other"}, (), "cannot reach the authz sidecar"),
        (
            "a name the certificate does not carry",
            {"HANDRAIL_AUTHZ_CA": "ca", "HANDRAIL_AUTHZ_SERVER_NAME": "authz.elsewhere.test"},
            (),
            "cannot reach the authz sidecar",
        ),
        ("a name without a CA", {}, ("--authz-server-name", SERVER_NAME), "--authz-server-name needs --authz-ca"),
        ("a CA file that is not there", {"HANDRAIL_AUTHZ_CA": "missing"}, (), "cannot read --authz-ca"),
    ],
)
def test_a_wrong_tls_setting_is_one_line_at_start(
    tls_sidecar: TlsSidecar, case: str, settings: dict[str, str], options: tuple[str, ...], said: str
) -> None:
    s = tls_sidecar
    files = {"ca": str(s.certs.ca), "other": str(s.certs.other_ca), "missing": str(s.certs.directory / "nope.pem")}
    values = {k: files.get(v, v) for k, v in settings.items()}
    done = _refused(s, _env(HANDRAIL_AUTHZ=f"localhost:{s.port}", **values), *options)
    assert done.returncode != 0, case
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and said in lines[0], (case, done.stderr)
    assert "Traceback" not in done.stderr
    assert READY not in done.stdout  # it never served
