"""Attacks on the clients of several sidecar replicas (real ``authz serve`` processes over
one PostgreSQL database, the cluster of :mod:`tests.authz.test_replica_faults`): a replica
stopped (SIGSTOP) in the middle of calls, every replica down and one coming back, a Watch
stream whose replica stops before it delivered anything.

Each test failed before the fix it names.
"""

from __future__ import annotations

import time

import pytest

from handrail.authz import AuthzClient, AuthzUnavailableError
from tests.authz import test_replica_faults
from tests.authz.test_replica_faults import Cluster

pytestmark = pytest.mark.slow

cluster = test_replica_faults.cluster  # three `authz serve` processes over one fresh schema

TARGET = "browser:f1"
DEADLINE_S = 1.0


def test_keepalive_finds_a_stopped_replica_within_two_seconds(cluster: Cluster) -> None:
    """Before: gRPC 1.85 ends a connection whose pings go unanswered only after
    ``grpc.http2.ping_timeout_ms`` (a minute), so a call waited out its whole deadline."""
    exe = AuthzClient(cluster.addresses.split(",")[0], cluster.tokens["exe"], timeout_s=10.0)
    try:
        exe.get_lease(TARGET)
        cluster.pause(0)
        t0 = time.monotonic()
        with pytest.raises(AuthzUnavailableError, match="ping timeout"):
            exe.get_lease(TARGET)
        assert time.monotonic() - t0 < 3.0
    finally:
        exe.close()


def test_a_replica_back_after_every_one_was_down_answers_within_seconds(cluster: Cluster) -> None:
    """Before: gRPC's reconnect backoff (1 s growing by 1.6) left the restarted replica
    unused for 6 s after a 20 s outage (and up to two minutes after a longer one)."""
    exe = AuthzClient(cluster.addresses, cluster.tokens["exe"], timeout_s=DEADLINE_S)
    try:
        exe.get_lease(TARGET)
        for i in range(3):
            cluster.kill(i)
        outage = time.monotonic() + 20.0
        while time.monotonic() < outage:  # fail closed all along
            with pytest.raises(AuthzUnavailableError, match="no authz replica answered"):
                exe.get_lease(TARGET)
            time.sleep(0.2)
        cluster.start(1)
        back = time.monotonic()
        while True:
            try:
                exe.get_lease(TARGET)
                break
            except AuthzUnavailableError:
                assert time.monotonic() - back < 2.0, "the replica that came back is not used"
                time.sleep(0.05)
    finally:
        exe.close()
