"""``free_port``: the address a test server (or a restarted replica) is started at must not be
taken in between by somebody's outgoing connection, the race CI lost once with ``bind(0)``."""

from __future__ import annotations

import random
import socket
import types

import pytest

from handrail.scenarios import _procs, free_port


def test_ports_are_below_the_kernels_range_distinct_and_free() -> None:
    low = _procs._ephemeral_low()
    ports = [free_port() for _ in range(50)]
    assert len(set(ports)) == len(ports)
    assert all(10_000 <= p < low for p in ports), ports
    for port in ports:
        with socket.create_server(("127.0.0.1", port)):  # binds: nothing took it
            pass


def test_outgoing_connections_never_land_on_a_picked_port() -> None:
    """What took the port in CI: another process's connection, given a port by the kernel."""
    picked = {free_port() for _ in range(20)}
    with socket.create_server(("127.0.0.1", 0), backlog=512) as listener:
        clients = [socket.create_connection(listener.getsockname()) for _ in range(200)]
        try:
            assert not picked & {c.getsockname()[1] for c in clients}
        finally:
            for c in clients:
                c.close()
    for port in picked:
        with socket.create_server(("127.0.0.1", port)):
            pass


def test_a_port_something_listens_on_is_passed_over(monkeypatch: pytest.MonkeyPatch) -> None:
    low = _procs._ephemeral_low()
    first, second = (lambda r: (r.randrange(10_000, low), r.randrange(10_000, low)))(random.Random(7))
    monkeypatch.setattr(_procs, "random", types.SimpleNamespace(Random=lambda: random.Random(7)))
    monkeypatch.setattr(_procs, "_given", set())
    with socket.create_server(("127.0.0.1", first)):  # taken while free_port looks
        assert free_port() == second
