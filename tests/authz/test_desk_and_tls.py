"""Desk activity and forced expiry of leases; the sidecar over TLS."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from handrail.authz import AuthzClient, AuthzRpcError, AuthzUnavailableError, _cli
from handrail.scenarios._postgres import make_certificates
from tests.authz.conftest import MakeSidecar, Sidecar
from tests.conftest import reap

TARGET = "desktop:1"


def test_report_activity_hands_the_desk_to_a_person(sidecar: Sidecar) -> None:
    exe = sidecar.client("exe")
    agent = exe.acquire(TARGET, holder="agent-a")
    sidecar.client("op").grant("agent-a", TARGET, ["input"], [])
    desk = exe.report_activity(TARGET, note="keyboard input I did not cause")
    assert (desk.holder_kind, desk.holder) == ("human", f"desk:{TARGET}")
    assert desk.epoch == agent.epoch + 1
    assert exe.check("agent-a", TARGET, agent.epoch, "input").reason == "HELD_BY_HUMAN"
    # more activity keeps the person in charge without moving the epoch
    sidecar.clock.advance(1_000)
    again = exe.report_activity(TARGET)
    assert again.epoch == desk.epoch and again.expires_at_ms == sidecar.clock.now + 600_000
    with pytest.raises(AuthzRpcError) as err:
        sidecar.client("agent-a").report_activity(TARGET)
    assert err.value.code_name == "PERMISSION_DENIED"
    freed = sidecar.client("op").hand_back(TARGET, desk.epoch, next_holder="agent-a")
    assert exe.acquire(TARGET, holder="agent-a").epoch == freed.epoch + 1


def test_expire_lease_is_admin_only_and_bumps_nothing(sidecar: Sidecar) -> None:
    exe = sidecar.client("exe")
    lease = exe.acquire(TARGET, holder="agent-a")
    for who in ("op", "exe"):
        with pytest.raises(AuthzRpcError) as err:
            sidecar.client(who).expire_lease(TARGET)
        assert err.value.code_name == "PERMISSION_DENIED"
    expired = sidecar.client("admin").expire_lease(TARGET)
    assert expired.holder_kind == "" and expired.epoch == lease.epoch
    assert exe.get_lease(TARGET).epoch == lease.epoch
    sidecar.client("op").grant("agent-a", TARGET, ["input"], [])
    assert exe.check("agent-a", TARGET, lease.epoch, "input").reason == "NO_LEASE"
    assert exe.acquire(TARGET, holder="agent-b").epoch == lease.epoch + 1


def test_cli_expire_lease(sidecar: Sidecar, capsys: pytest.CaptureFixture[str]) -> None:
    sidecar.client("exe").acquire(TARGET, holder="agent-a")
    code = _cli.main(["expire-lease", TARGET, "--authz", sidecar.address, "--token", sidecar.tokens["admin"]])
    assert code == 0 and "free (epoch 1)" in capsys.readouterr().out


def test_tls(make_sidecar: MakeSidecar, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("cryptography")
    certs = make_certificates(tmp_path)
    s = make_sidecar(tls_cert=certs.server_cert, tls_key=certs.server_key)
    with AuthzClient(s.address, s.tokens["op"], root_certificates=certs.ca.read_bytes()) as op:
        assert op.who_am_i() == ("op", "operator")
    with AuthzClient(s.address, s.tokens["op"], timeout_s=1) as plain, pytest.raises(AuthzUnavailableError):
        plain.who_am_i()
    remote = ["--authz", s.address, "--token", s.tokens["op"], "--tls-ca", str(certs.ca)]
    assert _cli.main(["lease", TARGET, *remote]) == 0
    assert "free (epoch 0)" in capsys.readouterr().out


def test_tls_needs_both_files(tmp_path: Path) -> None:
    from handrail.authz import serve

    with pytest.raises(ValueError, match="together"):
        serve(tmp_path, "127.0.0.1:0", tls_cert=b"x")


@pytest.mark.sqlite_only  # reads (or locks) the SQLite file of --data-dir
def test_one_sidecar_per_data_dir(sidecar: Sidecar) -> None:
    from handrail.authz import serve

    with pytest.raises(RuntimeError, match="another authz sidecar"):
        serve(sidecar.data_dir, "127.0.0.1:0")


@pytest.mark.parametrize(
    ("command", "ca", "name", "said"),
    [
        (["lease", TARGET, "--authz", "127.0.0.1:1", "--token", "t"], "--tls-ca", "--tls-server-name", "error: "),
        (["executor", "serve", "--token", "t"], "--tls-ca", "--tls-server-name", "handrail executor serve: "),
        (["console", "--authz", "127.0.0.1:1"], "--authz-ca", "--authz-server-name", "handrail console: "),
    ],
    ids=["authz", "executor", "console"],
)
def test_sidecar_tls_mistakes_are_one_line_naming_the_option(
    command: list[str], ca: str, name: str, said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A CA file that cannot be read, and a server name with no CA to check it against (a
    plaintext channel checks no name): exit 2 before dialling, one line naming the option.
    The authz commands printed ``[Errno 2] ...`` without the option, and they and ``executor
    serve`` dialled plaintext, ignoring the name."""
    from handrail.cli import main

    missing = tmp_path / "missing.pem"
    assert main([*command, ca, str(missing)]) == 2
    assert capsys.readouterr().err == f"{said}cannot read {ca} {missing}: No such file or directory\n"
    assert main([*command, name, "db.handrail.test"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"{said}{name} needs {ca} ") and err.count("\n") == 1


def test_a_channel_refuses_a_server_name_without_tls() -> None:
    with pytest.raises(ValueError, match="without root certificates"):
        AuthzClient("127.0.0.1:1", "t", server_name="sidecar.handrail.test")


def _serve(tmp_path: Path, env: dict[str, str], *argv: str) -> tuple[subprocess.Popen[str], int]:
    """A real ``handrail authz serve`` and its port, from its ready line."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("HANDRAIL_")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "handrail", "authz", "serve", "--data-dir", str(tmp_path / "d"), *argv],
        env={**base, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    ready = proc.stdout.readline()
    assert ready.startswith("handrail-authz listening on "), ready
    return proc, int(ready.rsplit(":", 1)[1])


def test_the_sidecar_takes_its_tls_files_from_the_env(tmp_path: Path) -> None:
    pytest.importorskip("cryptography")
    certs = make_certificates(tmp_path / "certs")
    files = {"HANDRAIL_AUTHZ_TLS_CERT": str(certs.server_cert), "HANDRAIL_AUTHZ_TLS_KEY": str(certs.server_key)}
    proc, port = _serve(tmp_path, files, "--listen", "0.0.0.0:0")  # other hosts may reach it: TLS
    try:
        with (
            AuthzClient(f"127.0.0.1:{port}", "no-such-token", root_certificates=certs.ca.read_bytes()) as tls,
            pytest.raises(AuthzRpcError) as err,
        ):
            tls.who_am_i()
        assert err.value.code_name == "UNAUTHENTICATED"  # the TLS connection was made; the token is wrong
        with AuthzClient(f"127.0.0.1:{port}", "t", timeout_s=1) as plain, pytest.raises(AuthzUnavailableError):
            plain.who_am_i()
    finally:
        reap(proc)


def test_plaintext_where_other_hosts_reach_it_is_said_aloud(tmp_path: Path) -> None:
    proc, port = _serve(tmp_path, {}, "--listen", "0.0.0.0:0", "--plaintext", "--log-level", "WARNING")
    try:
        with AuthzClient(f"127.0.0.1:{port}", "no-such-token") as plain, pytest.raises(AuthzRpcError) as err:
            plain.who_am_i()
        assert err.value.code_name == "UNAUTHENTICATED"
    finally:
        proc.terminate()
        said = proc.communicate(timeout=30)[1]
    assert "serves plaintext on 0.0.0.0:0, which other hosts may reach" in said
