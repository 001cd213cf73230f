"""A TCP proxy in front of the ledger's PostgreSQL that a test can stall: ``stall()`` holds
every byte in both directions (a query sent then waits for its answer, a new connection
for its handshake) until ``resume()``, which lets them all through. Threads of its own, so
it pumps whatever the test's or the executor's event loop is doing."""

from __future__ import annotations

import contextlib
import socket
import threading
from urllib.parse import urlsplit

from handrail.scenarios._postgres import pg_url


class StallProxy:
    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._flowing = threading.Event()
        self._flowing.set()
        self._lock = threading.Lock()
        self._conns: list[socket.socket] = []
        threading.Thread(target=self._accept, name="stall-proxy", daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                client.close()
                continue
            server.settimeout(None)
            with self._lock:
                self._conns += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                self._flowing.wait()
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)

    def stall(self) -> None:
        self._flowing.clear()

    def resume(self) -> None:
        self._flowing.set()

    def close(self) -> None:
        self._flowing.set()
        self._listener.close()
        with self._lock:
            conns, self._conns = self._conns, []
        for s in conns:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()


def upstream_of(dsn: str) -> tuple[str, int]:
    """The host and port the DSN's server listens on."""
    parts = urlsplit(pg_url(dsn))
    return parts.hostname or "127.0.0.1", parts.port or 5432


def through(dsn: str, proxy: StallProxy) -> str:
    """``dsn`` with its host and port replaced by the proxy's."""
    return pg_url(dsn, host="127.0.0.1", port=str(proxy.port))
