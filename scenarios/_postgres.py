"""A private PostgreSQL server for tests and benchmarks: initdb in a temp dir, a free
loopback port, run as an unprivileged user (PostgreSQL refuses to run as root).

:func:`private_postgres` finds the server binaries wherever they are (``PATH``,
``/usr/lib/postgresql/*/bin``, ``/usr/local/pgsql/bin``), makes a cluster in a fresh
directory owned by that user, starts ``postgres`` on ``127.0.0.1`` and a free port and
waits until it answers. :meth:`PrivatePostgres.stop` stops it and removes the directory.
With ``HANDRAIL_TEST_PG=<dsn>`` in the environment, :func:`test_database` uses that
server instead and starts nothing.

:func:`fresh_schema` gives each user of one server its own schema (a DSN whose
``search_path`` names it), so that tests sharing a server never see each other's rows.
"""

from __future__ import annotations

import glob
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "TEST_PG_ENV",
    "PostgresUnavailable",
    "PrivatePostgres",
    "fresh_schema",
    "pg_binaries",
    "pg_url",
    "private_postgres",
]

#: Names a server to use instead of a private one (a libpq DSN).
TEST_PG_ENV = "HANDRAIL_TEST_PG"

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


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


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


def private_postgres(*, durable: bool = False, settings: dict[str, str] | None = None) -> PrivatePostgres:
    """Make and start a private server; stop it with :meth:`PrivatePostgres.stop`.

    Args:
        durable: keep ``fsync`` on (benchmarks); tests turn it off, which only matters
            should the machine itself crash.
        settings: more ``-c name=value`` settings.

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
        port = _free_port()
        options = {
            "listen_addresses": "127.0.0.1",
            "port": str(port),
            "unix_socket_directories": str(directory),
            "max_connections": "200",
            "shared_buffers": "64MB",
            "fsync": "on" if durable else "off",
            "synchronous_commit": "on",
            "full_page_writes": "on" if durable else "off",
            **(settings or {}),
        }
        argv = [str(binaries / "postgres"), "-D", str(data)]
        for name, value in options.items():
            argv += ["-c", f"{name}={value}"]
        log = open(directory / "postgres.log", "wb")  # noqa: SIM115 - the server owns it
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=directory, **_as_user(user))  # type: ignore[call-overload]
        log.close()
        server = PrivatePostgres(f"postgresql://{PG_USER}@127.0.0.1:{port}/postgres", port, directory, proc)
        _wait_ready(server, directory / "postgres.log")
        return server
    except BaseException:
        shutil.rmtree(directory, ignore_errors=True)
        raise


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
