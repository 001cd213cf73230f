"""Running the console: uvicorn on one listener, plain or TLS, started and stopped in-process."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from dataclasses import dataclass

import uvicorn

from handrail.console._app import create_app
from handrail.console._config import ConsoleConfig

__all__ = ["RunningConsole", "bind", "serve_forever", "start_console"]


@dataclass
class RunningConsole:
    """A console serving on a background thread; ``url`` is where to open it."""

    url: str
    server: uvicorn.Server
    thread: threading.Thread

    def stop(self, timeout: float = 10.0) -> None:
        self.server.should_exit = True
        self.thread.join(timeout)


def bind(listen: str) -> socket.socket:
    host, _, port = listen.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"listen address {listen!r}: the port must be a number within 0..65535")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, int(port)))
    except OSError:
        sock.close()
        raise
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def uvicorn_config(config: ConsoleConfig) -> uvicorn.Config:
    return uvicorn.Config(
        create_app(config),
        log_level="warning",
        access_log=False,
        ssl_certfile=config.tls_cert or None,
        ssl_keyfile=config.tls_key or None,
        lifespan="on",
        timeout_graceful_shutdown=2,
    )


def start_console(config: ConsoleConfig) -> RunningConsole:
    """Bind ``config.listen`` now and serve the console on a thread until ``stop()``.

    Raises:
        OSError: the address cannot be bound.
        ValueError: the address is not HOST:PORT.
    """
    sock = bind(config.listen)
    host, port = sock.getsockname()[:2]
    server = uvicorn.Server(uvicorn_config(config))

    def run() -> None:
        with contextlib.suppress(asyncio.CancelledError):
            asyncio.run(server.serve(sockets=[sock]))
        sock.close()

    thread = threading.Thread(target=run, name="handrail-console", daemon=True)
    thread.start()
    scheme = "https" if config.tls else "http"
    shown = f"[{host}]" if ":" in host else host
    deadline = 400
    while not server.started and thread.is_alive() and deadline:
        threading.Event().wait(0.05)
        deadline -= 1
    return RunningConsole(f"{scheme}://{shown}:{port}", server, thread)


def serve_forever(config: ConsoleConfig) -> int:
    """Serve in this thread until SIGTERM or SIGINT (``handrail console``)."""
    sock = bind(config.listen)
    host, port = sock.getsockname()[:2]
    scheme = "https" if config.tls else "http"
    shown = f"[{host}]" if ":" in host else host
    print(f"handrail-console listening on {scheme}://{shown}:{port}", flush=True)
    server = uvicorn.Server(uvicorn_config(config))
    asyncio.run(server.serve(sockets=[sock]))
    sock.close()
    return 0
