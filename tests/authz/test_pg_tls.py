"""PostgreSQL over TLS, as docs/deploy.md tells operators to reach it: sidecar replicas
(real ``handrail authz serve`` processes) and executors' ledgers with
``sslmode=verify-full&sslrootcert=...`` (and client certificates), and what an attacker
or a mistake puts in between: another CA, a certificate for another host, a server
without TLS, a ``hostssl``-only or client-certificate-only server reached without them, a
missing CA file, a client key anyone may read.

Each refusal is one line that names the problem and hides the password and the key's
``sslpassword``, said at once (no retrying for the start timeout: no retry changes a
certificate), and nothing was served or appended. One private server with ``ssl=on`` for
the module (:func:`~handrail.scenarios._postgres.private_postgres` with ``tls=``); the
session's server without TLS for ``sslmode=require`` against it. The rig is
tests/authz/pg_tls_rig.py; the ledger's own TLS tests are tests/recorder/test_pg_ledger_tls.py.
"""

from __future__ import annotations

import logging
import os
import re
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import psycopg
import pytest

from handrail.authz import AuthzClient, AuthzError, AuthzUnavailableError, GrantInfo, PgStore
from handrail.recorder import LedgerError, open_ledger
from handrail.scenarios import ServerProcess
from handrail.scenarios._postgres import (
    SERVER_NAME,
    PrivatePostgres,
    fresh_schema,
    make_certificates,
    pg_url,
    private_postgres,
    terminate,
)
from tests.authz.pg_tls_rig import (
    AT_ONCE_S,
    PASSWORD,
    SSLPASSWORD,
    TlsServer,
    clean,
    encrypted_key,
    ledger_verify,
    serve_replica,
    tls_server,
)
from tests.authz.test_replicas import _Watch

pytestmark = pytest.mark.slow

#: The replicas' password (the characters a URL must escape) and a client key's passphrase.
TARGET = "browser:1"


# `loose` takes TLS or not (so that the replicas' own choice of TLS shows), `strict` and
# every other database TLS only, `certdb` a client certificate and nothing else.
@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsServer]:
    with tls_server(tmp_path_factory.mktemp("pg-tls") / "certs") as server:
        yield server


def test_replicas_serve_and_watch_with_every_connection_over_verified_tls(tls: TlsServer, tmp_path: Path) -> None:
    """Two replicas (two roles, so the server tells their connections apart) on a database
    that would take plain connections too: checks, lease changes, and a Watch on replica A
    that sees a takeover made through replica B, which only A's LISTEN connection can tell
    it. Every connection of each replica, the listener's included, is TLS (pg_stat_ssl)."""
    _, options = tls.schema()
    dsn_a, dsn_b = tls.dsn(user="app_a", options=options), tls.dsn(user="app_b", options=options)
    with PgStore(dsn_a, pool_size=2) as store:  # the schema, and the tokens both replicas take
        tokens = {n: store.add_principal(n, r) for n, r in (("op", "operator"), ("exe", "executor"))}
        store.add_principal("agent-a", "agent")
        store.add_grant(GrantInfo("", "agent-a", "*", ("read", "input"), note="standing"), "op")
    a: ServerProcess | None = None
    b: ServerProcess | None = None
    clients: list[AuthzClient] = []
    try:
        a, b = serve_replica(dsn_a, "tls-a"), serve_replica(dsn_b, "tls-b")
        exe_a, op_b = AuthzClient(a.address, tokens["exe"]), AuthzClient(b.address, tokens["op"])
        clients += [exe_a, op_b]
        lease = exe_a.acquire(TARGET, holder="agent-a")
        assert exe_a.check("agent-a", TARGET, lease.epoch, "input").allow
        watch = _Watch(exe_a)
        try:
            time.sleep(0.2)
            took = op_b.take_over(TARGET, note="through replica B")
            event = watch.next(timeout=5.0)
            while event.kind == "grant":
                event = watch.next(timeout=5.0)
            assert (event.kind, event.change) == ("lease", "takeover") and event.lease is not None
            assert event.lease.epoch == took.epoch > lease.epoch
        finally:
            watch.close()
        assert not exe_a.check("agent-a", TARGET, lease.epoch, "input").allow  # superseded

        with psycopg.connect(tls.admin("loose"), autocommit=True) as conn:
            rows = conn.execute(
                "SELECT a.usename, a.application_name, s.ssl, s.version FROM pg_stat_activity AS a"
                " JOIN pg_stat_ssl AS s USING (pid) WHERE a.usename IN ('app_a', 'app_b')"
            ).fetchall()
        by_user = {
            u: [(app, ssl, version) for name, app, ssl, version in rows if name == u] for u in ("app_a", "app_b")
        }
        for conns in by_user.values():
            assert all(ssl and version.startswith("TLS") for _, ssl, version in conns), conns
            assert [name for name, _, _ in conns].count("handrail-authz-listener") == 1, conns  # its LISTEN
            names = [name for name, _, _ in conns]
            assert names.count("handrail-authz") >= 3, conns  # the request pool (2 at least), decisions (1)
    finally:
        for c in clients:
            c.close()
        for proc in (a, b):
            if proc is not None:
                proc.stop()
                clean("\n".join(proc.output))


