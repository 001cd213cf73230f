"""Argument types the command lines share."""

from __future__ import annotations

import argparse
import os
import re
import ssl
from collections.abc import Callable
from pathlib import Path
from typing import Any

from handrail._rpc import is_loopback


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


def tls_client(
    parser: Any, ca: str, server_name: str, *, peer: str, ca_env: str, name_env: str, address_option: str
) -> None:
    """Add the options by which a client talks TLS to ``peer`` (a server of Handrail's):
    ``ca`` (a PEM CA file; env ``ca_env``) and ``server_name`` (the name the server's
    certificate carries when it is not the host of ``address_option``; env ``name_env``).
    Read them with :func:`tls_roots`."""
    parser.add_argument(
        ca,
        default=os.environ.get(ca_env, ""),
        metavar="FILE",
        help=f"PEM CA file: talk TLS to {peer} and trust this CA (env {ca_env})",
    )
    parser.add_argument(
        server_name,
        default=os.environ.get(name_env, ""),
        metavar="NAME",
        help=f"the name in {peer}'s certificate, if not the host of {address_option} (env {name_env})",
    )


def sidecar_tls(parser: Any, ca: str = "--tls-ca", server_name: str = "--tls-server-name") -> None:
    """The options by which a client of the authz sidecar talks TLS to it, the same in
    every command (env ``HANDRAIL_AUTHZ_CA``, ``HANDRAIL_AUTHZ_SERVER_NAME``). The console
    names them ``--authz-ca`` and ``--authz-server-name``: its ``--tls-*`` are its own HTTPS."""
    tls_client(
        parser,
        ca,
        server_name,
        peer="the sidecar",
        ca_env="HANDRAIL_AUTHZ_CA",
        name_env="HANDRAIL_AUTHZ_SERVER_NAME",
        address_option="--authz",
    )


def executor_tls(parser: Any, ca: str = "--executor-ca", server_name: str = "--executor-server-name") -> None:
    """The options by which a client of an executor (the console, ``handrail mcp``) talks
    TLS to it: ``--executor-ca`` and ``--executor-server-name`` (env ``HANDRAIL_EXECUTOR_CA``,
    ``HANDRAIL_EXECUTOR_SERVER_NAME``)."""
    tls_client(
        parser,
        ca,
        server_name,
        peer="the executor",
        ca_env="HANDRAIL_EXECUTOR_CA",
        name_env="HANDRAIL_EXECUTOR_SERVER_NAME",
        address_option="--executor",
    )


def tls_roots(
    ca: str, server_name: str, ca_option: str, name_option: str, peer: str = "the sidecar"
) -> tuple[bytes | None, str | None]:
    """What the options of :func:`tls_client` say: the CA's PEM (None: plaintext) and the
    server name (None: the host dialled). A ValueError, naming the option, for a CA file
    that cannot be read and for a name without a CA (nothing would check it)."""
    if server_name and not ca:
        raise ValueError(f"{name_option} needs {ca_option} (the name is checked against {peer}'s TLS certificate)")
    if not ca:
        return None, None
    try:
        return Path(ca).read_bytes(), server_name or None
    except OSError as exc:
        raise ValueError(f"cannot read {ca_option} {ca}: {exc.strerror or exc}") from None


def sidecar_roots(
    ca: str, server_name: str, ca_option: str = "--tls-ca", name_option: str = "--tls-server-name"
) -> tuple[bytes | None, str | None]:
    """:func:`tls_roots` of the options of :func:`sidecar_tls`."""
    return tls_roots(ca, server_name, ca_option, name_option, "the sidecar")


def executor_roots(
    ca: str, server_name: str, ca_option: str = "--executor-ca", name_option: str = "--executor-server-name"
) -> tuple[bytes | None, str | None]:
    """:func:`tls_roots` of the options of :func:`executor_tls`."""
    return tls_roots(ca, server_name, ca_option, name_option, "the executor")


