"""A grant's lifetime given as ``ttl_ms`` is counted on the sidecar's clock (the store's: the
database's on PostgreSQL), not on the operator's: an operator host whose clock is off must
neither stretch nor shorten a grant. Each test runs on both stores (``store_kind``)."""

from __future__ import annotations

import pytest

from handrail.authz import (
    InvalidArgumentError,
    PermissionDeniedError,
    _cli,
)
from handrail.authz._wire_calls import grant as grant_call
from handrail.proto.authz.v1 import authz_pb2 as pb
from tests.authz.conftest import Sidecar, granted

ORIGIN = "http://127.0.0.1:8000"
DAY_MS = 24 * 3600_000


def _check(sidecar: Sidecar) -> str:
    """The reason of a check of ``agent-a`` submitting on ``t1`` (its lease taken first)."""
    lease = sidecar.client("exe").acquire("t1", holder="agent-a", ttl_ms=3_600_000)
    decision = sidecar.client("exe").check(
        "agent-a", "t1", lease.epoch, "submit", url=f"{ORIGIN}/pay", element_role="button", element_name="Pay"
    )
    return str(decision.reason)


def test_cli_grant_ttl_is_counted_on_the_sidecars_clock(sidecar: Sidecar, capsys: pytest.CaptureFixture[str]) -> None:
    # The sidecar's clock is ten days behind this host's: a lifetime worked out here (this
    # host's now + 60 s, as the CLI used to send) would last ten days on the sidecar.
    sidecar.clock.now -= 10 * DAY_MS
    remote = ["--authz", sidecar.address, "--token", sidecar.tokens["op"]]
    code = _cli.main(
        [
            "grant",
            "--principal",
            "agent-a",
            "--target",
            "t1",
            "--verbs",
            "submit",
            "--origin",
            ORIGIN,
            "--ttl",
            "60",
            *remote,
        ]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    (grant,) = granted(sidecar.client("op").list_grants("agent-a"))
    assert grant.grant_id == out.strip()
    assert grant.expires_at_ms == sidecar.clock.now + 60_000
    assert _check(sidecar) == "ALLOW"
    sidecar.clock.advance(60_000)
    assert _check(sidecar) == "GRANT_EXPIRED"


def test_client_grant_ttl_ms_on_the_sidecars_clock(sidecar: Sidecar) -> None:
    sidecar.clock.now += 3 * DAY_MS  # ahead of this host: a grant timed here would be born expired
    grant = sidecar.client("op").grant("agent-a", "t1", ["submit"], [ORIGIN], ttl_ms=1000)
    assert grant.expires_at_ms == sidecar.clock.now + 1000
    assert _check(sidecar) == "ALLOW"


@pytest.mark.parametrize(
    ("ttl_ms", "expires_at_ms", "says"),
    [
        (60_000, 1, "not both"),  # either, not both
        (999, 0, "one second"),
        (-1, 0, "one second"),
        (10 * 365 * DAY_MS + 1, 0, "ten years"),
        (2**63 - 1, 0, "ten years"),  # now + ttl would pass the wire's int64
    ],
)
def test_bad_ttl_ms_is_invalid_argument_naming_it_and_stores_nothing(
    sidecar: Sidecar, ttl_ms: int, expires_at_ms: int, says: str
) -> None:
    op = sidecar.client("op")
    expires = sidecar.clock.now + DAY_MS if expires_at_ms else 0
    with pytest.raises(InvalidArgumentError) as caught:
        op.grant("agent-a", "t1", ["submit"], [ORIGIN], expires, ttl_ms=ttl_ms)
    assert caught.value.field == "ttl_ms" and says in str(caught.value)
    assert granted(op.list_grants("agent-a", include_inactive=True)) == []


def test_an_agent_sending_ttl_ms_is_refused_as_before(sidecar: Sidecar) -> None:
    with pytest.raises(PermissionDeniedError):
        sidecar.client("agent-a").grant("agent-a", "t1", ["submit"], [ORIGIN], ttl_ms=-5)


def test_ttl_ms_rides_in_the_request_not_in_the_grant() -> None:
    request = grant_call("agent-a", "t1", ["submit"], [ORIGIN], ttl_ms=5000).request
    assert isinstance(request, pb.GrantRequest)
    assert request.ttl_ms == 5000 and request.grant.expires_at_ms == 0


@pytest.mark.parametrize("value", ["nan", "inf", "-5", "soon", "1e300"])
@pytest.mark.parametrize("command", ["grant", "takeover"])
def test_cli_refuses_a_bad_duration_in_one_line(command: str, value: str, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--principal", "a", "--target", "t", "--verbs", "submit"] if command == "grant" else ["t"]
    with pytest.raises(SystemExit) as caught:
        _cli.main([command, *args, "--ttl", value, "--authz", "127.0.0.1:1", "--token", "x"])
    err = capsys.readouterr().err
    assert caught.value.code == 2
    assert "--ttl" in err and "Traceback" not in err
    assert err.strip().splitlines()[-1].startswith(f"handrail {command}: error: argument --ttl")
