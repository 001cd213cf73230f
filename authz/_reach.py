"""What agents never reach: the operator console's origins, and a person's own input.

Pure rules, no I/O.

- :class:`ConsoleOrigins`: the origins the operator console is served at, configured into
  the sidecar (``handrail authz serve --console-origin URL``). Each check's Cedar context
  says whether the action's URL is one of them (``context.origin_is_console``), and the
  shipped standing policy ``agents-never-reach-the-console`` forbids every agent action
  there, whatever a grant says. A loopback console is matched on every spelling of the
  loopback host a browser accepts (``localhost``, ``127.1``, ``0x7f.0.0.1``, ``[::1]``,
  ``0.0.0.0`` ...) with the same port, so an agent cannot walk around it by respelling.
- :func:`decide_human`: the decision on a person's input at the wheel. A person who took
  the target over holds its lease; that lease is the person's scope. Their input is
  allowed only while they hold the live lease as a person, at exactly the epoch of their
  takeover; grants and Cedar policies (which are about agents) do not apply.
"""

from __future__ import annotations

import functools
import ipaddress
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from handrail._vocabulary import Reason
from handrail.authz._errors import InvalidArgumentError
from handrail.authz._models import CheckInput, Decision, HolderKind, LeaseInfo

__all__ = ["DEFAULT_CONSOLE_ORIGINS", "ConsoleOrigins", "decide_human"]

#: Where ``handrail console`` listens by default: agents never reach it, out of the box.
DEFAULT_CONSOLE_ORIGINS = ("http://127.0.0.1:7710",)

_DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}
_LOOPBACK = "<loopback>"


def _host_class(host: str) -> str:
    """The host as compared: any loopback spelling is one value; else the lowered name."""
    host = host.strip("[]").lower().rstrip(".")
    if host == "localhost" or host.endswith(".localhost"):
        return _LOOPBACK
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        try:  # the forms browsers accept besides dotted quads: 127.1, 0x7f.1, 2130706433
            address = ipaddress.ip_address(socket.inet_aton(host))
        except OSError:
            return host
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if address.is_loopback or address.is_unspecified:
        return _LOOPBACK
    return str(address)


@functools.lru_cache(maxsize=1024)  # a pure function of the text; a check asks for every URL
def _key(url: str) -> tuple[str, int] | None:
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parts.hostname:
        return None
    return _host_class(parts.hostname), port or _DEFAULT_PORTS[scheme]


@dataclass(frozen=True)
class ConsoleOrigins:
    """The origins of the operator console, as the sidecar was told them.

    Compared by host and port (http and https alike: the same listener), with every
    loopback spelling of a loopback host counting as the same host.
    """

    origins: tuple[str, ...] = ()

    @classmethod
    def parse(cls, origins: Iterable[str]) -> ConsoleOrigins:
        """Validate ``origins`` (``scheme://host[:port]``).

        Raises:
            InvalidArgumentError: one is not an http(s) origin.
        """
        kept = []
        for i, origin in enumerate(origins):
            if _key(origin) is None:
                raise InvalidArgumentError(f"console_origins[{i}]", f"{origin!r} is not an http(s) origin")
            kept.append(origin.rstrip("/"))
        return cls(tuple(kept))

    @functools.cached_property
    def _keys(self) -> frozenset[tuple[str, int]]:
        """The (host, port) of each origin, as :func:`_key` compares them (made once)."""
        return frozenset(key for key in map(_key, self.origins) if key is not None)

    def contains(self, url: str) -> bool:
        """Whether ``url`` (any URL, or an origin) is served by the console."""
        if not self.origins or not url:
            return False
        key = _key(url)
        return key is not None and key in self._keys


def decide_human(request: CheckInput, lease: LeaseInfo | None, now_ms: int) -> Decision:
    """May the person ``request.principal`` send input to ``request.target`` now?

    Allowed when the person holds the target's live lease as a person (a takeover) at
    exactly ``request.lease_epoch``. Otherwise ``NO_LEASE`` (no live lease, or another
    holder: an agent, another person) or ``STALE_EPOCH`` (they took it over, but the epoch
    moved on since).
    """
    epoch = lease.epoch if lease is not None else 0
    if lease is None or not lease.is_live(now_ms):
        return Decision(
            False,
            Reason.NO_LEASE.value,
            f"no live lease on {request.target!r}: take it over first",
            "",
            lease_epoch=epoch,
        )
    if lease.holder_kind != HolderKind.HUMAN or lease.holder != request.principal:
        who = f"{lease.holder_kind or 'nobody'} {lease.holder!r}" if lease.holder else "nobody"
        return Decision(
            False,
            Reason.NO_LEASE.value,
            f"{request.target!r} is held by {who}, not by the person {request.principal!r}: take it over first",
            "",
            lease_epoch=epoch,
        )
    if request.lease_epoch != lease.epoch:
        return Decision(
            False,
            Reason.STALE_EPOCH.value,
            f"lease epoch {request.lease_epoch} is stale; {request.principal!r} holds epoch {lease.epoch}",
            "",
            lease_epoch=epoch,
        )
    return Decision(
        True,
        Reason.ALLOW.value,
        f"{request.principal!r} holds {request.target!r} as a person at epoch {epoch}",
        "",
        lease_epoch=epoch,
    )
