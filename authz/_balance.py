"""Several sidecar replicas behind one client: the address list, balancing and failover.

A client is given one address or several (``"a:7700,b:7700,c:7700"``, or a list): the
executor's ``--authz``, the CLI's ``HANDRAIL_AUTHZ`` and any other user of
:class:`~handrail.authz.AuthzClient` / :class:`~handrail.authz.AsyncAuthzClient` get this
for nothing. :class:`Replicas` holds one channel per address and chooses, for each call,
the replicas in turn (round robin), those that failed lately last.

**Failover.** A call that finds its replica unavailable goes to the next one, within the
call's one deadline: the whole call never takes longer than the deadline, however many
replicas are down, so a caller that fails closed (the executor refuses the write with
``AUTHZ_UNAVAILABLE``) does so after at most one deadline, not one per replica. A replica
that failed is tried last for :data:`DOWN_S` seconds. Channels ping their replica every
second (gRPC keepalive), so a replica that stopped answering (``SIGSTOP``, a dead host)
is found within about two seconds and its calls fail at once instead of waiting. A
channel waits at most :data:`RECONNECT_MAX_MS` between attempts to reconnect (gRPC's
default grows to two minutes), so a replica that comes back after every one was down is
used within a second.

A replica can also hang *during* a call, before keepalive has found it. So a call that may
be sent again (below) gives each attempt an equal share of what is left of its deadline
among the replicas still to try (the last one all of it; while some have not failed
lately, only those), and a replica that has not answered within its share is left for
the next one; a call that may not be sent again gives its one replica the whole deadline.

A name that resolves to several addresses is one replica to the client: gRPC uses one of
its addresses at a time and moves to the next when that one goes (the call in flight then
fails). List the replicas to balance across them and to fail over within a call.

**What may be sent again.** A request that never reached a replica (no connection) may
go to the next one, whatever it is. A request that may have reached one (the connection
dropped during the call) goes to another replica only if doing it twice is the same as
once (:data:`RESENDABLE`): a check (a single-use grant is still consumed at most once,
and the same check sent again gets the allow the first committed: :mod:`._replay`),
reads, an acquire or renewal by the same agent, a takeover by the same person, a
revocation ... but not ``Grant`` (a second grant), ``Release`` or ``HandBack`` (the
second would find the epoch moved): those fail with :class:`AuthzUnavailableError`,
saying they may have been applied.
"""

from __future__ import annotations

import itertools
import math
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Generic, TypeVar

import grpc

from handrail.authz._channel import map_grpc_errors
from handrail.authz._errors import AuthzError, AuthzUnavailableError, InvalidArgumentError

#: How long a replica that failed is tried only after the others, in seconds.
DOWN_S = 2.0

#: The longest a channel waits before it tries to reconnect to its replica, in ms.
RECONNECT_MAX_MS = 1000

