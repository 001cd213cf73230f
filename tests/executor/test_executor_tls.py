"""The executor served over TLS (``serve_rpc(..., tls=...)``, what ``executor serve
--tls-cert --tls-key`` runs), in one process with a fake backend, seen as an attacker would:

- the SDK (sync and async) reaches it trusting its CA, by the address's host or by a
  server name; health checking and reflection answer over TLS;
- a plaintext client, a client trusting another CA and a client expecting another name
  are refused, and the executor did nothing for them;
- a client told to talk TLS never sends its token to a server that is not the one its CA
  vouches for: not to an impostor with another CA's certificate, not to a plaintext server
  at the executor's address (each with a control showing the trap does catch a token);
- every mistake an operator can make with the options is one line, exit code 2.

Throwaway certificates from ``make_certificates`` (a CA, a server certificate for
``localhost``, ``127.0.0.1`` and ``SERVER_NAME``, another CA and an impostor's certificate).
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from handrail.cli import main
from handrail.executor import (
    AsyncExecutorClient,
    ConsoleClient,
    ExecutorClient,
    ExecutorRpcError,
    ExecutorUnavailableError,
    Outcome,
)
from handrail.executor._service import SERVICE_NAME, serve_rpc
from handrail.scenarios._postgres import SERVER_NAME, Certificates, make_certificates
from tests.executor.inproc import Rig, Sidecar, running

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    pytest.importorskip("cryptography")
    made = make_certificates(tmp_path_factory.mktemp("executor-tls"))
    made.impostor()
    return made


def pem(certs: Certificates, impostor: bool = False) -> tuple[bytes, bytes]:
    cert, key = certs.impostor() if impostor else (certs.server_cert, certs.server_key)
    return cert.read_bytes(), key.read_bytes()


@asynccontextmanager
async def tls_executor(sidecar: Sidecar, ledger: Path, certs: Certificates) -> AsyncIterator[tuple[Rig, int]]:
    """An executor core with a fake backend, served with the CA's server certificate."""
    async with running(sidecar, ledger) as rig:
        server, port = await serve_rpc(rig.core, "127.0.0.1:0", tls=pem(certs))
        try:
            yield rig, port
        finally:
            await server.stop(None)


async def sessions_seen(port: int, sidecar: Sidecar, certs: Certificates) -> int:
    """How many sessions the executor has, as an operator reads them over TLS."""
    console = ConsoleClient(f"localhost:{port}", root_certificates=certs.ca.read_bytes())
    try:
        return len(await console.list_sessions(sidecar.operator_token))
    finally:
        await console.close()


def test_the_sdk_acts_over_tls_and_health_and_reflection_answer(
    sidecar: Sidecar, tmp_path: Path, certs: Certificates
) -> None:
    ca = certs.ca.read_bytes()

    async def body() -> None:
        async with tls_executor(sidecar, tmp_path / "ledger.sqlite", certs) as (rig, port):
            # by the host in the certificate, and by an IP with the name given
            for address, name in ((f"localhost:{port}", None), (f"127.0.0.1:{port}", SERVER_NAME)):
                async with AsyncExecutorClient(
                    address, rig.token, strict=True, root_certificates=ca, server_name=name
                ) as client:
                    session = await client.open_session(target=rig.target)
                    done = await session.click(session.find("button", "Pay"))
                    assert done.result.outcome is Outcome.DONE
                    await session.close()

            def sync_client() -> None:
                with ExecutorClient(f"localhost:{port}", rig.token, root_certificates=ca) as client:
                    client.open_session(target=rig.target).close()

            await asyncio.to_thread(sync_client)

            options = [("grpc.ssl_target_name_override", SERVER_NAME)]
            credentials = grpc.ssl_channel_credentials(root_certificates=ca)
            async with grpc.aio.secure_channel(f"127.0.0.1:{port}", credentials, options) as channel:
                health = health_pb2_grpc.HealthStub(channel)  # type: ignore[no-untyped-call]
                for service in ("", SERVICE_NAME):
                    answer = await health.Check(health_pb2.HealthCheckRequest(service=service), timeout=5)
                    assert answer.status == health_pb2.HealthCheckResponse.SERVING
                stub = reflection_pb2_grpc.ServerReflectionStub(channel)  # type: ignore[no-untyped-call]
                ask = reflection_pb2.ServerReflectionRequest(list_services="")
                async for reply in stub.ServerReflectionInfo(iter([ask]), timeout=5):
                    names = {s.name for s in reply.list_services_response.service}
                    assert SERVICE_NAME in names and "grpc.health.v1.Health" in names
                    break

    asyncio.run(body())


