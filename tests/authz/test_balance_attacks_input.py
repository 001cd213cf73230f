"""Attacks on what a client of the replicas is given: targets gRPC would dial somewhere
else than meant, and deadlines gRPC takes as already past. Each is refused in one line
naming the field, before any channel opens."""

from __future__ import annotations

import math
import re

import pytest

from handrail.authz import AsyncAuthzClient, AuthzClient, InvalidArgumentError, parse_addresses


@pytest.mark.parametrize(
    ("given", "says"),
    [
        ("dns:///authz", "'dns:///authz' is not HOST:PORT"),  # grpc would dial port 443
        ("a:7700,dns:authz", "'dns:authz' is not HOST:PORT"),
        ("ipv4:10.0.0.2", "'ipv4:10.0.0.2' is not HOST:PORT"),
        ("ipv6:::1", "an IPv6 host goes in brackets"),
        ("[::1]", "'[::1]' is not HOST:PORT"),  # was: "an IPv6 host goes in brackets"
        ("a:7700 b:7700", "has a space: separate replicas with commas"),  # was: "an IPv6 host ..."
        ("authz a:7700", "has a space"),  # was taken, and never resolved
        ("unix:", "'unix:': no socket path"),
        ("unix-abstract:", "no socket path"),
    ],
)
def test_a_grpc_target_without_its_port_or_path_is_refused(given: str, says: str) -> None:
    with pytest.raises(InvalidArgumentError, match=f"^authz address: .*{re.escape(says)}"):
        parse_addresses(given)


@pytest.mark.parametrize("timeout_s", [math.nan, math.inf, 0.0, -1.0])
def test_a_deadline_grpc_would_take_as_past_is_refused(timeout_s: float) -> None:
    """Before: ``inf`` and ``nan`` made every call fail at once with DEADLINE_EXCEEDED (and 0
    with "no authz replica answered"), which reads as a sidecar that is down."""
    for client in (AuthzClient, AsyncAuthzClient):
        with pytest.raises(InvalidArgumentError, match=r"^timeout_s: must be a positive number of seconds"):
            client("127.0.0.1:7700", "token", timeout_s=timeout_s)
