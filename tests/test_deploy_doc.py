"""docs/deploy.md, held to the program.

Its executor.env sets HANDRAIL_AUTHZ_CA for replicas that serve TLS.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


def test_the_executor_speaks_tls_to_the_sidecar_with_the_ca_its_environment_names(tmp_path: Path) -> None:
    """executor.env sets HANDRAIL_AUTHZ_CA for replicas that serve TLS: with it the executor
    reaches one (and hears that its token is unknown), without it it cannot reach any."""
    pytest.importorskip("cryptography")
    from handrail.authz import serve
    from tests.authz.test_desk_and_tls import _self_signed

    cert, key = _self_signed(tmp_path)
    server, port = serve(tmp_path / "authz", "127.0.0.1:0", tls_cert=cert, tls_key=key)
    try:

        def start(**env: str) -> subprocess.CompletedProcess[str]:
            argv = [sys.executable, "-m", "handrail", "executor", "serve", "--listen", "127.0.0.1:0"]
            argv += ["--data-dir", str(tmp_path / "exe")]
            full = {k: v for k, v in os.environ.items() if not k.startswith("HANDRAIL_")}
            full |= {"HANDRAIL_AUTHZ": f"127.0.0.1:{port}", "HANDRAIL_TOKEN": "hr_not_a_token", **env}
            return subprocess.run(argv, capture_output=True, text=True, env=full, timeout=60)

        trusted = start(HANDRAIL_AUTHZ_CA=str(cert))
        assert trusted.returncode == 1
        assert "refuses this executor's token (TOKEN_UNKNOWN)" in trusted.stderr, trusted.stderr
        plain = start()
        assert "cannot reach the authz sidecar" in plain.stderr, plain.stderr
        missing = start(HANDRAIL_AUTHZ_CA=str(tmp_path / "nope.pem"))
        assert missing.returncode == 2
        assert (
            missing.stderr.strip()
            == f"handrail executor serve: cannot read --tls-ca {tmp_path / 'nope.pem'}: No such file or directory"
        )
    finally:
        server.stop(0).wait()
        server.store.close()