def server_tls(parser: Any, *, cert_env: str, key_env: str, tokens: str) -> None:
    """Add ``--tls-cert`` and ``--tls-key`` (PEM files, env ``cert_env`` / ``key_env``): the
    server serves TLS with them; and ``--plaintext``, without which a ``--listen`` other
    than loopback needs them (``tokens``: whose bearer tokens would cross the network).
    Read them with :func:`served_pem`."""
    parser.add_argument(
        "--plaintext",
        action="store_true",
        help="serve without TLS on an address other hosts may reach (a network you trust); without it "
        f"a --listen other than loopback needs --tls-cert and --tls-key: {tokens} tokens would cross it in clear",
    )
    parser.add_argument(
        "--tls-cert",
        default=os.environ.get(cert_env, ""),
        metavar="FILE",
        help=f"PEM certificate chain: serve TLS (with --tls-key; env {cert_env})",
    )
    parser.add_argument(
        "--tls-key",
        default=os.environ.get(key_env, ""),
        metavar="FILE",
        help=f"PEM private key of --tls-cert, not encrypted (env {key_env})",
    )


def server_pem(
    cert: str, key: str, cert_option: str = "--tls-cert", key_option: str = "--tls-key"
) -> tuple[bytes, bytes] | None:
    """What the options of :func:`server_tls` say: the certificate chain's and the key's PEM
    (None: neither given, plaintext). Checked before any port is bound, so that a mistake is
    one line naming the option rather than gRPC's "cannot listen" and its log lines: a
    ValueError for one without the other, a file that cannot be read, one that holds no
    PEM certificate or key, an encrypted key (nothing could ask for its passphrase), and a
    key that is not the certificate's."""
    if not cert and not key:
        return None
    if not cert or not key:
        missing = cert_option if not cert else key_option
        raise ValueError(f"{cert_option} and {key_option} go together ({missing} is missing)")
    pems = []
    for option, path in ((cert_option, cert), (key_option, key)):
        try:
            pems.append(Path(path).read_bytes())
        except OSError as exc:
            raise ValueError(f"cannot read {option} {path}: {exc.strerror or exc}") from None
    cert_pem, key_pem = pems
    if b"-----BEGIN CERTIFICATE-----" not in cert_pem:
        raise ValueError(f"{cert_option} {cert} holds no PEM certificate")
    if b"ENCRYPTED" in key_pem.split(b"-----END", 1)[0]:
        raise ValueError(f"{key_option} {key} is encrypted: give the key unencrypted, readable by this user only")
    if not re.search(rb"-----BEGIN [A-Z ]*PRIVATE KEY-----", key_pem):
        raise ValueError(f"{key_option} {key} holds no PEM private key")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        context.load_cert_chain(cert, key, password=lambda: b"")  # never a prompt on a terminal
    except ssl.SSLError as exc:
        if exc.reason == "KEY_VALUES_MISMATCH":
            raise ValueError(f"{key_option} {key} is not the key of the certificate in {cert_option} {cert}") from None
        raise ValueError(f"{cert_option} {cert} and {key_option} {key} do not load: {exc.reason or exc}") from None
    return cert_pem, key_pem


def served_pem(tls_cert: str, tls_key: str, plaintext: bool, listen: str) -> tuple[bytes, bytes] | None:
    """What the options of :func:`server_tls` say for ``listen``: :func:`server_pem`'s PEMs
    (None: plaintext). A ValueError also for ``--plaintext`` beside the TLS files, and for
    plaintext on an address other hosts may reach (:func:`is_loopback`) without it."""
    tls = server_pem(tls_cert, tls_key)
    if tls is not None and plaintext:
        raise ValueError("--plaintext and --tls-cert contradict each other: choose one")
    if tls is None and not plaintext and not is_loopback(listen):
        raise ValueError(
            f"--listen {listen} reaches other hosts: serve TLS there "
            "(--tls-cert and --tls-key), or say --plaintext for a network you trust"
        )
    return tls