#: Channel options: ping the replica every second; two seconds without an answer end the
#: connection (the server permits it: ``_service.KEEPALIVE_SERVER_OPTIONS``). gRPC (1.85)
#: ends it only on ``ping_timeout_ms`` (default a minute): ``keepalive_timeout_ms`` alone
#: let a call wait out its whole deadline on a stopped replica. Reconnect within
#: :data:`RECONNECT_MAX_MS`: gRPC's backoff (1 s, growing by 1.6 up to 120 s) would leave
#: a replica that came back unused for as long as it had been away.
KEEPALIVE_OPTIONS = [
    ("grpc.keepalive_time_ms", 1000),
    ("grpc.keepalive_timeout_ms", 1000),
    ("grpc.http2.ping_timeout_ms", 1000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.max_pings_without_data", 0),
    ("grpc.initial_reconnect_backoff_ms", 200),
    ("grpc.max_reconnect_backoff_ms", RECONNECT_MAX_MS),
]

#: RPCs that may be sent to another replica after one may have received them.
RESENDABLE = frozenset(
    {
        "Check",
        "Revoke",
        "ListGrants",
        "CloseTask",
        "Acquire",
        "Renew",
        "TakeOver",
        "GetLease",
        "ReportActivity",
        "ExpireLease",
        "Approve",
        "Deny",
        "GetApproval",
        "ListApprovals",
        "ReloadPolicies",
        "ExplainDecision",
        "ListDecisions",
        "WhoAmI",
        "CheckHumanInput",
        "ListLeases",
        "ListPrincipals",
    }
)

# What grpc says when a request could not be sent at all (no connection was made).
_NOT_SENT = ("failed to connect", "connection refused", "dns resolution failed", "no route to host")

_C = TypeVar("_C")


#: gRPC target forms passed through as they are (``unix:/run/authz.sock`` ...).
_SCHEMES = ("unix:", "unix-abstract:", "dns:", "ipv4:", "ipv6:")


def parse_addresses(address: str | Sequence[str]) -> tuple[str, ...]:
    """The replicas' addresses: ``"a:1,b:2"`` or a list; blanks and repeats dropped.

    Each is ``HOST:PORT`` (an IPv6 host in brackets) or a gRPC target with its scheme:
    ``unix:PATH``, ``unix-abstract:NAME``, ``dns:[//AUTHORITY/]HOST:PORT``,
    ``ipv4:HOST:PORT``, ``ipv6:[HOST]:PORT``.

    Raises:
        InvalidArgumentError: no address at all, or one that is not HOST:PORT. gRPC would
            take a port past 65535 modulo 65536 (99999 dials 34463), and a missing port
            (``dns:///authz`` too) as 443.
    """
    items = address.split(",") if isinstance(address, str) else list(address)
    found = tuple(dict.fromkeys(a.strip() for a in items if a.strip()))
    if not found:
        raise InvalidArgumentError("authz address", "no sidecar address given")
    for one in found:
        _check_target(one)
    return found


def _check_target(one: str) -> None:
    scheme = next((s for s in _SCHEMES if one.startswith(s)), "")
    rest = one[len(scheme) :]
    if scheme in ("unix:", "unix-abstract:"):
        if not rest.strip("/"):
            raise InvalidArgumentError("authz address", f"{one!r}: no socket path after {scheme!r}")
        return
    if any(c.isspace() for c in rest):
        raise InvalidArgumentError("authz address", f"{one!r} has a space: separate replicas with commas")
    if scheme == "dns:" and rest.startswith("//"):
        rest = rest[2:].partition("/")[2]  # dns://AUTHORITY/HOST:PORT names its DNS server
    host, colon, port = rest.rpartition(":")
    if not colon or not host or (host.startswith("[") and not host.endswith("]")):
        raise InvalidArgumentError("authz address", f"{one!r} is not HOST:PORT")
    if ":" in host and not (host.startswith("[") and host.endswith("]")):
        raise InvalidArgumentError("authz address", f"{one!r}: an IPv6 host goes in brackets ([::1]:7700)")
    if not (port.isascii() and port.isdigit() and 0 < int(port) < 65536):
        raise InvalidArgumentError("authz address", f"{one!r}: the port must be 1 to 65535, not {port!r}")


def call_timeout(timeout_s: float) -> float:
    """``timeout_s`` if it is a deadline a call can have: a positive, finite number of seconds.

    Raises:
        InvalidArgumentError: it is not (gRPC takes ``inf`` and ``nan`` for a deadline
            already past, so every call would fail).
    """
    if not (isinstance(timeout_s, int | float) and 0 < timeout_s < math.inf):
        raise InvalidArgumentError("timeout_s", f"must be a positive number of seconds, not {timeout_s!r}")
    return float(timeout_s)


def never_sent(exc: grpc.RpcError) -> bool:
    """Whether a failed call's request cannot have reached the server."""
    code = exc.code()
    details = (exc.details() or "").lower()
    return code == grpc.StatusCode.UNAVAILABLE and any(marker in details for marker in _NOT_SENT)


def may_resend(rpc: str, exc: grpc.RpcError) -> bool:
    """Whether a call of ``rpc`` that failed with ``exc`` may go to another replica."""
    code = exc.code()
    if code != grpc.StatusCode.UNAVAILABLE:
        return False  # a deadline spent, or an answer: nothing to fail over
    return rpc in RESENDABLE or never_sent(exc)


class Replicas(Generic[_C]):
    """One channel per replica, and which to try first.

    Args:
        addresses: the replicas (see :func:`parse_addresses`).
        connect: makes the channel of one address (sync or asyncio).
    """

    def __init__(self, addresses: str | Sequence[str], connect: Callable[[str], _C]) -> None:
        self.addresses = parse_addresses(addresses)
        self.channels: list[_C] = [connect(a) for a in self.addresses]
        self._down_until = [0.0] * len(self.addresses)
        self._turn = itertools.count()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self.addresses)

    def order(self) -> list[int]:
        """The replicas to try for one call, in order: the next in turn first, the ones
        that failed lately last."""
        n = len(self.addresses)
        if n == 1:
            return [0]
        start = next(self._turn) % n
        turn = [(start + i) % n for i in range(n)]
        now = time.monotonic()
        return sorted(turn, key=lambda i: self._down_until[i] > now)

    def failed(self, index: int) -> None:
        """Try replica ``index`` last for a while."""
        with self._lock:
            self._down_until[index] = time.monotonic() + DOWN_S

    def up(self, index: int) -> bool:
        """Whether replica ``index`` has not failed lately."""
        return self._down_until[index] <= time.monotonic()

    def answered(self, index: int) -> None:
        """Replica ``index`` answered: it is as good as any."""
        if self._down_until[index]:
            with self._lock:
                self._down_until[index] = 0.0

    def describe(self) -> str:
        """The addresses, for messages."""
        return ", ".join(self.addresses)


