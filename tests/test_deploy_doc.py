"""docs/deploy.md, held to the program: every ``handrail ...`` command and unit
``ExecStart`` parses with the real parsers, each option spelled in full; each environment
file reads the same in systemd and a shell and reaches the options it stands for; the
``HANDRAIL_*`` variables the services read are the ones the doc names; the numbers it takes
from code constants are those. The walk-through runs against a private PostgreSQL (slow).
"""

from __future__ import annotations

import argparse
import inspect
import logging
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from handrail.cli import build_parser
from handrail.scenarios import free_port
from tests.test_readme import ROOT

DOC = (ROOT / "docs" / "deploy.md").read_text()
#: (language, text) of each fenced block.
BLOCKS: list[tuple[str, str]] = re.findall(r"```(\w*)\n(.*?)```", DOC, re.S)
#: The files the doc shows, by path: "`/etc/handrail/authz.env` (...):" and the block after it.
FILES: dict[str, str] = dict(re.findall(r"^`(/etc/[^`]+)`[^\n]*:\n\n```\w*\n(.*?)```", DOC, re.S | re.M))
UNITS = {path: text for path, text in FILES.items() if path.endswith(".service")}
HANDRAIL = "/opt/handrail/bin/handrail"


# --- reading the doc's shell ------------------------------------------------------------


def logical_lines(block: str) -> list[str]:
    """The block's lines, a line ending in a backslash joined to the next."""
    return block.replace("\\\n", " ").splitlines()


def handrail_commands(line: str) -> list[list[str]]:
    """The ``handrail`` invocations on one shell line, each as its arguments (after
    ``handrail``): in ``$(...)``, after ``NAME=value`` prefixes, between ``;``, ``&``, ``|``."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    tokens = list(lexer)
    found: list[list[str]] = []
    start = True
    for i, token in enumerate(tokens):
        if token in ("do", "then") or set(token) <= set(";&|()<>$"):
            start = True
            continue
        if start and re.fullmatch(r"[A-Za-z_]\w*=.*", token):
            continue
        if start and token in ("handrail", HANDRAIL):
            argv = []
            for word in tokens[i + 1 :]:
                if set(word) <= set(";&|()<>"):
                    break
                argv.append(word)
            found.append(argv)
        start = False
    return found


def doc_commands() -> list[list[str]]:
    return [argv for _, block in BLOCKS for line in logical_lines(block) for argv in handrail_commands(line)]


def unit(text: str) -> dict[str, list[str]]:
    """A unit file's settings, each name with its values in order."""
    settings: dict[str, list[str]] = {}
    for line in text.replace("\\\n", " ").splitlines():
        line = line.strip()
        if line and line[0] not in "#;[":
            name, _, value = line.partition("=")
            settings.setdefault(name.strip(), []).append(value.strip())
    return settings


def systemd_environment(text: str) -> dict[str, str]:
    """An ``EnvironmentFile=`` as systemd reads it: a ``#`` or ``;`` starts a comment only at
    the start of a line, whitespace around a value goes, and one pair of quotes around it."""
    env = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line[0] in "#;" or "=" not in line:
            continue
        name, _, value = line.partition("=")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        env[name.strip()] = value
    return env


# --- the parsers ------------------------------------------------------------------------


def parse(argv: list[str]) -> tuple[argparse.Namespace, argparse.ArgumentParser]:
    """Parse ``handrail ARGV`` with the real parser; the innermost subparser it reached."""
    parser = build_parser(argv[0])
    try:
        args = parser.parse_args(argv)
    except SystemExit:
        pytest.fail(f"`handrail {shlex.join(argv)}` does not parse (see stderr above)")
    leaf = parser
    for word in argv:
        subs = [a for a in leaf._actions if isinstance(a, argparse._SubParsersAction)]
        if subs and word in subs[0].choices:
            leaf = subs[0].choices[word]
    return args, leaf


def options_of(parser: argparse.ArgumentParser) -> set[str]:
    return {flag for action in parser._actions for flag in action.option_strings}


