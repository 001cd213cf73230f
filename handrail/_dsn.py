"""Whether a store or ledger location names a PostgreSQL database (no driver loaded to
tell), why a first connection to one failed, and that reason without the password."""

from __future__ import annotations

import ipaddress
import logging
import os
import re
import time
import urllib.parse
from typing import Any

__all__ = [
    "NO_PROMPT",
    "RETRY_WITHIN_S",
    "TCP_DEFAULTS",
    "connect_error",
    "connect_options",
    "first_line",
    "is_pg_dsn",
    "redact",
    "tls_hint",
    "why_no_connection",
]

_KEYWORD_PASSWORD = re.compile(r"password\s*=\s*('(?:[^'\\]|\\.)*'|\S+)")


def is_pg_dsn(location: str) -> bool:
    """Whether ``location`` names a PostgreSQL database (``postgresql://`` or ``postgres://``)
    rather than a file."""
    return location.startswith(("postgresql://", "postgres://"))


def why_no_connection(dsn: str, timeout_s: float, where: str) -> str:
    """Connect to ``dsn`` once, trying again until ``timeout_s`` is spent (a database that
    is still starting); ``""`` once connected, else why not in one line naming ``where``,
    with libpq's reason (a refused port, an unknown host, a rejected password, a bad
    ``sslmode`` ...) where a connection pool's own attempts could say only that none came
    in time. A connection string that does not parse, and a connection the server or TLS
    refuses (a certificate, a key, ``pg_hba.conf``, a password), are said at once. A
    connection to another host that does not verify the server is logged as a warning."""
    import psycopg  # the driver, only where a PostgreSQL location is opened

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            conn = psycopg.connect(dsn, connect_timeout=max(2, int(timeout_s)), autocommit=True, **connect_options(dsn))
            try:
                _warn_unverified(conn, dsn, where)
            finally:
                conn.close()
            return ""
        except psycopg.Error as exc:
            reason = first_line(exc, dsn)
            if isinstance(exc, psycopg.ProgrammingError) or _BAD_OPTION.search(reason):
                # the string itself (a value libpq refuses before it dials): no use trying again
                return f"cannot connect to {where}: not a usable connection string: {reason}"
            if _REFUSED.search(reason):  # TLS or authentication: trying again changes nothing
                return f"cannot connect to {where}: {reason}{tls_hint(reason, dsn)}"
            if time.monotonic() + 0.2 >= deadline:
                return f"cannot connect to {where} within {timeout_s:g} s: {reason}"
        time.sleep(0.2)


#: The ``sslpassword`` given to libpq when the connection string has none. With none,
#: OpenSSL asks for an encrypted client key's passphrase on the terminal (``Enter PEM pass
#: phrase:``), once per connection, and a sidecar or a ledger command started from one
#: waits there; with any value it does not ask (libpq's documented switch), an
#: unencrypted key is read as before, and an encrypted one is refused at once.
NO_PROMPT = "handrail-never-prompts"


#: libpq's TCP settings for a connection whose DSN sets none of its own. A peer gone without
#: a word (a host that froze, a network that drops packets: no reset, no refusal) would
#: otherwise hold a statement, or a pooled or listening connection, until the network came
#: back, and with the system's keepalive (two hours) an idle one for as long: bytes left
#: unacknowledged for 10 s, or an idle connection's probes unanswered from 5 s on (3, 2 s
#: apart), end the connection, and the caller gets a lost connection (retried elsewhere,
#: or UNAVAILABLE). A slow statement on a live server is not cut: its kernel acknowledges.
TCP_DEFAULTS = {
    "keepalives": "1",
    "keepalives_idle": "5",
    "keepalives_interval": "2",
    "keepalives_count": "3",
    "tcp_user_timeout": "10000",
}


#: How young a call must be to be tried again after a lost connection (where trying again is
#: safe). One the server ended fails at once on first use, so trying every pooled one takes
#: no time; one gone silent takes :data:`TCP_DEFAULTS`' 10 s to fail, and trying each pooled
#: connection that way would hold the call for minutes.
RETRY_WITHIN_S = 5.0


def connect_options(dsn: str) -> dict[str, Any]:
    """The keyword arguments every connection to ``dsn`` is opened with, each only where
    ``dsn`` gives none: ``sslpassword`` (:data:`NO_PROMPT`), which keeps OpenSSL from
    asking on the terminal, and :data:`TCP_DEFAULTS`."""
    from psycopg.conninfo import conninfo_to_dict

    try:
        given = conninfo_to_dict(dsn)
    except Exception:  # (a string that does not parse is said by the connection itself)
        return {}
    options = {"sslpassword": NO_PROMPT, **TCP_DEFAULTS}
    return {name: value for name, value in options.items() if not given.get(name)}


def connect_error(dsn: str) -> str:
    """Why one connection to ``dsn`` fails now (libpq's first line, with :func:`tls_hint`),
    or ``""`` when it connects: what a pool that waited in vain for a connection cannot say
    (its own attempts are only logged)."""
    import psycopg

    try:
        psycopg.connect(dsn, connect_timeout=2, autocommit=True, **connect_options(dsn)).close()
        return ""
    except psycopg.Error as exc:
        reason = first_line(exc, dsn)
        return f"{reason}{tls_hint(reason, dsn)}"


#: The connection strings already warned of (once per process, not once per pool).
_WARNED: set[str] = set()


