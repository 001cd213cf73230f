"""Argument types the command lines share."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any


def seconds(option: str) -> Callable[[str], float]:
    """An argparse ``type`` for a duration in seconds: a finite number, not negative. Python's
    ``float`` takes ``nan``, ``inf`` and ``-5``, which a server would then take as a garbled,
    endless or silent value (``--start-timeout nan`` waited for ever, saying nothing)."""

    def check(value: str) -> float:
        try:
            number = float(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{option} takes seconds, not {value!r}") from None
        if not 0 <= number < 1e12:  # (False for nan)
            raise argparse.ArgumentTypeError(f"{option} takes a number of seconds from 0 up, not {value!r}")
        return number

    return check


def sidecar_tls(parser: Any, ca: str = "--tls-ca", server_name: str = "--tls-server-name") -> None:
    """Add the options by which a client of the authz sidecar talks TLS to it, the same in
    every command: ``ca`` (a PEM CA file; env ``HANDRAIL_AUTHZ_CA``) and ``server_name``
    (the name the sidecar's certificate carries; env ``HANDRAIL_AUTHZ_SERVER_NAME``). The
    console names them ``--authz-ca`` and ``--authz-server-name``: its ``--tls-*`` are
    its own HTTPS."""
    parser.add_argument(
        ca,
        default=os.environ.get("HANDRAIL_AUTHZ_CA", ""),
        metavar="FILE",
        help="PEM CA file: talk TLS to the sidecar and trust this CA (env HANDRAIL_AUTHZ_CA)",
    )
    parser.add_argument(
        server_name,
        default=os.environ.get("HANDRAIL_AUTHZ_SERVER_NAME", ""),
        metavar="NAME",
        help="the name in the sidecar's certificate, if not the host of --authz (env HANDRAIL_AUTHZ_SERVER_NAME)",
    )


def sidecar_roots(
    ca: str, server_name: str, ca_option: str = "--tls-ca", name_option: str = "--tls-server-name"
) -> tuple[bytes | None, str | None]:
    """What the options of :func:`sidecar_tls` say: the CA's PEM (None: plaintext) and the
    server name (None: the host dialled). A ValueError, naming the option, for a CA file
    that cannot be read and for a name without a CA (nothing would check it)."""
    if server_name and not ca:
        raise ValueError(f"{name_option} needs {ca_option} (the name is checked against the sidecar's TLS certificate)")
    if not ca:
        return None, None
    try:
        return Path(ca).read_bytes(), server_name or None
    except OSError as exc:
        raise ValueError(f"cannot read {ca_option} {ca}: {exc.strerror or exc}") from None