# --- attacks and mistakes -----------------------------------------------------------------


def _attacks(tls: TlsServer, plain: PrivatePostgres, tmp: Path) -> dict[str, tuple[str, str, str]]:
    """name: (database, DSN, what the one line must say). Every DSN carries the password
    and a client key passphrase that must never be printed."""
    cert, key = tls.certs.client("app_a")
    other_cert, other_key = tls.certs.client("app_a", other_ca=True)
    loose_key = tmp / "world-readable.key"
    loose_key.write_bytes(key.read_bytes())
    os.chmod(loose_key, 0o644)
    ssl = {"sslpassword": SSLPASSWORD}
    plain_dsn = pg_url(plain.dsn, password=PASSWORD, sslmode="verify-full", sslrootcert=str(tls.certs.ca), **ssl)
    host = f"@db.example.internal:{tls.server.port}/"
    return {
        "another-ca": (
            "strict",
            tls.dsn("strict", sslrootcert=str(tls.certs.other_ca), **ssl),
            f"SSL error: certificate verify failed (the server's certificate is not signed by the CA in"
            f" sslrootcert={tls.certs.other_ca}",
        ),
        "another-host-name": (
            "strict",
            tls.dsn("strict", hostaddr="127.0.0.1", **ssl).replace(f"@127.0.0.1:{tls.server.port}/", host),
            'server certificate for "localhost" (and 2 other names) does not match host name "db.example.internal"',
        ),
        "no-ca-file": (
            "strict",
            tls.dsn("strict", sslrootcert=str(tmp / "nowhere" / "ca.pem"), **ssl),
            f'root certificate file "{tmp / "nowhere" / "ca.pem"}" does not exist',
        ),
        "plaintext-to-hostssl-only": (
            "strict",
            tls.dsn("strict", sslmode="disable", sslrootcert="", **ssl),
            'no pg_hba.conf entry for host "127.0.0.1", user "app_a", database "strict", no encryption',
        ),
        "server-without-tls": (
            "postgres",
            plain_dsn,
            "server does not support SSL, but SSL was required (the server has ssl=off)",
        ),
        "cert-only-without-a-cert": (
            "certdb",
            tls.dsn("certdb", **ssl),
            "connection requires a valid client certificate (no sslcert/sslkey given)",
        ),
        "cert-file-missing": (
            "certdb",
            tls.dsn("certdb", sslcert=str(tmp / "none.crt"), sslkey=str(key), **ssl),
            f"connection requires a valid client certificate (sslcert={tmp / 'none.crt'} does not exist",
        ),
        "cert-of-another-ca": (
            "certdb",
            tls.dsn("certdb", sslcert=str(other_cert), sslkey=str(other_key), **ssl),
            f"SSL error: tlsv1 alert unknown ca (the server does not trust the client certificate sslcert={other_cert})",
        ),
        "key-anyone-may-read": (
            "certdb",
            tls.dsn("certdb", sslcert=str(cert), sslkey=str(loose_key), **ssl),
            f'private key file "{loose_key}" has group or world access',
        ),
        "key-file-missing": (
            "certdb",
            tls.dsn("certdb", sslcert=str(cert), sslkey=str(tmp / "none.key"), **ssl),
            f'certificate present, but not private key file "{tmp / "none.key"}"',
        ),
        "wrong-password": (
            "strict",
            tls.dsn("strict", **ssl).replace(quote(PASSWORD, safe=""), quote(PASSWORD[::-1], safe="")),
            'password authentication failed for user "app_a"',
        ),
        "key-passphrase-wrong": (
            "certdb",
            tls.dsn("certdb", sslcert=str(cert), sslkey=str(encrypted_key(tls, tmp, "another")), **ssl),
            "bad decrypt (is sslpassword the key's passphrase?)",
        ),
    }


