"""A loopback TCP proxy a test puts between a client and a server it wants to hurt.

- ``cut()`` ends every connection through it and refuses new ones until ``restore()``;
- ``stall()`` holds every byte, both ways, until ``resume()`` (a query sent waits for its
  answer, a new connection for its handshake);
- with ``on_answer``, the server's first answer to a call on a connection (an HTTP/2
  ``HEADERS`` frame on a stream: a gRPC call was served) calls it (a test kills the server
  there) and drops that connection instead of forwarding it: the call was served, its
  answer never reaches the client.

Threads of its own, so it pumps whatever the test's or a server's event loop is doing.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable
from urllib.parse import urlsplit

from handrail.scenarios._postgres import pg_url


class TcpProxy:
    """Listens on a free loopback port (``port``) and forwards to ``upstream``."""

    def __init__(self, upstream: tuple[str, int], *, on_answer: Callable[[], None] | None = None) -> None:
        self.upstream = upstream
        self._on_answer = on_answer
        self.answers_dropped = 0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._open = True
        self._flowing = threading.Event()
        self._flowing.set()
        self._lock = threading.Lock()
        self._conns: list[socket.socket] = []
        threading.Thread(target=self._accept, name="tcp-proxy", daemon=True).start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                if not self._open:
                    client.close()
                    continue
                try:
                    server = socket.create_connection(self.upstream, timeout=5)
                except OSError:
                    client.close()
                    continue
                server.settimeout(None)
                self._conns += [client, server]
            answers = self._pump if self._on_answer is None else self._answers
            threading.Thread(target=self._pump, args=(client, server), daemon=True).start()
            threading.Thread(target=answers, args=(server, client), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                self._flowing.wait()
                dst.sendall(data)
        except OSError:
            pass
        _shut(src, dst)

    def _answers(self, server: socket.socket, client: socket.socket) -> None:
        """Forward the server's HTTP/2 frames until the first ``HEADERS`` on a stream."""
        buffered = b""
        try:
            while data := server.recv(65536):
                buffered += data
                while len(buffered) >= 9:
                    length = int.from_bytes(buffered[:3], "big")
                    if len(buffered) < 9 + length:
                        break
                    kind, stream = buffered[3], int.from_bytes(buffered[5:9], "big") & 0x7FFFFFFF
                    if kind == 0x1 and stream:  # HEADERS of an answer: the call was served
                        with self._lock:
                            self.answers_dropped += 1
                        assert self._on_answer is not None
                        self._on_answer()
                        raise OSError("answer dropped")
                    self._flowing.wait()
                    client.sendall(buffered[: 9 + length])
                    buffered = buffered[9 + length :]
        except OSError:
            pass
        _shut(server, client)

    def cut(self) -> None:
        with self._lock:
            self._open = False
            conns, self._conns = self._conns, []
        for s in conns:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()

    def restore(self) -> None:
        with self._lock:
            self._open = True

    def stall(self) -> None:
        self._flowing.clear()

    def resume(self) -> None:
        self._flowing.set()

    def close(self) -> None:
        self._flowing.set()
        self.cut()
        self._listener.close()


def _shut(*sockets: socket.socket) -> None:
    for s in sockets:
        with contextlib.suppress(OSError):
            s.shutdown(socket.SHUT_RDWR)


def upstream_of(dsn: str) -> tuple[str, int]:
    """The host and port the DSN's server listens on."""
    parts = urlsplit(pg_url(dsn))
    return parts.hostname or "127.0.0.1", parts.port or 5432


def through(dsn: str, proxy: TcpProxy) -> str:
    """``dsn`` with its host and port replaced by the proxy's."""
    return pg_url(dsn, host="127.0.0.1", port=str(proxy.port))
