"""A TCP path to the private PostgreSQL that a test can turn into a black hole.

A proxy on loopback cannot stall a connection the way a frozen host or a partitioned
network does: its kernel still acknowledges every byte and every keepalive probe, so the
client waits, as it should, on a peer that is only slow. Here the path crosses a veth pair
into a network namespace of its own, where a forwarder passes each connection on to the
server's Unix socket. ``drop()`` takes the namespace's end of the pair down: from then on
packets vanish, nothing is refused or reset, as on a real partition; ``restore()`` brings
it back. Needs root (``CAP_NET_ADMIN``), ``ip`` and ``unshare``: :func:`unavailable` says
why not, for a skip.
"""

from __future__ import annotations

import itertools
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

__all__ = ["Partition", "unavailable"]

PORT = 5432  # inside the namespace
_count = itertools.count()

# Run inside the namespace: TCP on PORT to the server's Unix socket, both ways, per connection.
_FORWARDER = r"""
import socket, sys, threading
upstream = sys.argv[1]
listener = socket.create_server(("0.0.0.0", int(sys.argv[2])))
print("ready", flush=True)
def pump(src, dst):
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        pass
    for s in (src, dst):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
while True:
    client, _ = listener.accept()
    server = socket.socket(socket.AF_UNIX)
    server.connect(upstream)
    for a, b in ((client, server), (server, client)):
        threading.Thread(target=pump, args=(a, b), daemon=True).start()
"""


def unavailable() -> str:
    """Why this machine cannot make a partition (``""`` when it can)."""
    if os.geteuid() != 0:
        return "a network namespace needs root"
    missing = [tool for tool in ("ip", "unshare", "nsenter") if shutil.which(tool) is None]
    if missing:
        return f"not installed: {', '.join(missing)}"
    probe = f"hrp{os.getpid() % 100000}x"
    made = subprocess.run(
        ["ip", "link", "add", probe, "type", "veth", "peer", "name", probe + "y"], capture_output=True
    )
    if made.returncode != 0:
        return f"no veth pairs here: {made.stderr.decode(errors='replace').strip()}"
    subprocess.run(["ip", "link", "del", probe], capture_output=True)
    return ""


def _run(*argv: str) -> None:
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: {done.stderr.strip()}")


class Partition:
    """The path to the server whose Unix socket is ``unix_socket``; ``host``:``PORT`` is
    its address for a DSN."""

    def __init__(self, unix_socket: Path) -> None:
        n = next(_count)
        self._outer = f"hr{os.getpid() % 100000}o{n}"
        self._inner = f"hr{os.getpid() % 100000}i{n}"
        subnet = f"198.18.{os.getpid() % 250}", 4 * (n % 64)  # a /30 of RFC 2544's range: no real network's
        self.host = f"{subnet[0]}.{subnet[1] + 2}"
        self.proc = subprocess.Popen(
            ["unshare", "-n", sys.executable, "-c", _FORWARDER, str(unix_socket), str(PORT)],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert self.proc.stdout is not None and self.proc.stdout.readline().strip() == "ready"
            _run("ip", "link", "add", self._outer, "type", "veth", "peer", "name", self._inner)
            _run("ip", "link", "set", self._inner, "netns", str(self.proc.pid))
            _run("ip", "addr", "add", f"{subnet[0]}.{subnet[1] + 1}/30", "dev", self._outer)
            _run("ip", "link", "set", self._outer, "up")
            self._inside("ip", "addr", "add", f"{self.host}/30", "dev", self._inner)
            self._inside("ip", "link", "set", self._inner, "up")
            self._inside("ip", "link", "set", "lo", "up")
            deadline = time.monotonic() + 10
            while True:
                try:
                    socket.create_connection((self.host, PORT), timeout=1).close()
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.05)
        except BaseException:
            self.close()
            raise

    def _inside(self, *argv: str) -> None:
        _run("nsenter", "-t", str(self.proc.pid), "-n", *argv)

    def drop(self) -> None:
        """From now on every packet either way is lost, silently."""
        self._inside("ip", "link", "set", self._inner, "down")

    def restore(self) -> None:
        self._inside("ip", "link", "set", self._inner, "up")

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait(10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        subprocess.run(["ip", "link", "del", self._outer], capture_output=True)  # (its peer goes with it)
