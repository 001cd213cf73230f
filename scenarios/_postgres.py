"""A private PostgreSQL server for tests and benchmarks: initdb in a temp dir, a free
loopback port, run as an unprivileged user (PostgreSQL refuses to run as root).

:func:`private_postgres` finds the server binaries wherever they are (``PATH``,
``/usr/lib/postgresql/*/bin``, ``/usr/local/pgsql/bin``), makes a cluster in a fresh
directory owned by that user, starts ``postgres`` on ``127.0.0.1`` and a free port and
waits until it answers. :meth:`PrivatePostgres.stop` stops it and removes the directory.
With ``HANDRAIL_TEST_PG=<dsn>`` in the environment, :func:`test_database` uses that
server instead and starts nothing.

With ``tls=`` (:func:`make_certificates`: a throwaway CA, a server certificate for
``localhost``/``127.0.0.1``, client certificates) the server runs with ``ssl=on``, and
``hba=`` replaces its ``pg_hba.conf`` (``hostssl`` lines, ``cert`` authentication ...):
the default, for every other test, is no TLS and the ``trust`` of ``initdb -A trust``.

:func:`fresh_schema` gives each user of one server its own schema (a DSN whose
``search_path`` names it), so that tests sharing a server never see each other's rows.
"""

from __future__ import annotations

import glob
import os
import pwd
import secrets
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._procs import free_port

__all__ = [
    "SERVER_NAME",
    "TEST_PG_ENV",
    "Certificates",
    "PostgresUnavailable",
    "PrivatePostgres",
    "fresh_schema",
    "make_certificates",
    "pg_binaries",
    "pg_url",
    "private_postgres",
]

#: Names a server to use instead of a private one (a libpq DSN).
TEST_PG_ENV = "HANDRAIL_TEST_PG"

#: A name the private server's TLS certificate carries besides ``localhost`` and
#: ``127.0.0.1``, that resolves nowhere: a DSN names it with ``hostaddr=127.0.0.1`` to
#: reach the server as a host that is not this machine.
SERVER_NAME = "db.handrail.test"

#: The superuser of a private cluster.
PG_USER = "handrail"


class PostgresUnavailable(RuntimeError):
    """No PostgreSQL server binaries were found, or the server did not start."""


def pg_binaries() -> Path:
    """The directory holding ``initdb``, ``pg_ctl`` and ``postgres``.

    Raises:
        PostgresUnavailable: none was found (``scripts/bootstrap.sh`` installs Debian's
            ``postgresql``).
    """
    candidates: list[Path] = []
    found = shutil.which("initdb")
    if found:
        candidates.append(Path(os.path.realpath(found)).parent)
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(p.split("/")[-2]), reverse=True)
    candidates += [Path(p) for p in versions]
    candidates += [Path("/usr/local/pgsql/bin"), Path("/usr/pgsql/bin")]
    for directory in candidates:
        if all((directory / name).is_file() for name in ("initdb", "pg_ctl", "postgres")):
            return directory
    raise PostgresUnavailable("no PostgreSQL server binaries (initdb, pg_ctl, postgres) found")