class Attempts:
    """The attempts of one call across the replicas, within its one deadline.

    Iterate it for ``(replica index, timeout of this attempt)``; tell it each attempt that
    failed (:meth:`failed`, which raises when the call must not go on), and raise
    :meth:`exhausted` when the iteration ends.

    Args:
        replicas: the replicas.
        rpc: the RPC's name (``"Check"``): whether it may be sent again.
        timeout_s: the deadline of the whole call, in seconds.
    """

    def __init__(self, replicas: Replicas[Any], rpc: str, timeout_s: float) -> None:
        self.replicas = replicas
        self.rpc = rpc
        self._deadline = time.monotonic() + timeout_s
        self._last: AuthzError | None = None
        self._cut = False

    def __iter__(self) -> Iterator[tuple[int, float]]:
        order = self.replicas.order()
        resendable = self.rpc in RESENDABLE
        for n, index in enumerate(order):
            remaining = self._deadline - time.monotonic()
            if remaining <= 0:
                return
            # A replica that hangs must not take the whole deadline from the next ones. Past
            # one that has not failed lately, those that have are not counted (they fail at
            # once, or hang too); when this one failed lately too, every one left is.
            rest = order[n + 1 :]
            left = 1 + (sum(self.replicas.up(i) for i in rest) if self.replicas.up(index) else len(rest))
            share = remaining / left if resendable else remaining
            self._cut = share < remaining
            yield index, share

    def failed(self, index: int, exc: grpc.RpcError) -> None:
        """Attempt at replica ``index`` failed with ``exc``: return to try the next one.

        Raises:
            AuthzError: the call ends here (an answer; or a failure after which the request
                may not go to another replica).
        """
        replicas = self.replicas
        address = replicas.addresses[index]
        error = as_authz_error(exc, address)
        if not isinstance(error, AuthzUnavailableError):
            raise error from None
        replicas.failed(index)
        self._last = error
        if exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED and self._cut:
            return  # its share of the deadline is spent; the call's is not (a resendable RPC)
        if len(replicas) > 1 and not may_resend(self.rpc, exc):
            if exc.code() == grpc.StatusCode.UNAVAILABLE:
                raise maybe_applied(self.rpc, address, error) from None
            raise error from None

    def exhausted(self) -> AuthzUnavailableError:
        """The error of a call that no replica answered in time."""
        return no_replica(self.replicas, self._last)


def no_replica(replicas: Replicas[Any], last: BaseException | None) -> AuthzUnavailableError:
    """The error of a call that no replica answered in time."""
    if len(replicas) == 1 and isinstance(last, AuthzUnavailableError):
        return last
    detail = f": {last}" if last is not None else ""
    return AuthzUnavailableError(f"no authz replica answered ({replicas.describe()}){detail}")


def maybe_applied(rpc: str, address: str, exc: BaseException) -> AuthzUnavailableError:
    """The error of a call that may have been applied and is not sent again."""
    return AuthzUnavailableError(
        f"authz at {address} went away during {rpc}; it may have been applied (not sent to another replica): {exc}"
    )


def as_authz_error(exc: grpc.RpcError, address: str) -> AuthzError:
    """``exc`` as the authz error :func:`._channel.map_grpc_errors` makes of it."""
    try:
        with map_grpc_errors(address):
            raise exc
    except AuthzError as mapped:
        return mapped
    raise AssertionError("map_grpc_errors maps every grpc.RpcError")  # pragma: no cover