@pytest.mark.parametrize(
    "client",
    [
        "plaintext",
        "another CA",
        "a name the certificate does not carry",
    ],
)
def test_a_client_that_does_not_trust_it_rightly_is_refused_and_nothing_happens(
    sidecar: Sidecar, tmp_path: Path, certs: Certificates, client: str
) -> None:
    settings: dict[str, Any] = {
        "plaintext": {},
        "another CA": {"root_certificates": certs.other_ca.read_bytes()},
        "a name the certificate does not carry": {
            "root_certificates": certs.ca.read_bytes(),
            "server_name": "executor.elsewhere.test",
        },
    }[client]

    async def body() -> None:
        async with tls_executor(sidecar, tmp_path / "ledger.sqlite", certs) as (rig, port):
            before = await sessions_seen(port, sidecar, certs)
            async with AsyncExecutorClient(f"127.0.0.1:{port}", rig.token, timeout_s=2, **settings) as wrong:
                with pytest.raises(ExecutorUnavailableError):
                    await wrong.open_session(target=rig.target)
            assert await sessions_seen(port, sidecar, certs) == before
            assert rig.backend.dispatched == []

    asyncio.run(body())


class TokenTrap(grpc.GenericRpcHandler):
    """An attacker's gRPC server: it answers nothing and keeps every bearer token it is sent."""

    def __init__(self) -> None:
        self.tokens: list[str] = []

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> None:
        for key, value in handler_call_details.invocation_metadata:  # type: ignore[attr-defined]
            if key == "authorization":
                self.tokens.append(value)
        return None  # UNIMPLEMENTED


@dataclass
class Trap:
    handler: TokenTrap
    address: str
    fooled: dict[str, Any]  # what a client that trusts the trap is told


@pytest.fixture(params=["an impostor with another CA's certificate", "a plaintext server"])
def trap(request: pytest.FixtureRequest, certs: Certificates) -> Iterator[Trap]:
    handler = TokenTrap()
    server = grpc.server(ThreadPoolExecutor(2), handlers=[handler])
    if request.param == "a plaintext server":
        port = server.add_insecure_port("127.0.0.1:0")
        fooled: dict[str, Any] = {}
    else:
        cert, key = pem(certs, impostor=True)
        port = server.add_secure_port("127.0.0.1:0", grpc.ssl_server_credentials([(key, cert)]))
        fooled = {"root_certificates": certs.other_ca.read_bytes()}
    server.start()
    try:
        yield Trap(handler, f"localhost:{port}", fooled)
    finally:
        server.stop(None)


def test_a_tls_client_sends_its_token_to_no_server_its_ca_does_not_vouch_for(trap: Trap, certs: Certificates) -> None:
    ca = certs.ca.read_bytes()
    with (
        ExecutorClient(trap.address, "hr_agent_secret", timeout_s=2, root_certificates=ca) as sdk,
        pytest.raises(ExecutorUnavailableError),
    ):
        sdk.open_session(target="browser:x")
    assert trap.handler.tokens == []
    # The control: a client that trusts what the trap serves hands it the token.
    with (
        ExecutorClient(trap.address, "hr_agent_secret", timeout_s=2, **trap.fooled) as fooled,
        pytest.raises(ExecutorRpcError),  # the trap answers UNIMPLEMENTED
    ):
        fooled.open_session(target="browser:x")
    assert trap.handler.tokens == ["Bearer hr_agent_secret"]


