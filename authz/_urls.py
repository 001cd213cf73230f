"""URLs as a browser parses them: the WHATWG URL standard, through ``ada-url``.

The sidecar judges a URL by its origin, so it must find the origin Chromium will load,
not another one. Python's ``urllib.parse`` follows RFC 3986 and disagrees with browsers on
exactly the inputs an attacker writes: ``http://HOST_B\\@HOST_A/`` is HOST_A to urllib and
HOST_B to every browser (a backslash ends the authority of a special URL); ``0x7f.1`` and
``2130706433`` are 127.0.0.1 to a browser; ``bücher.test`` is ``xn--bcher-kva.test``; a tab
or a newline inside a URL is dropped. ``ada-url`` is a parser made for the standard (the
one Node.js uses), so the sidecar's origin is the browser's (checked against the real
Chromium on a table of hostile URLs in ``tests/authz/test_urls.py``).

An origin is ``scheme://host[:port]`` (default ports left out) for the schemes whose
origin is a tuple (http, https, ws, wss, ftp; ``blob:`` takes the origin of the URL inside
it); every other URL (``data:``, ``javascript:``, ``about:``, ``file:``) has an opaque
origin, written ``null``, which no grant can name.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import ada_url

from handrail.authz._errors import InvalidArgumentError

__all__ = ["OPAQUE_ORIGIN", "ParsedUrl", "grant_origin", "parse_url", "url_origin", "url_path"]

#: The origin of a URL whose origin is opaque (``data:``, ``javascript:``, ``file:`` ...).
OPAQUE_ORIGIN = "null"

#: Longest URL accepted, in characters.
MAX_URL_CHARS = 4096

_TUPLE_SCHEMES = frozenset({"http", "https", "ws", "wss", "ftp"})
_GRANTABLE = frozenset({"http", "https"})


@dataclass(frozen=True)
class ParsedUrl:
    """A URL as the WHATWG standard parses it.

    Attributes:
        href: the serialized URL (what a browser's ``location.href`` would say).
        scheme: lowercase, without the colon.
        origin: ``scheme://host[:port]``, or ``null`` for an opaque origin.
        path: the path (``/`` at least for http(s)); ``""`` for an opaque path.
        has_credentials: the URL carries a user name or password.
    """

    href: str
    scheme: str
    origin: str
    path: str
    has_credentials: bool


def _parse(url: str) -> dict[str, str] | None:
    try:
        parts = ada_url.parse_url(url)
    except ValueError:
        return None
    return {k: v for k, v in parts.items() if isinstance(v, str)}


#: How many parsed URLs are kept (a check parses its URL once; an agent's session comes
#: back to the same pages). At most ``MAX_URL_CHARS`` each: a few MB at worst.
PARSED_URLS_KEPT = 1024


@functools.lru_cache(maxsize=PARSED_URLS_KEPT)
def _parsed(url: str) -> ParsedUrl | None:
    """``url`` parsed (None: a browser would not load it); a pure function of the text, so
    kept (a ParsedUrl is immutable)."""
    parts = _parse(url)
    if parts is None:
        return None
    scheme = parts["protocol"].removesuffix(":")
    origin = parts["origin"]
    if (scheme not in _TUPLE_SCHEMES and scheme != "blob") or not origin or origin == "null":
        origin = OPAQUE_ORIGIN
    path = parts["pathname"] if scheme in _TUPLE_SCHEMES else ""
    return ParsedUrl(parts["href"], scheme, origin, path, bool(parts["username"] or parts["password"]))


def parse_url(field: str, url: str) -> ParsedUrl:
    """Parse ``url`` as a browser would.

    Raises:
        InvalidArgumentError: naming ``field``: a URL a browser would not load either.
    """
    if len(url) > MAX_URL_CHARS:
        raise InvalidArgumentError(field, f"longer than {MAX_URL_CHARS} characters")
    parsed = _parsed(url)
    if parsed is None:
        raise InvalidArgumentError(field, f"malformed URL {url!r}: a browser would not load it")
    return parsed


def url_origin(field: str, url: str) -> str:
    """The origin of ``url`` as a browser computes it; ``""`` for no URL (desktop targets).

    Raises:
        InvalidArgumentError: the URL does not parse (a browser would not load it).
    """
    if not url:
        return ""
    return parse_url(field, url).origin


def url_path(url: str) -> str:
    """The path of ``url`` as a browser parses it (``""`` for no URL or an opaque one)."""
    if not url:
        return ""
    parsed = _parsed(url) if len(url) <= MAX_URL_CHARS else None
    if parsed is None:
        return ""
    return (parsed.path or "/") if parsed.scheme in _TUPLE_SCHEMES else ""


def grant_origin(field: str, origin: str) -> str:
    """Validate a grant's origin (``scheme://host[:port]``, nothing else) and normalize it.

    Parsed the same way as the URLs it is compared with, so ``HTTP://Bücher.test:80`` and
    ``http://xn--bcher-kva.test`` are one origin.

    Raises:
        InvalidArgumentError: naming ``field``.
    """
    if not origin:
        raise InvalidArgumentError(field, "must not be empty")
    if len(origin) > MAX_URL_CHARS:
        raise InvalidArgumentError(field, f"longer than {MAX_URL_CHARS} characters")
    parts = _parse(origin)
    if parts is None:
        raise InvalidArgumentError(field, f"malformed origin {origin!r}")
    scheme = parts["protocol"].removesuffix(":")
    if scheme not in _GRANTABLE or not parts["hostname"]:
        raise InvalidArgumentError(field, f"origin {origin!r} must look like http(s)://host[:port]")
    bare = parts["pathname"] in ("", "/") and not parts["search"] and not parts["hash"]
    if not bare or parts["username"] or parts["password"] or "\\" in origin:
        raise InvalidArgumentError(field, f"origin {origin!r} must be scheme://host[:port] without path or query")
    return parts["origin"]