@dataclass
class PrivatePostgres:
    """A running private server.

    Attributes:
        dsn: a libpq DSN of its ``postgres`` database as the superuser.
        port: its TCP port on 127.0.0.1.
        directory: the cluster's directory (None for a server named by ``HANDRAIL_TEST_PG``).
        proc: the ``postgres`` process (None for an outside server).
    """

    dsn: str
    port: int = 0
    directory: Path | None = None
    proc: subprocess.Popen[bytes] | None = None
    _log: list[str] = field(default_factory=list)

    def dsn_for(self, dbname: str) -> str:
        """The DSN of another database of this server."""
        return pg_url(self.dsn, dbname=dbname)

    def stop(self) -> None:
        """Stop the server (fast shutdown) and delete its directory; nothing for an outside one."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(2)  # SIGINT: fast shutdown
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)
            self.directory = None


def _as_user(user: str | None) -> dict[str, object]:
    """``subprocess`` arguments that run the child as ``user`` (the child itself, so that
    signals reach the server and not a wrapper)."""
    if user is None:
        return {}
    entry = pwd.getpwnam(user)
    return {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}


def private_postgres(
    *,
    durable: bool = False,
    settings: dict[str, str] | None = None,
    tls: Certificates | None = None,
    hba: str | None = None,
) -> PrivatePostgres:
    """Make and start a private server; stop it with :meth:`PrivatePostgres.stop`.

    Args:
        durable: keep ``fsync`` on (benchmarks); tests turn it off, which only matters
            should the machine itself crash.
        settings: more ``-c name=value`` settings.
        tls: serve TLS with these certificates (``ssl=on``; the server's key is copied into
            the cluster, mode 0600, owned by the server's user; client certificates are
            checked against ``tls.ca``). Its :attr:`~PrivatePostgres.dsn` then verifies the
            server (``sslmode=verify-full``).
        hba: the lines of ``pg_hba.conf`` (None: ``initdb``'s, trust for every connection).
            With TLS the superuser's own ``hostssl`` trust line for 127.0.0.1 comes first.

    Raises:
        PostgresUnavailable: no binaries, or the server did not come up (with its log).
    """
    binaries = pg_binaries()
    user = None
    if os.geteuid() == 0:
        user = "nobody"
        pwd.getpwnam(user)  # KeyError: no such user
    directory = Path(tempfile.mkdtemp(prefix="handrail-pg-"))
    data = directory / "data"
    if user is not None:
        entry = pwd.getpwnam(user)
        os.chown(directory, entry.pw_uid, entry.pw_gid)
    try:
        initdb = [str(binaries / "initdb"), "-D", str(data), "-U", PG_USER, "-A", "trust", "-E", "UTF8", "--no-sync"]
        done = subprocess.run(initdb, capture_output=True, cwd=directory, check=False, **_as_user(user))  # type: ignore[call-overload]
        if done.returncode != 0:
            raise PostgresUnavailable(f"initdb failed: {done.stderr.decode(errors='replace')[-2000:]}")
        port = free_port()
        tls_options: dict[str, str] = {}
        query = ""
        if tls is not None:
            tls_options = _install_tls(tls, data, user)
            query = f"?sslmode=verify-full&sslrootcert={tls.ca}"
        if hba is not None:
            first = f"hostssl all {PG_USER} 127.0.0.1/32 trust\n" if tls is not None else ""
            (data / "pg_hba.conf").write_text(f"local all all trust\n{first}{hba.strip()}\n")
        options = {
            "listen_addresses": "127.0.0.1",
            "port": str(port),
            "unix_socket_directories": str(directory),
            "max_connections": "200",
            "shared_buffers": "64MB",
            "fsync": "on" if durable else "off",
            "synchronous_commit": "on",
            "full_page_writes": "on" if durable else "off",
            **tls_options,
            **(settings or {}),
        }
        argv = [str(binaries / "postgres"), "-D", str(data)]
        for name, value in options.items():
            argv += ["-c", f"{name}={value}"]
        log = open(directory / "postgres.log", "wb")  # noqa: SIM115 - the server owns it
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=directory, **_as_user(user))  # type: ignore[call-overload]
        log.close()
        server = PrivatePostgres(f"postgresql://{PG_USER}@127.0.0.1:{port}/postgres{query}", port, directory, proc)
        _wait_ready(server, directory / "postgres.log")
        return server
    except BaseException:
        shutil.rmtree(directory, ignore_errors=True)
        raise


def _install_tls(tls: Certificates, data: Path, user: str | None) -> dict[str, str]:
    """Copy the server's certificate, key and CA into the cluster's directory (the key
    0600 and every file owned by the server's user, as PostgreSQL requires); the settings."""
    names = {"server.crt": tls.server_cert, "server.key": tls.server_key, "root.crt": tls.ca}
    for name, source in names.items():
        shutil.copyfile(source, data / name)
        os.chmod(data / name, 0o600)
        if user is not None:
            entry = pwd.getpwnam(user)
            os.chown(data / name, entry.pw_uid, entry.pw_gid)
    return {"ssl": "on", "ssl_cert_file": "server.crt", "ssl_key_file": "server.key", "ssl_ca_file": "root.crt"}


@dataclass(frozen=True)
class Certificates:
    """Throwaway TLS material in one directory (see :func:`make_certificates`); PEM files,
    the keys mode 0600.

    Attributes:
        ca: the CA's certificate (``sslrootcert``).
        server_cert, server_key: the server's, for ``localhost``, ``127.0.0.1`` and
            :data:`SERVER_NAME`.
        other_ca: a second CA, which the server's certificate does not chain to.
    """

    directory: Path
    ca: Path
    server_cert: Path
    server_key: Path
    other_ca: Path

    def client(self, user: str, *, other_ca: bool = False) -> tuple[Path, Path]:
        """A client certificate for ``user`` (its CN) and its key, signed by the CA (or by
        the other CA); made on first use."""
        stem = self.directory / f"client-{user}{'-other' if other_ca else ''}"
        cert, key = stem.with_suffix(".crt"), stem.with_suffix(".key")
        if not cert.exists():
            issuer = "other-ca" if other_ca else "ca"
            _issue(self.directory, issuer, user, cert, key, server=False)
        return cert, key

    def impostor(self) -> tuple[Path, Path]:
        """A server certificate for ``localhost`` and ``127.0.0.1`` signed by the other CA
        (a man in the middle's), and its key; made on first use."""
        cert, key = self.directory / "impostor.crt", self.directory / "impostor.key"
        if not cert.exists():
            _issue(self.directory, "other-ca", "localhost", cert, key, server=True)
        return cert, key


def make_certificates(directory: Path) -> Certificates:
    """A CA, a server certificate it signs (``localhost``, ``127.0.0.1``), and a second CA,
    in ``directory`` (made if missing). Uses the ``cryptography`` package."""
    directory.mkdir(parents=True, exist_ok=True)
    for name in ("ca", "other-ca"):
        _issue(directory, None, f"handrail test {name}", directory / f"{name}.crt", directory / f"{name}.key")
    cert, key = directory / "server.crt", directory / "server.key"
    _issue(directory, "ca", "localhost", cert, key, server=True)
    return Certificates(directory, directory / "ca.crt", cert, key, directory / "other-ca.crt")


def _issue(
    directory: Path, issuer: str | None, name: str, cert_path: Path, key_path: Path, *, server: bool = False
) -> None:
    """Write a certificate for ``name`` and its key (EC P-256): self-signed as a CA when
    ``issuer`` is None, else signed by ``directory/<issuer>.crt``'s key."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    if issuer is None:
        signer, issuer_name = key, subject
    else:
        loaded = serialization.load_pem_private_key((directory / f"{issuer}.key").read_bytes(), None)
        assert isinstance(loaded, ec.EllipticCurvePrivateKey)
        signer = loaded
        issuer_name = x509.load_pem_x509_certificate((directory / f"{issuer}.crt").read_bytes()).subject
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=issuer is None, path_length=None), critical=True)
    )
    if issuer is None:
        builder = builder.add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
        )
    else:
        usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    if server:
        alt = [x509.DNSName(name), x509.DNSName(SERVER_NAME), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
        builder = builder.add_extension(x509.SubjectAlternativeName(alt), critical=False)
    cert_path.write_bytes(builder.sign(signer, hashes.SHA256()).public_bytes(serialization.Encoding.PEM))
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    key_path.touch(mode=0o600)
    os.chmod(key_path, 0o600)
    key_path.write_bytes(pem)


def _wait_ready(server: PrivatePostgres, log: Path, timeout: float = 60.0) -> None:
    import psycopg

    deadline = time.monotonic() + timeout
    while True:
        if server.proc is not None and server.proc.poll() is not None:
            raise PostgresUnavailable(f"postgres exited: {log.read_text(errors='replace')[-2000:]}")
        try:
            with psycopg.connect(server.dsn, connect_timeout=2):
                return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                server.stop()
                raise PostgresUnavailable(f"postgres did not answer in {timeout:.0f} s") from None
            time.sleep(0.05)


def test_database() -> PrivatePostgres:
    """The server the tests use: ``$HANDRAIL_TEST_PG`` if set, else a private one."""
    dsn = os.environ.get(TEST_PG_ENV, "")
    if dsn:
        return PrivatePostgres(dsn)
    return private_postgres()


test_database.__test__ = False  # type: ignore[attr-defined]  # not a pytest test


def fresh_schema(dsn: str, prefix: str = "t") -> tuple[str, str]:
    """Create a new, empty schema; return ``(its name, a DSN whose search_path is it)``."""
    import psycopg

    name = f"{prefix}_{secrets.token_hex(6)}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{name}"')
    return name, pg_url(dsn, options=f"-c search_path={name}")


def terminate(conn: Any, where: str, params: Sequence[object] = ()) -> int:
    """End the other sessions whose ``pg_stat_activity`` rows ``where`` picks, through
    ``conn`` (in autocommit), and wait until they are gone; how many. ``pg_terminate_backend``
    only signals: a test whose next step needs them gone must wait (its own wait argument
    needs PostgreSQL 14, and the tests run on 13 too)."""
    found = conn.execute(
        f"SELECT pid FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND ({where})", params
    ).fetchall()
    pids = [int(row[0]) for row in found]
    for pid in pids:
        conn.execute("SELECT pg_terminate_backend(%s)", (pid,))
    deadline = time.monotonic() + 10
    while pids and conn.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s)", (pids,)).fetchone()[0]:
        if time.monotonic() > deadline:
            raise RuntimeError(f"sessions {pids} still there 10 s after pg_terminate_backend")
        time.sleep(0.01)
    return len(pids)


def pg_url(dsn: str, **changes: str) -> str:
    """``dsn`` (a URL or key=value string) as a ``postgresql://`` URL, with ``changes``."""
    from urllib.parse import quote, urlencode

    from psycopg.conninfo import conninfo_to_dict

    params = {k: str(v) for k, v in conninfo_to_dict(dsn).items()}
    params.update(changes)
    user = quote(params.pop("user", ""), safe="")
    password = params.pop("password", "")
    auth = f"{user}:{quote(password, safe='')}@" if password else (f"{user}@" if user else "")
    host = params.pop("host", "localhost")
    port = params.pop("port", "5432")
    dbname = quote(params.pop("dbname", ""), safe="")
    query = f"?{urlencode(params, quote_via=quote)}" if params else ""
    return f"postgresql://{auth}{host}:{port}/{dbname}{query}"


__all__ += ["test_database"]
