"""How a console is set up: what it talks to, where it listens, how long a sign-in lasts."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["DEFAULT_LISTEN", "ConsoleConfig"]

#: Where ``handrail console`` listens by default (the sidecar's default console origin).
DEFAULT_LISTEN = "127.0.0.1:7710"


@dataclass(frozen=True)
class ConsoleConfig:
    """A console's settings.

    Attributes:
        authz: the sidecar's ``HOST:PORT``.
        executors: each executor's ``HOST:PORT``.
        listen: ``HOST:PORT`` to serve on (port 0: a free one).
        tls_cert, tls_key: PEM files: serve HTTPS (and mark the cookie Secure).
        idle_s: a sign-in ends after this long without a request.
        max_age_s: and this long after signing in.
        allowed_hosts: Host headers the console answers (others: 400, against DNS
            rebinding); empty: the listen host, ``127.0.0.1`` and ``localhost``.
        authz_root_certificates: PEM CA certificates when the sidecar speaks TLS.
        authz_server_name: the name its certificate carries, when not the host dialled.
        executor_root_certificates: PEM CA certificates when the executors speak TLS
            (every one of them).
        executor_server_name: the name their certificates carry, when not the host dialled.
    """

    authz: str
    executors: tuple[str, ...]
    listen: str = DEFAULT_LISTEN
    tls_cert: str = ""
    tls_key: str = ""
    idle_s: float = 30 * 60
    max_age_s: float = 12 * 3600
    allowed_hosts: tuple[str, ...] = field(default=())
    authz_root_certificates: bytes | None = None
    authz_server_name: str = ""
    executor_root_certificates: bytes | None = None
    executor_server_name: str = ""

    def __post_init__(self) -> None:
        if not self.allowed_hosts:
            host = self.listen.rsplit(":", 1)[0].strip("[]")
            object.__setattr__(self, "allowed_hosts", tuple(dict.fromkeys((host, "127.0.0.1", "localhost"))))

    @property
    def tls(self) -> bool:
        return bool(self.tls_cert)