def _local(host: str) -> bool:
    """Whether ``host`` (a name, an IP, a socket directory) is this machine."""
    if not host or host.startswith(("/", "@")) or host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _warn_unverified(conn: Any, dsn: str, where: str) -> None:
    """Log a warning (once per ``dsn``) when ``conn``, to another host, does not verify
    the server it reached: its effective ``sslmode`` (the DSN's, ``PGSSLMODE``'s, or
    libpq's ``prefer``) is not ``verify-full``, so whatever answers at that address with
    any certificate, or none, is taken for the database, and its answers for grants."""
    options = {o.keyword: o.val for o in conn.pgconn.info}
    mode = (options.get(b"sslmode") or b"prefer").decode()
    # the name the DSN gives (with hostaddr only dialling it), else the address
    address = (options.get(b"host") or options.get(b"hostaddr") or b"").decode()
    local = all(_local(h.strip()) for h in address.split(","))
    if mode == "verify-full" or local or dsn in _WARNED:
        return
    _WARNED.add(dsn)
    logging.getLogger("handrail.pg").warning(
        "the connection to %s does not verify the server (sslmode=%s): whoever answers at %s is taken for"
        " the database; use sslmode=verify-full with sslrootcert (docs/deploy.md, TLS between the hosts)",
        where,
        mode,
        address,
    )


#: libpq's words for an option value it refuses before it dials (``sslmode=sometimes``,
#: ``target_session_attrs``, ``channel_binding``, ``port=x`` ...).
_BAD_OPTION = re.compile(r"\binvalid [\w ]+ value\b|\binvalid port number\b")


#: libpq's words for a connection that reached the server and was refused for what the
#: connection string or the server's configuration says, which no retry changes: the
#: server's certificate (another CA, another host name), the client's certificate, key or
#: CA file, a server without TLS under ``sslmode=require``, ``pg_hba.conf``, a password.
_REFUSED = re.compile(
    r"certificate verify failed|does not match host name|root certificate file|certificate file|"
    r"private key file|not private key|server does not support SSL|alert unknown ca|alert bad certificate|"
    r"alert certificate required|requires a valid client certificate|no pg_hba\.conf entry|"
    r"authentication failed for user|no password supplied"
)


def tls_hint(reason: str, dsn: str) -> str:
    """What to look at, after libpq's ``reason`` for a refused connection to ``dsn``, where
    its own words do not name the file (``""`` where they do, or for another reason)."""
    from psycopg.conninfo import conninfo_to_dict

    try:
        params = {k: str(v) for k, v in conninfo_to_dict(dsn).items()}
    except Exception:  # (a string that does not parse is said before any dial)
        return ""
    rootcert, cert = params.get("sslrootcert"), params.get("sslcert")
    if "could not load private key file" in reason:
        if not params.get("sslpassword"):
            return " (an encrypted key: give its passphrase as sslpassword)"
        return " (is sslpassword the key's passphrase?)" if "bad decrypt" in reason else ""
    if "certificate verify failed" in reason:
        ca = f"sslrootcert={rootcert}" if rootcert else "~/.postgresql/root.crt (no sslrootcert given)"
        return f" (the server's certificate is not signed by the CA in {ca}, or has expired)"
    if "alert unknown ca" in reason or "alert bad certificate" in reason:
        return f" (the server does not trust the client certificate sslcert={cert or '~/.postgresql/postgresql.crt'})"
    if "requires a valid client certificate" in reason:
        if cert and not os.path.exists(cert):
            return f" (sslcert={cert} does not exist: libpq sent no certificate)"
        return "" if cert else " (no sslcert/sslkey given)"
    if "server does not support SSL" in reason:
        return " (the server has ssl=off)"
    return ""


def first_line(exc: BaseException, dsn: str = "") -> str:
    """The first line of what ``exc`` says (its type's name when it says nothing), with the
    password of ``dsn`` hidden when one is given (see :func:`redact`)."""
    text = (redact(str(exc), dsn) if dsn else str(exc)).strip()
    return text.splitlines()[0].strip() if text else type(exc).__name__


def redact(text: str, dsn: str) -> str:
    """``text`` (a driver's message about ``dsn``) with the password of ``dsn`` written as
    ``***``: libpq quotes a connection string that does not parse whole, and a password
    holding an unescaped ``@`` or ``/`` is cut into what it then calls a host or a path,
    so each piece of the password is hidden too, as are ``password=`` values. The client
    key's ``sslpassword`` is hidden as the password is (libpq quotes a query value whose
    ``%`` escape is bad: ``invalid percent-encoded token: "..."``)."""
    secrets: set[str] = set()
    if "@" in dsn and "://" in dsn:  # a URL, its scheme mistyped or not
        userinfo = dsn.split("://", 1)[1].rsplit("@", 1)[0]
        if ":" in userinfo:
            password = userinfo.split(":", 1)[1]
            secrets.update((password, urllib.parse.unquote(password)))
            secrets.update(piece for piece in re.split(r"[@/?:#]", password) if len(piece) >= 3)
    if "://" in dsn and "?" in dsn:  # a URL's query: password= and sslpassword= end at the next &
        for pair in dsn.split("?", 1)[1].split("&"):
            key, _, value = pair.partition("=")
            if key.strip().lower() in ("password", "sslpassword") and value:
                secrets.update((value, urllib.parse.unquote(value)))
    secrets.update(m.group(1).strip("'") for m in _KEYWORD_PASSWORD.finditer(dsn))
    for secret in sorted((s for s in secrets if s), key=len, reverse=True):
        text = text.replace(secret, "***")
    return _KEYWORD_PASSWORD.sub("password=***", text)
