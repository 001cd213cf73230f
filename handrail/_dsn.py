"""Whether a store or ledger location names a PostgreSQL database (no driver loaded to
tell), why a first connection to one failed, and that reason without the password."""

from __future__ import annotations

import re
import time
import urllib.parse

__all__ = ["first_line", "is_pg_dsn", "redact", "why_no_connection"]

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
    in time. A connection string that does not parse is said at once."""
    import psycopg  # the driver, only where a PostgreSQL location is opened

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            psycopg.connect(dsn, connect_timeout=max(2, int(timeout_s)), autocommit=True).close()
            return ""
        except psycopg.Error as exc:
            reason = first_line(exc, dsn)
            if isinstance(exc, psycopg.ProgrammingError) or _BAD_OPTION.search(reason):
                # the string itself (a value libpq refuses before it dials): no use trying again
                return f"cannot connect to {where}: not a usable connection string: {reason}"
            if time.monotonic() + 0.2 >= deadline:
                return f"cannot connect to {where} within {timeout_s:g} s: {reason}"
        time.sleep(0.2)


#: libpq's words for an option value it refuses before it dials (``sslmode=sometimes``,
#: ``target_session_attrs``, ``channel_binding``, ``port=x`` ...).
_BAD_OPTION = re.compile(r"\binvalid [\w ]+ value\b|\binvalid port number\b")


def first_line(exc: BaseException, dsn: str = "") -> str:
    """The first line of what ``exc`` says (its type's name when it says nothing), with the
    password of ``dsn`` hidden when one is given (see :func:`redact`)."""
    text = (redact(str(exc), dsn) if dsn else str(exc)).strip()
    return text.splitlines()[0].strip() if text else type(exc).__name__


def redact(text: str, dsn: str) -> str:
    """``text`` (a driver's message about ``dsn``) with the password of ``dsn`` written as
    ``***``: libpq quotes a connection string that does not parse whole, and a password
    holding an unescaped ``@`` or ``/`` is cut into what it then calls a host or a path,
    so each piece of the password is hidden too, as are ``password=`` values."""
    secrets: set[str] = set()
    if "@" in dsn and "://" in dsn:  # a URL, its scheme mistyped or not
        userinfo = dsn.split("://", 1)[1].rsplit("@", 1)[0]
        if ":" in userinfo:
            password = userinfo.split(":", 1)[1]
            secrets.update((password, urllib.parse.unquote(password)))
            secrets.update(piece for piece in re.split(r"[@/?:#]", password) if len(piece) >= 3)
    secrets.update(m.group(1).strip("'") for m in _KEYWORD_PASSWORD.finditer(dsn))
    for secret in sorted((s for s in secrets if s), key=len, reverse=True):
        text = text.replace(secret, "***")
    return _KEYWORD_PASSWORD.sub("password=***", text)