def test_plaintext_where_other_hosts_reach_it_is_logged_as_a_warning(
    sidecar: Sidecar, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async def body() -> None:
        async with running(sidecar, tmp_path / "ledger.sqlite") as rig:
            for listen, warned in (("127.0.0.1:0", False), ("0.0.0.0:0", True)):
                caplog.clear()
                with caplog.at_level(logging.WARNING, logger="handrail.executor._service"):
                    server, _ = await serve_rpc(rig.core, listen)
                await server.stop(None)
                said = [r.getMessage() for r in caplog.records if "plaintext" in r.getMessage()]
                assert bool(said) is warned, (listen, said)
            assert "bearer tokens cross the network in clear" in said[0]

    asyncio.run(body())


# --- the operator's mistakes ---------------------------------------------------------------


def encrypted_key(certs: Certificates) -> Path:
    from cryptography.hazmat.primitives import serialization

    key = serialization.load_pem_private_key(certs.server_key.read_bytes(), None)
    path = certs.directory / "encrypted.key"
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(b"passphrase"),
        )
    )
    return path


@pytest.mark.parametrize(
    ("case", "argv", "env", "said"),
    [
        ("a cert without a key", ["--tls-cert", "{cert}"], {}, "--tls-cert and --tls-key go together"),
        ("a key without a cert, from the env", [], {"KEY": "{key}"}, "(--tls-cert is missing)"),
        ("a cert file that is not there", ["--tls-cert", "{nope}", "--tls-key", "{key}"], {}, "cannot read --tls-cert"),
        ("a key that is a directory", ["--tls-cert", "{cert}", "--tls-key", "{dir}"], {}, "cannot read --tls-key"),
        ("another certificate's key", ["--tls-cert", "{cert}", "--tls-key", "{impostor_key}"], {}, "is not the key of"),
        ("an encrypted key", [], {"CERT": "{cert}", "KEY": "{encrypted}"}, "--tls-key {encrypted} is encrypted"),
        ("the files swapped", ["--tls-cert", "{key}", "--tls-key", "{cert}"], {}, "holds no PEM certificate"),
        ("a certificate as the key", ["--tls-cert", "{cert}", "--tls-key", "{ca}"], {}, "holds no PEM private key"),
        ("plaintext where other hosts reach it", ["--listen", "0.0.0.0:0"], {}, "reaches other hosts"),
        ("plaintext on every IPv6 address", ["--listen", "[::]:7701"], {}, "or say --plaintext"),
        (
            "--plaintext with TLS files",
            ["--plaintext", "--tls-cert", "{cert}", "--tls-key", "{key}"],
            {},
            "--plaintext and --tls-cert contradict",
        ),
    ],
)
@pytest.mark.parametrize(
    ("command", "env_prefix", "says"),
    [
        (
            ["executor", "serve", "--token", "t", "--authz", "127.0.0.1:1"],
            "HANDRAIL_EXECUTOR_TLS_",
            "handrail executor serve: ",
        ),
        (["authz", "serve"], "HANDRAIL_AUTHZ_TLS_", "handrail-authz: "),
    ],
    ids=["executor", "authz"],
)
def test_each_tls_mistake_is_one_line_exit_2(
    command: list[str],
    env_prefix: str,
    says: str,
    certs: Certificates,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    case: str,
    argv: list[str],
    env: dict[str, str],
    said: str,
) -> None:
    for name in list(os.environ):
        if name.startswith("HANDRAIL_"):
            monkeypatch.delenv(name)
    files = {
        "cert": certs.server_cert,
        "key": certs.server_key,
        "ca": certs.ca,
        "nope": tmp_path / "nope.pem",
        "dir": tmp_path,
        "impostor_key": certs.impostor()[1],
        "encrypted": encrypted_key(certs),
    }
    fill = {k: str(v) for k, v in files.items()}
    for name, value in env.items():
        monkeypatch.setenv(f"{env_prefix}{name}", value.format(**fill))
    code = main([*command, "--data-dir", str(tmp_path / "d"), *(a.format(**fill) for a in argv)])
    err = capsys.readouterr().err
    assert code == 2, (case, err)
    assert err.count("\n") == 1 and err.startswith(says), (case, err)
    assert said.format(**fill) in err, (case, err)
    assert not (tmp_path / "d").exists()  # refused before anything started


def test_a_server_name_without_certificates_is_refused_by_the_sdk() -> None:
    """A plaintext channel checks no name: taking one silently would let the caller believe
    the executor's certificate is checked."""
    with pytest.raises(ValueError, match="without root certificates"):
        ExecutorClient("127.0.0.1:7701", "t", server_name=SERVER_NAME)
    with pytest.raises(ValueError, match="without root certificates"):
        ConsoleClient("127.0.0.1:7701", server_name=SERVER_NAME)
