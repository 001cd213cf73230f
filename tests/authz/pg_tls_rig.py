"""The rig of the PostgreSQL-over-TLS tests (tests/authz/test_pg_tls.py,
tests/recorder/test_pg_ledger_tls.py): a private server with ``ssl=on`` and a
``pg_hba.conf`` of ``hostssl``, plain and client-certificate-only databases, DSNs as an
operator writes them (verify-full, the password in the URL), and the checks every line
they print must pass (no password, no key passphrase, no traceback)."""

from __future__ import annotations

import secrets
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import psycopg

from handrail.scenarios import ServerProcess, start_server
from handrail.scenarios._postgres import (
    Certificates,
    PrivatePostgres,
    make_certificates,
    pg_url,
    private_postgres,
)

#: The replicas' password (the characters a URL must escape) and a client key's passphrase.

PASSWORD = f"Pw:{secrets.token_hex(6)}@/x"
SSLPASSWORD = f"Kp{secrets.token_hex(6)}"
HBA = """
hostssl certdb all 127.0.0.1/32 cert clientcert=verify-full
hostssl all all 127.0.0.1/32 scram-sha-256
host loose all 127.0.0.1/32 scram-sha-256
"""


@dataclass
class TlsServer:
    server: PrivatePostgres
    certs: Certificates

    def admin(self, db: str) -> str:
        """The superuser's DSN of ``db`` (verified TLS)."""
        return pg_url(self.server.dsn, dbname=db)

    def dsn(self, db: str = "loose", user: str = "app_a", *, password: bool = True, **params: str) -> str:
        """A replica's or executor's DSN: verify-full against the CA, the password in the URL."""
        auth = f"{user}:{quote(PASSWORD, safe='')}" if password else user
        query = {"sslmode": "verify-full", "sslrootcert": str(self.certs.ca), **params}
        tail = "&".join(f"{k}={quote(v, safe='/')}" for k, v in query.items() if v)
        return f"postgresql://{auth}@127.0.0.1:{self.server.port}/{db}?{tail}"

    def schema(self, db: str = "loose") -> tuple[str, str]:
        """A fresh schema of ``db`` owned by app_a: its name and its ``options`` parameter."""
        name = f"t_{secrets.token_hex(5)}"
        with psycopg.connect(self.admin(db), autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{name}" AUTHORIZATION app_a')
        return name, f"-c search_path={name}"


@contextmanager
def tls_server(directory: Path) -> Iterator[TlsServer]:
    """A private server with ``ssl=on`` (certificates in ``directory``) and :data:`HBA`:
    roles app_a and app_b (a member of app_a) with :data:`PASSWORD`, and the databases
    ``loose``, ``strict`` and ``certdb`` owned by app_a; stopped at the end."""
    certs = make_certificates(directory)
    server = private_postgres(tls=certs, hba=HBA)
    try:
        with psycopg.connect(server.dsn, autocommit=True) as conn:
            conn.execute(f"CREATE ROLE app_a LOGIN PASSWORD '{PASSWORD}'")
            conn.execute(f"CREATE ROLE app_b LOGIN PASSWORD '{PASSWORD}' IN ROLE app_a")  # a second replica's role
            for db in ("loose", "strict", "certdb"):
                conn.execute(f"CREATE DATABASE {db} OWNER app_a")
        yield TlsServer(server, certs)
    finally:
        server.stop()


def serve_replica(dsn: str, name: str) -> ServerProcess:
    return start_server(
        name, ["authz", "serve", "--store", dsn, "--listen", "127.0.0.1:0"], ready_prefix="handrail-authz listening on "
    )


def encrypted_key(tls: TlsServer, tmp: Path, passphrase: str) -> Path:
    """app_a's client key, encrypted with ``passphrase`` (mode 0600)."""
    from cryptography.hazmat.primitives import serialization

    key = serialization.load_pem_private_key(tls.certs.client("app_a")[1].read_bytes(), None)
    path = tmp / f"client-{secrets.token_hex(3)}.key"
    path.touch(mode=0o600)
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(passphrase.encode()),
        )
    )
    return path


def ledger_verify(dsn: str, data_dir: Path | None = None) -> subprocess.CompletedProcess[str]:
    extra = ["--data-dir", str(data_dir)] if data_dir else []
    return subprocess.run(
        [sys.executable, "-m", "handrail", "ledger", "verify", "--db", dsn, *extra],
        capture_output=True,
        text=True,
        timeout=60,
    )


AT_ONCE_S = 3.5


def clean(text: str) -> None:
    for secret in (PASSWORD, quote(PASSWORD, safe=""), PASSWORD[::-1], quote(PASSWORD[::-1], safe=""), SSLPASSWORD):
        assert secret not in text, text
    assert "Traceback" not in text, text
