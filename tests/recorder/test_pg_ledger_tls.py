"""The executors' PostgreSQL ledgers over TLS (the rig: tests/authz/pg_tls_rig.py): an
append and ``handrail ledger verify``/``tail`` with a password, an encrypted client key
with its ``sslpassword``, or a plain one; an encrypted key without its passphrase refused
at once rather than asked for on a terminal; a real ``executor serve`` whose ledger
database does not verify. The sidecar's side, and the refusals shared by both, are in
tests/authz/test_pg_tls.py."""

from __future__ import annotations

import os
import secrets
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest

from handrail.recorder import open_ledger
from handrail.scenarios import start_authz
from tests.authz.pg_tls_rig import (
    AT_ONCE_S,
    PASSWORD,
    SSLPASSWORD,
    TlsServer,
    clean,
    encrypted_key,
    ledger_verify,
    tls_server,
)

pytestmark = pytest.mark.slow


#: The replicas' password (the characters a URL must escape) and a client key's passphrase.
@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsServer]:
    with tls_server(tmp_path_factory.mktemp("pg-tls") / "certs") as server:
        yield server


def test_an_executor_ledger_appends_and_verifies_over_tls_with_a_password_or_a_client_certificate(
    tls: TlsServer, tmp_path: Path
) -> None:
    """The executor's open (open_ledger, as ``executor serve --ledger`` calls it), an intent
    and its result, then ``handrail ledger verify`` and ``tail`` over TLS: once as a role
    with a password, once on the client-certificate-only database (no password at all)."""
    cert, key = tls.certs.client("app_a"), encrypted_key(tls, tmp_path, SSLPASSWORD)
    with_cert = {"sslcert": str(cert[0]), "sslkey": str(key), "sslpassword": SSLPASSWORD}  # an encrypted key
    plain_key = {"sslcert": str(cert[0]), "sslkey": str(cert[1])}  # unencrypted, no sslpassword
    for db, password, params in (("strict", True, {}), ("certdb", False, with_cert), ("certdb", False, plain_key)):
        _, options = tls.schema(db)
        dsn = tls.dsn(db, password=password, options=options, **params)
        heads = tmp_path / secrets.token_hex(3)
        ledger = open_ledger(dsn, executor_id="exe-1", head_dir=heads)
        try:
            ledger.intent("s1", "a1", "k1", "agent-a", 1, {"action": "click", "ref": "e1"})
            ledger.result("s1", "a1", "k1", "agent-a", 1, "DONE", "OK", "OBSERVED", True)
        finally:
            ledger.close()
        done = ledger_verify(dsn, heads)
        assert done.returncode == 0, done.stderr
        assert "ok: 2 entries, chain verified" in done.stdout, done.stdout
        tail = subprocess.run(
            [sys.executable, "-m", "handrail", "ledger", "tail", "--db", dsn, "-n", "5"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert tail.returncode == 0 and "intent" in tail.stdout and "result" in tail.stdout, tail
        for text in (done.stdout, done.stderr, tail.stdout, tail.stderr):
            assert PASSWORD not in text and quote(PASSWORD, safe="") not in text


@pytest.mark.skipif(shutil.which("script") is None, reason="needs script(1) for a terminal")
def test_an_encrypted_key_without_its_passphrase_is_refused_at_once_never_asked_on_the_terminal(
    tls: TlsServer, tmp_path: Path
) -> None:
    """OpenSSL asks for an encrypted client key's passphrase on the terminal when libpq has
    no sslpassword (``Enter PEM pass phrase:``, once per connection): a sidecar or a ledger
    command started from a terminal waited there for ever. Run in one (script(1)), each
    says in one line that the key needs its passphrase and exits."""
    cert, _ = tls.certs.client("app_a")
    _, options = tls.schema("certdb")
    dsn = tls.dsn("certdb", options=options, sslcert=str(cert), sslkey=str(encrypted_key(tls, tmp_path, "unsaid")))
    says = "could not load private key file"
    for command in (["ledger", "verify", "--db", dsn], ["authz", "serve", "--store", dsn, "--listen", "127.0.0.1:0"]):
        line = shlex.join([sys.executable, "-m", "handrail", *command])
        started = time.monotonic()
        try:
            done = subprocess.run(
                ["script", "-qec", line, "/dev/null"],
                capture_output=True,
                text=True,
                timeout=20,
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired as waited:
            raise AssertionError(f"{command[:2]} still waits after 20 s: {waited.stdout!r}") from None
        out = done.stdout.replace("\r\n", "\n")
        assert "pass phrase" not in out.lower(), out
        assert done.returncode != 0 and time.monotonic() - started < AT_ONCE_S + 1.5, (done.returncode, out)
        assert out.count("\n") == 1 and says in out, out
        assert "(an encrypted key: give its passphrase as sslpassword)" in out, out
        clean(out)


def test_an_executor_whose_ledger_database_fails_verification_does_not_start(tls: TlsServer, tmp_path: Path) -> None:
    """``handrail executor serve --ledger <DSN with another CA>``, a real process with a
    real sidecar: one line naming the CA file, exit 1, at once, nothing served."""
    sidecar = start_authz(tmp_path / "authz")
    where = ["--data-dir", str(tmp_path / "authz")]
    try:
        added = subprocess.run(
            [sys.executable, "-m", "handrail", "authz", "principal", "add", "exe", "--role", "executor", *where],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert added.returncode == 0, added.stderr
        _, options = tls.schema("strict")
        ledger = tls.dsn("strict", options=options, sslrootcert=str(tls.certs.other_ca), sslpassword=SSLPASSWORD)
        command = ["executor", "serve", "--listen", "127.0.0.1:0", "--authz", sidecar.address]
        command += ["--data-dir", str(tmp_path / "exe"), "--ledger", ledger, "--executor-id", "exe-1"]
        started = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-m", "handrail", *command],
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
            env={**os.environ, "HANDRAIL_TOKEN": added.stdout.strip()},
        )
    finally:
        sidecar.stop()
    assert done.returncode == 1 and time.monotonic() - started < AT_ONCE_S + 2, (done.returncode, done.stderr)
    assert done.stdout == "" and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("handrail executor serve: cannot connect to the ledger database postgresql://")
    assert (
        f"certificate verify failed (the server's certificate is not signed by the CA in sslrootcert={tls.certs.other_ca}"
        in done.stderr
    )
    clean(done.stderr)