def assert_exact_options(argv: list[str], leaf: argparse.ArgumentParser) -> None:
    """argparse takes an unambiguous prefix: ``--tls-ca`` would still parse were it renamed
    ``--tls-ca-file``. Each option the doc writes must be one the command has, in full."""
    known = options_of(leaf)
    for word in argv:
        if word.startswith("-") and not re.fullmatch(r"-\d+", word):
            assert word.split("=", 1)[0] in known, f"`handrail {shlex.join(argv)}`: no option {word!r}"


def check_values(args: argparse.Namespace) -> None:
    """What a command checks only when it runs: ages and CPU lists."""
    from handrail._cpus import parse_cpus

    if getattr(args, "older_than", None):  # authz prune-decisions
        from handrail.authz._cli_commands import MIN_RETENTION_MS
        from handrail.authz._explain import parse_since as authz_since

        now = int(time.time() * 1000)
        assert now - authz_since(args.older_than, now) >= MIN_RETENTION_MS, args.older_than
    if getattr(args, "since", None) and getattr(args, "ledger_command", None):
        from handrail.recorder._cli import parse_since

        parse_since(args.since)
    if getattr(args, "cpus", None):
        try:
            parse_cpus(args.cpus)
        except ValueError as exc:  # a CPU this machine lacks is the machine's, not the doc's
            assert "is not one this process may use" in str(exc), exc


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """No ``HANDRAIL_*`` variable of the test's own environment reaches the parsers."""
    for name in list(os.environ):
        if name.startswith("HANDRAIL_"):
            monkeypatch.delenv(name)
    return monkeypatch


# --- commands ---------------------------------------------------------------------------


def test_the_doc_has_its_commands_units_and_environment_files() -> None:
    commands = {" ".join(argv[:2]) for argv in doc_commands()}
    assert {"authz principal", "authz serve", "executor serve", "takeover browser:1", "ledger verify"} <= commands
    assert {"authz prune-decisions", "ledger timeline", "ledger tail", "ledger export", "authz policies"} <= commands
    assert {Path(p).name for p in UNITS} == {f"handrail-{n}.service" for n in ("authz", "executor", "prune")}
    assert {"/etc/handrail/authz.env", "/etc/handrail/executor.env"} <= set(FILES)
    for path in re.findall(r"`((?:authz|bench|executor|recorder|scripts|tests)/[\w./*]+)`", DOC):
        assert list(ROOT.glob(path)), f"docs/deploy.md names {path}, which is not there"


@pytest.mark.parametrize("argv", doc_commands(), ids=lambda argv: " ".join(argv)[:60])
def test_each_command_parses_with_its_options_spelled_in_full(argv: list[str], clean_env: pytest.MonkeyPatch) -> None:
    args, leaf = parse(argv)
    assert_exact_options(argv, leaf)
    check_values(args)


def test_the_commands_in_the_text_name_options_their_command_has() -> None:
    """`handrail authz serve ... --cpus 1` and the like in the prose: each option belongs to
    the command named before it (``a|b``: to both; ``...`` for a subcommand: to one)."""
    spans = re.findall(r"`handrail ([^`]+)`", DOC)
    assert len(spans) >= 4
    for span in spans:
        parsers, some = [build_parser(span.split()[0])], False
        for word in span.split():
            if word.startswith("-"):
                has = [word in options_of(p) for p in parsers]
                assert any(has) if some else all(has), f"`handrail {span}`: no option {word}"
                continue
            subs = [a for p in parsers for a in p._actions if isinstance(a, argparse._SubParsersAction)]
            if word == "..." and subs:
                parsers, some = [choice for action in subs for choice in action.choices.values()], True
            elif subs and set(word.split("|")) <= set(subs[0].choices):
                parsers = [subs[0].choices[name] for name in word.split("|")]