ATTACKS = (
    "another-ca",
    "another-host-name",
    "no-ca-file",
    "plaintext-to-hostssl-only",
    "server-without-tls",
    "cert-only-without-a-cert",
    "cert-file-missing",
    "cert-of-another-ca",
    "key-anyone-may-read",
    "key-passphrase-wrong",
    "key-file-missing",
    "wrong-password",
)


#: Well under the sidecar's 5 s start timeout and the ledger's 10 s: said at once.
@pytest.mark.parametrize("attack", ATTACKS)
def test_a_connection_tls_refuses_is_refused_in_one_line_by_the_sidecar_and_the_ledger(
    attack: str, tls: TlsServer, postgres: PrivatePostgres, tmp_path: Path
) -> None:
    """``authz serve`` exits 1 at once in one line and never listens; ``ledger verify`` says
    it in one line; the executor's ledger open raises it in one line; no table was made."""
    db, dsn, says = _attacks(tls, postgres, tmp_path)[attack]
    if db == "postgres":  # the server without TLS
        schema, in_schema = fresh_schema(postgres.dsn)
        admin = in_schema
    else:
        schema, options = tls.schema(db)
        admin = pg_url(tls.admin(db), options=options)
    dsn = pg_url(dsn, options=f"-c search_path={schema}")
    started = time.monotonic()
    serve = subprocess.Popen(
        [sys.executable, "-m", "handrail", "authz", "serve", "--store", dsn, "--listen", "127.0.0.1:0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    verify = ledger_verify(dsn)
    out, err = serve.communicate(timeout=60)
    served_in = time.monotonic() - started

    assert serve.returncode == 1, (out, err)
    assert out == "" and err.count("\n") == 1, (out, err)
    assert err.startswith("handrail-authz: cannot start: cannot connect to postgresql://"), err
    assert says in err and "within" not in err, err
    clean(err)
    assert served_in < AT_ONCE_S + 1.5, f"{served_in:.1f} s: {err}"  # (a Python start and grpc's import)

    assert verify.returncode != 0 and verify.stdout == "", verify
    assert verify.stderr.startswith("error: cannot read the ledger database postgresql://"), verify.stderr
    assert verify.stderr.count("\n") == 1 and says in verify.stderr, verify.stderr
    clean(verify.stderr)

    began = time.monotonic()
    with pytest.raises(LedgerError) as refused:
        open_ledger(dsn, executor_id="exe-1", head_dir=tmp_path / "heads")
    assert time.monotonic() - began < AT_ONCE_S
    line = str(refused.value)
    assert line.startswith("cannot connect to the ledger database postgresql://") and "\n" not in line, line
    assert says in line, line
    clean(line)

    with psycopg.connect(admin, autocommit=True) as conn:  # nothing migrated, nothing appended
        row = conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = %s", (schema,)).fetchone()
    assert row == (0,)


def test_a_password_in_the_query_string_is_hidden_in_a_string_libpq_refuses() -> None:
    """libpq quotes a query value whose ``%`` escape is bad; a ``password=`` or
    ``sslpassword=`` there, followed by more parameters, was printed as it was."""
    for key in ("password", "sslpassword"):
        secret = f"S3{secrets.token_hex(4)}%zz"
        store = f"postgresql://app@127.0.0.1:1/db?{key}={secret}&sslmode=verify-full&sslrootcert=/x/ca.pem"
        result = subprocess.run(
            [sys.executable, "-m", "handrail", "authz", "serve", "--store", store, "--listen", "127.0.0.1:0"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == 1 and result.stderr.count("\n") == 1, result.stderr
        assert "invalid percent-encoded token" in result.stderr, result.stderr
        assert secret not in result.stderr and secret[:-3] not in result.stderr, result.stderr


def test_a_man_in_the_middle_after_start_is_refused_and_nothing_is_allowed_or_appended(tmp_path: Path) -> None:
    """The server (or what now answers at its address) presents a certificate of another
    CA once a replica and an executor's ledger are running, and their connections are cut:
    every reconnection fails verification, so every check fails closed (UNAVAILABLE, never
    an allow) and an append raises (no intent is taken as durable); the replica's log says
    why without the password. With the true certificate back, checks are allowed again."""
    certs = make_certificates(tmp_path / "certs")
    server = private_postgres(tls=certs, hba="hostssl all all 127.0.0.1/32 scram-sha-256")
    replica: ServerProcess | None = None
    client: AuthzClient | None = None
    try:
        with psycopg.connect(server.dsn, autocommit=True) as conn:
            conn.execute(f"CREATE ROLE app_a LOGIN PASSWORD '{PASSWORD}'")
            conn.execute("CREATE DATABASE loose OWNER app_a")
        tls = TlsServer(server, certs)
        _, options = tls.schema()
        dsn = tls.dsn(options=options)
        with PgStore(dsn, pool_size=2) as store:
            exe = store.add_principal("exe", "executor")
            store.add_principal("agent-a", "agent")
            store.add_grant(GrantInfo("", "agent-a", "*", ("read", "input"), note="standing"), "op")
        replica = serve_replica(dsn, "tls-mitm")
        client = AuthzClient(replica.address, exe, timeout_s=1.0)
        epoch = client.acquire(TARGET, holder="agent-a").epoch
        assert client.check("agent-a", TARGET, epoch, "input").allow
        ledger = open_ledger(dsn, executor_id="exe-1", head_dir=tmp_path / "heads")
        ledger.intent("s1", "a1", "k1", "agent-a", epoch, {"action": "click", "ref": "e1"})

        def present(cert: Path, key: Path) -> None:
            assert server.directory is not None and server.proc is not None
            data = server.directory / "data"
            (data / "server.crt").write_bytes(cert.read_bytes())  # (in place: the owner and 0600 stay)
            (data / "server.key").write_bytes(key.read_bytes())
            server.proc.send_signal(signal.SIGHUP)  # PostgreSQL reloads its certificate
            time.sleep(0.3)
            with psycopg.connect(pg_url(server.dsn, sslmode="require", sslrootcert=""), autocommit=True) as conn:
                terminate(conn, "usename = 'app_a'")

        present(*certs.impostor())
        appended: list[BaseException | object] = []

        def append() -> None:  # the executor's next intent, while the checks below are asked
            try:
                appended.append(ledger.intent("s1", "a2", "k2", "agent-a", epoch, {"action": "click", "ref": "e2"}))
            except LedgerError as exc:
                appended.append(exc)

        writer = threading.Thread(target=append)
        writer.start()
        answers: list[object] = []
        for _ in range(4):
            try:
                answers.append(client.check("agent-a", TARGET, epoch, "input").allow)
            except AuthzError as exc:
                answers.append(type(exc).__name__)
        assert all(a == AuthzUnavailableError.__name__ for a in answers), answers
        writer.join(30)
        assert len(appended) == 1 and isinstance(appended[0], LedgerError), appended
        line = str(appended[0])  # after the pool's 10 s: why no connection came, not only that none did
        assert line.startswith("cannot append to ledger postgresql://127.0.0.1:") and "\n" not in line, line
        assert (
            f"certificate verify failed (the server's certificate is not signed by the CA in sslrootcert={certs.ca}"
            in line
        )
        clean(line)
        with psycopg.connect(pg_url(tls.admin("loose"), sslmode="require", sslrootcert="", options=options)) as conn:
            assert conn.execute("SELECT count(*) FROM ledger_entries").fetchone() == (1,)  # a1 only

        present(certs.server_cert, certs.server_key)
        deadline = time.monotonic() + 15
        while True:
            try:
                if client.check("agent-a", TARGET, epoch, "input").allow:
                    break
            except AuthzError:
                pass
            assert time.monotonic() < deadline, "checks did not recover with the true certificate back"
            time.sleep(0.2)
        assert ledger.intent("s1", "a3", "k3", "agent-a", epoch, {"action": "click", "ref": "e3"}).seq == 2
        assert ledger.verify().ok
        ledger.close()
    finally:
        if client is not None:
            client.close()
        if replica is not None:
            replica.stop()
        server.stop()
    log = "\n".join(replica.output if replica is not None else [])
    assert "certificate verify failed" in log
    clean(log)


def test_the_watch_listener_says_a_refused_reconnection_in_one_line(tls: TlsServer, tmp_path: Path) -> None:
    """The CA file is gone while a replica runs (a rotation half done) and its LISTEN
    connection is cut: each reconnection it tries is refused, and its warning is one log
    line (libpq's reason is two), without the password."""
    ca = tmp_path / "db-ca.pem"
    ca.write_bytes(tls.certs.ca.read_bytes())
    _, options = tls.schema()
    dsn = tls.dsn(options=options, sslrootcert=str(ca))
    replica = serve_replica(dsn, "tls-listener")
    try:
        ca.unlink()
        with psycopg.connect(tls.admin("loose"), autocommit=True) as conn:
            cut = conn.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                " WHERE usename = 'app_a' AND application_name = 'handrail-authz-listener'"
            ).fetchone()
        assert cut == (1,)
        deadline = time.monotonic() + 10
        while sum("watch listener lost its connection" in line for line in replica.output) < 3:
            assert time.monotonic() < deadline, replica.output
            time.sleep(0.1)
    finally:
        replica.stop()
    refused = [line for line in replica.output if f'root certificate file "{ca}" does not exist' in line]
    assert refused and all("watch listener lost its connection" in line for line in refused), replica.output
    for line in replica.output:
        assert re.match(r"\d{4}-\d\d-\d\d [\d:,]+ [A-Z]+ |handrail-authz listening on ", line), line
    clean("\n".join(replica.output))


def test_a_connection_to_another_host_that_does_not_verify_the_server_is_warned_once(
    tls: TlsServer, caplog: pytest.LogCaptureFixture
) -> None:
    """``sslmode=require`` (no CA) encrypts but takes any certificate: whoever answers at the
    database's address is taken for it. A replica whose DSN names another host that way
    says so in one warning at start (not one per pool), without the password; with
    ``verify-full`` it says nothing. An executor's ledger open warns too."""
    _, options = tls.schema()

    def named(**params: str) -> str:  # the server as a host that is not this machine
        dsn = tls.dsn(options=options, hostaddr="127.0.0.1", **params)
        return dsn.replace("@127.0.0.1:", f"@{SERVER_NAME}:")

    says = f"does not verify the server (sslmode=require): whoever answers at {SERVER_NAME} is taken for the database"
    for dsn, warned in ((named(sslmode="require", sslrootcert=""), 1), (named(), 0)):
        replica = serve_replica(dsn, "tls-weak")
        replica.stop()
        assert sum(says in line for line in replica.output) == warned, replica.output
        assert sum("does not verify the server" in line for line in replica.output) == warned, replica.output
        clean("\n".join(replica.output))
    _, options = tls.schema()
    with caplog.at_level(logging.WARNING, logger="handrail.pg"):
        open_ledger(named(sslmode="require", sslrootcert=""), executor_id="exe-1").close()
    assert [r.getMessage() for r in caplog.records if says in r.getMessage()], caplog.records
    clean(caplog.text)