def test_every_option_the_prose_names_is_one_of_a_command() -> None:
    """`--batch ROWS`, `--durable-decisions`, `--outcome`: renamed, the doc would say so."""
    from handrail.cli import COMMANDS

    def every(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
        yield parser
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for choice in action.choices.values():
                    yield from every(choice)

    known = {flag for module in COMMANDS for p in every(build_parser(COMMANDS[module][0])) for flag in options_of(p)}
    named = set(re.findall(r"`(--[a-z][a-z-]*)[^`]*`", DOC))
    bench = (ROOT / "bench" / "authz_scale.py").read_text()  # read, not run
    elsewhere = {flag for flag in named - known if f'"{flag}"' in bench}
    assert named - known - elsewhere == set()
    assert len(named & known) >= 12


# --- units and their environment --------------------------------------------------------


def started(path: str, env: pytest.MonkeyPatch) -> tuple[dict[str, list[str]], dict[str, str], list[str], Any]:
    """A unit's settings, its environment files' variables (set in ``env``), its ``ExecStart``
    and that line parsed (the namespace and the innermost parser) in that environment."""
    settings = unit(UNITS[path])
    variables: dict[str, str] = {}
    for file in settings.get("EnvironmentFile", []):
        variables.update(systemd_environment(FILES[file.lstrip("-")]))
    for name, value in variables.items():
        env.setenv(name, value)
    argv = shlex.split(settings["ExecStart"][0])
    assert argv[0] == HANDRAIL
    return settings, variables, argv[1:], parse(argv[1:])


@pytest.mark.parametrize("path", [p for p in FILES if p.endswith(".env")])
def test_an_environment_file_reads_the_same_in_systemd_and_a_shell(path: str, tmp_path: Path) -> None:
    """systemd keeps a ``# comment`` after a value as part of it, a shell does not; a shell
    splits a command at an unquoted ``&``. A file that holds neither reads the same in both."""
    text = FILES[path]
    ours = systemd_environment(text)
    assert ours and all(name.startswith("HANDRAIL_") for name in ours)
    for name, value in ours.items():
        assert not re.search(r"\s|#", value), f"{path}: {name}={value!r} (a comment after a value is part of it)"
    (tmp_path / "env").write_text(text)
    names = " ".join(ours)
    shell = subprocess.run(
        ["bash", "-c", f'set -a; . {tmp_path / "env"}; for n in {names}; do printf "%s=%s\\0" "$n" "${{!n}}"; done'],
        capture_output=True,
        text=True,
        env={"PATH": os.environ["PATH"]},
        check=True,
    )
    assert dict(item.split("=", 1) for item in shell.stdout.split("\0") if item) == ours


@pytest.mark.parametrize("path", sorted(UNITS))
def test_a_units_start_line_parses_and_takes_its_environment(path: str, clean_env: pytest.MonkeyPatch) -> None:
    """Each variable of the unit's environment files reaches the option it stands for (a
    variable the program no longer reads, or reads under another name, does not)."""
    from handrail.authz._reach import ConsoleOrigins

    _, env, argv, (args, leaf) = started(path, clean_env)
    assert env, f"{path} has no environment file"
    assert_exact_options(argv, leaf)
    check_values(args)
    values = {str(v) for v in vars(args).values()}
    for name, value in env.items():
        if name == "HANDRAIL_CONSOLE_ORIGIN":  # read by the sidecar as it starts, not by a parser
            ConsoleOrigins.parse(v.strip() for v in value.split(","))
        else:
            assert value in values, f"{path}: {name} from its environment file reaches no option of {argv[:2]}"


@pytest.mark.parametrize("path", sorted(UNITS))
def test_a_unit_writes_only_where_its_sandbox_lets_it(path: str, clean_env: pytest.MonkeyPatch) -> None:
    """``ProtectSystem=strict`` leaves the service its ``StateDirectory=`` (and ``/tmp`` with
    ``PrivateTmp=``); ``ProtectHome=yes`` hides /home and /root. The sidecar on PostgreSQL
    writes no file; the executor writes its data dir."""
    settings, _, argv, (args, _) = started(path, clean_env)
    if settings.get("ProtectHome") == ["yes"]:
        assert not any(str(v).startswith(("/home", "/root")) for v in vars(args).values())
    if settings.get("ProtectSystem") != ["strict"]:
        return
    writable = [Path("/var/lib") / d for d in settings.get("StateDirectory", [])]
    writable += [Path(p) for p in " ".join(settings.get("ReadWritePaths", [])).split()]
    if argv[:2] == ["authz", "serve"]:
        from handrail._dsn import is_pg_dsn

        assert is_pg_dsn(args.store), f"{path}: a sidecar on SQLite writes {args.data_dir}"
    elif argv[:2] == ["executor", "serve"]:
        assert args.data_dir.is_absolute()
        assert any(args.data_dir == w or w in args.data_dir.parents for w in writable), (path, args.data_dir)
    else:
        pytest.fail(f"{path}: what does {argv[:2]} write?")


@pytest.mark.parametrize("path", sorted(UNITS))
def test_a_unit_restarts_for_good_and_reloads_only_with_sighup(path: str, clean_env: pytest.MonkeyPatch) -> None:
    """``ExecReload=/bin/kill -HUP $MAINPID`` reloads a sidecar's policies; an executor has
    no handler for SIGHUP, which would end it. ``Restart=always`` with systemd's default
    start limit gives up after five starts in 10 s: an executor with no replica up exits
    within a second."""
    settings, _, _, (args, _) = started(path, clean_env)
    assert settings.get("Restart") != ["always"] or settings.get("StartLimitIntervalSec") == ["0"], path
    takes_hup = "signal.SIGHUP" in inspect.getsource(inspect.getmodule(args.func))  # type: ignore[arg-type]
    reload = settings.get("ExecReload", [])
    assert not reload or ("-HUP" in reload[0] and takes_hup), (path, reload)
    if args.func.__name__ == "cmd_serve":
        assert takes_hup and reload == ["/bin/kill -HUP $MAINPID"]


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze")
def test_the_units_pass_systemd_analyze_verify(tmp_path: Path) -> None:
    """Offline: no systemd runs. The program's path is made one that exists here."""
    timer = next(block for lang, block in BLOCKS if "[Timer]" in block)
    names = [str(tmp_path / Path(path).name) for path in [*UNITS, "handrail-prune.timer"]]
    for name, text in zip(names, [*UNITS.values(), timer], strict=True):
        Path(name).write_text(text.replace(HANDRAIL, shutil.which("true") or "/bin/true"))
    done = subprocess.run(["systemd-analyze", "verify", "--man=no", *names], capture_output=True, text=True)
    assert not [line for line in done.stderr.splitlines() if "handrail-" in line], done.stderr  # not the host's units


def test_operators_shell_variables_reach_a_remote_command(clean_env: pytest.MonkeyPatch) -> None:
    said = re.search(r"Operators set (.*?) in their\s+shell", DOC, re.S)
    assert said is not None
    names = re.findall(r"`(HANDRAIL_\w+)`", said[1])
    assert {"HANDRAIL_AUTHZ", "HANDRAIL_AUTHZ_CA", "HANDRAIL_TOKEN"} <= set(names)
    for name in names:
        clean_env.setenv(name, f"value-of-{name}")
    args, _ = parse(["takeover", "browser:1"])
    assert {f"value-of-{name}" for name in names} <= set(vars(args).values())


# --- environment variables ---------------------------------------------------------------

#: Read by the executor for the crash tests only (``--fault``, executor/_faults.py), not for operators.
TESTS_ONLY = {"HANDRAIL_FAULT"}


def _read_by(*folders: str) -> set[str]:
    found: set[str] = set()
    for folder in folders:
        base = ROOT / folder
        files = base.glob("*.py") if folder == "handrail" else base.rglob("*.py")
        for file in files:
            found |= set(re.findall(r"[\"'](HANDRAIL_[A-Z_]+)[\"']", file.read_text()))
    return found


def test_every_variable_the_services_read_is_in_the_doc_and_back() -> None:
    """The sidecar, the executor, the ledger commands and their helpers: what they read from
    the environment is what the doc tells an operator to set, and nothing else."""
    services = _read_by("authz", "executor", "recorder", "handrail")
    assert {"HANDRAIL_AUTHZ_STORE", "HANDRAIL_LEDGER", "HANDRAIL_CHROMIUM"} <= services
    named = set(re.findall(r"\bHANDRAIL_[A-Z_]*[A-Z]\b", DOC))
    assert services - TESTS_ONLY - named == set(), "read by the services, not in docs/deploy.md"
    testing = _read_by("scenarios", "tests")
    assert named - services - testing == set(), "in docs/deploy.md, read by nothing"


# --- numbers the doc takes from the code --------------------------------------------------


def test_the_postgresql_connection_arithmetic_is_the_codes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A replica's pools as `serve` sizes them, a CLI command's, the ledger's, and the sums."""
    from handrail.authz import _cli_commands, _pg, _service
    from handrail.recorder._postgres import PgLedgerStore

    sizes: list[int] = []
    stop = type("Stop", (Exception,), {})

    class Pool:  # the store's pools, as it opens them: their sizes, and no database
        def __init__(self, dsn: str, clock: Any = None, *, max_size: int, **kw: Any) -> None:
            sizes.append(max_size)

        def migrate(self, migrations: Any) -> list[int]:
            return []

    monkeypatch.setattr(_pg, "PgDatabase", Pool)
    monkeypatch.setattr(_pg, "PgPrincipals", lambda db: (_ for _ in ()).throw(stop()))  # both pools are open
    with pytest.raises(stop):
        _service.serve(tmp_path, "127.0.0.1:0", store="postgresql://db/handrail")
    quiet = logging.getLogger("psycopg.pool").level
    with pytest.raises(stop):
        _cli_commands.open_store("", "postgresql://db/handrail")
    logging.getLogger("psycopg.pool").setLevel(quiet)
    workers = inspect.signature(_service.serve).parameters["max_workers"].default
    pool, decisions, *cli = sizes
    assert pool == decisions == max(4, workers // 2) and len(cli) == 2
    ledger = inspect.signature(PgLedgerStore.__init__).parameters["pool_size"].default
    replica = pool + decisions + 1  # the listener
    row = " ".join(re.search(r"^\| `max_connections` \|.*$", DOC, re.M)[0].split())  # type: ignore[index]
    assert f"({pool}: it runs {workers} worker threads)" in row
    assert f"each executor's ledger up to {ledger}; a `handrail authz ... --store` command up to {sum(cli)}" in row
    assert f"Three replicas and 20 executors: ~{round(3 * replica + 20 * ledger, -1)}" in row


def test_the_timeouts_and_sizes_the_doc_names_are_the_codes() -> None:
    from handrail.authz import _balance, _deadline, _pg_db, _pg_grants, _pg_schema, _pg_session
    from handrail.authz._pg_approvals import PgDecisions
    from handrail.authz._reach import DEFAULT_CONSOLE_ORIGINS
    from handrail.authz._sqlite_decisions import DecisionLog
    from handrail.executor.browser._host import DEFAULT_CHROMIUM

    pool_wait = inspect.signature(_pg_db.PgDatabase.__init__).parameters["connect_timeout_s"].default
    keepalive = dict(_balance.KEEPALIVE_OPTIONS)
    text = " ".join(DOC.split())
    for phrase in (
        f"at most {_deadline.MAX_MARGIN_S * 1000:g} ms",
        f"not after the pool's {pool_wait:g} s",
        f"the sidecar sets {_pg_session.IDLE_IN_TRANSACTION_MS / 1000:g} s on its own sessions",
        f"within {_pg_grants.CLOCK_SLACK_MS} ms of it",
        f"({_pg_schema.CHANGE_LOG_KEEP:,} events kept)",
        f"pruned to {_pg_schema.CHANGE_LOG_KEEP:,} events",
        f"`--batch ROWS`; {PgDecisions.prune_batch:,} on PostgreSQL, {DecisionLog.prune_batch:,} on SQLite",
        f"replicas that failed in the last {_balance.DOWN_S:g} s",
        f"waits at most {_balance.RECONNECT_MAX_MS / 1000:g} s before it reconnects",
        f"origins (comma-separated; default {','.join(DEFAULT_CONSOLE_ORIGINS)})",
        f"a Chromium other than `{DEFAULT_CHROMIUM}`",
    ):
        assert phrase in text, phrase
    assert keepalive["grpc.keepalive_time_ms"] == keepalive["grpc.http2.ping_timeout_ms"] == 1000
    assert "ping their replica every second and drop it after a second" in text


# --- the executor's environment file, for real ---------------------------------------------


def test_the_executor_speaks_tls_to_the_sidecar_with_the_ca_its_environment_names(tmp_path: Path) -> None:
    """executor.env sets HANDRAIL_AUTHZ_CA for replicas that serve TLS: with it the executor
    reaches one (and hears that its token is unknown), without it it cannot reach any."""
    pytest.importorskip("cryptography")
    from handrail.authz import serve
    from handrail.scenarios._postgres import make_certificates

    certs = make_certificates(tmp_path / "certs")
    server, port = serve(tmp_path / "authz", "127.0.0.1:0", tls_cert=certs.server_cert, tls_key=certs.server_key)
    try:

        def start(**env: str) -> subprocess.CompletedProcess[str]:
            argv = [sys.executable, "-m", "handrail", "executor", "serve", "--listen", "127.0.0.1:0"]
            argv += ["--data-dir", str(tmp_path / "exe")]
            full = {k: v for k, v in os.environ.items() if not k.startswith("HANDRAIL_")}
            full |= {"HANDRAIL_AUTHZ": f"127.0.0.1:{port}", "HANDRAIL_TOKEN": "hr_not_a_token", **env}
            return subprocess.run(argv, capture_output=True, text=True, env=full, timeout=60)

        trusted = start(HANDRAIL_AUTHZ_CA=str(certs.ca))
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


# --- the walk-through, run -------------------------------------------------------------------


#: ``handrail`` in bash: this checkout's, run by this interpreter.
PRELUDE = f'handrail() {{ {shlex.quote(sys.executable)} -m handrail "$@"; }}\nset -e\n'


def bash(script: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", PRELUDE + script], cwd=cwd, env=env, capture_output=True, text=True, timeout=60
    )


@pytest.mark.slow
@pytest.mark.browser
def test_the_walk_through_runs_as_written(postgres: Any, tmp_path: Path) -> None:
    """The first block, run by bash with the doc's database and ports pointed at a private
    PostgreSQL and free ports, and its `sleep N # until ...` waits made a poll of the
    ports; then the retention and ledger commands against what it made."""
    import psycopg
    from psycopg.conninfo import conninfo_to_dict

    from handrail.authz import AuthzClient
    from handrail.executor import ExecutorClient, Outcome
    from handrail.scenarios import SubscriptionApp

    walk = next(block for lang, block in BLOCKS if lang == "sh" and "createdb" in block)
    info = conninfo_to_dict(postgres.dsn)
    db = f"deploy_doc_{os.getpid()}"
    dsn = f"postgresql://{info['user']}@{info['host']}:{info['port']}/{db}"
    ports = [free_port() for _ in range(4)]
    script = walk.replace("postgresql://handrail@db.internal:5432/handrail", dsn)
    script = script.replace(
        "createdb -h db.internal -U handrail handrail",
        f"createdb -h {info['host']} -p {info['port']} -U {info['user']} {db}",
    )
    for old, new in zip(("7700", "7701", "7702", "7720"), ports, strict=True):
        script = script.replace(old, str(new))
    waits = iter([ports[:3], ports[3:]])

    def poll(match: re.Match[str]) -> str:
        each = " ".join(str(p) for p in next(waits))
        return f"for p in {each}; do until (exec 3<>/dev/tcp/127.0.0.1/$p) 2>/dev/null; do sleep 0.2; done; done"

    script = re.sub(r"^sleep \d+ +# until .*$", poll, script, flags=re.M)
    assert "sleep 2" not in script and "sleep 5" not in script
    env = {k: v for k, v in os.environ.items() if not k.startswith("HANDRAIL_")}
    proc = subprocess.Popen(
        ["bash", "-c", PRELUDE + script + "\nwait\n"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    out: list[str] = []
    verified = threading.Event()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            out.append(line)
            if "executor exe-1: ok" in line:
                verified.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        verified.wait(60)
        text = "".join(out)
        assert "executor exe-1: ok: 0 entries, chain verified" in text, text
        assert "browser:1: held by human ops-alice (epoch 1" in text, text
        assert text.count("handrail-authz listening on") == 3, text
        assert "handrail-executor listening on" in text, text

        # an agent acts through the executor: its chain then has entries and a head file
        tokens = {}
        for name, role in (("ops-test", "operator"), ("agent-test", "agent")):
            tokens[name] = bash(
                f"handrail authz principal add {name} --role {role} --store {dsn}", tmp_path, env
            ).stdout
        replicas = ",".join(f"127.0.0.1:{p}" for p in ports[:3])
        with SubscriptionApp() as app:
            with AuthzClient(replicas, tokens["ops-test"].strip()) as ops:
                ops.grant("agent-test", "browser:deploy", ["navigate", "submit"], [app.url])
            with ExecutorClient(f"127.0.0.1:{ports[3]}", tokens["agent-test"].strip()) as client:
                session = client.open_session(target="browser:deploy", start_url=app.url + "/")
                assert session.click(session.find("button", "Pause plan")).result.outcome is Outcome.DONE
                session.close()
        assert list((tmp_path / "handrail-data").glob("ledger-exe-1.head"))

        # the retention block, the archive in the test's folder
        retention = next(block for lang, block in BLOCKS if lang == "sh" and "prune-decisions" in block)
        for line in logical_lines(retention.replace("/var/lib/handrail", str(tmp_path))):
            done = bash(line, tmp_path, {**env, "HANDRAIL_AUTHZ_STORE": dsn})
            assert done.returncode == 0 and "decisions logged before" in done.stdout, (line, done.stderr)

        # the ledger block: this host's chain, its head file in ./handrail-data
        ledger = next(block for lang, block in BLOCKS if lang == "sh" and block.startswith("export HANDRAIL_LEDGER"))
        ledger = ledger.replace("postgresql://reader@db.internal:5432/handrail", dsn).replace("exe-host-17", "exe-1")
        ledger = ledger.replace("/var/lib/handrail", "handrail-data")
        ledger = re.sub(r"^for host in .*$", "cp handrail-data/ledger-*.head heads/", ledger, flags=re.M)
        tail = f"timeout -s INT 3 {shlex.quote(sys.executable)} -m handrail ledger tail -f || [ $? = 124 ]"
        ledger = ledger.replace("handrail ledger tail -f", tail)
        done = bash(ledger, tmp_path, env)
        assert done.returncode == 0, done.stdout + done.stderr
        verified_6 = "executor exe-1: ok: 6 entries, chain verified; head file: seq 6 matches"
        assert done.stdout.count(verified_6) == 3, done.stdout
        assert done.stdout.count('"Pause plan"') == 2, done.stdout  # the timeline, and tail -f
        assert (tmp_path / "all.jsonl").exists()
    finally:
        if proc.poll() is None:  # the replicas and the executor: theirs is the script's group
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
        reader.join(10)
        if proc.stdout is not None:
            proc.stdout.close()
        with psycopg.connect(postgres.dsn, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
