"""The ``handrail`` command line: each command loads only the package that owns it."""

from __future__ import annotations

import ast
import subprocess
import sys

import pytest

from handrail.cli import COMMANDS, build_parser

_HEAVY = ("mcp", "playwright", "starlette", "uvicorn", "jinja2", "psycopg", "PIL", "Xlib")

_PROBE = """
import runpy, sys
sys.argv = ["handrail", *sys.argv[1:]]
try:
    runpy.run_module("handrail", run_name="__main__")
except SystemExit:
    pass
print(sorted({m.split(".")[0] for m in sys.modules} & set(%r)))
"""


def _choices(parser: object) -> list[str]:
    sub = next(a for a in parser._actions if a.dest == "command")  # type: ignore[attr-defined]
    return list(sub.choices)


def test_the_command_table_is_what_the_packages_register() -> None:
    """Each module registers exactly the commands the table gives it, and the whole parser
    lists every command in the table's order (``handrail --help`` is unchanged)."""
    for module, names in COMMANDS.items():
        assert _choices(build_parser(names[0])) == list(names), module
    assert _choices(build_parser()) == [name for names in COMMANDS.values() for name in names]


@pytest.mark.parametrize(
    ("argv", "allowed"),
    [
        (["ledger", "--help"], {"psycopg"}),  # ledgers on PostgreSQL
        (["authz", "--help"], {"psycopg"}),  # the sidecar's PostgreSQL store
        (["executor", "--help"], set()),
        (["replay", "--help"], {"playwright", "psycopg", "PIL"}),  # it runs a whole stack
    ],
)
def test_a_command_loads_only_what_it_needs(argv: list[str], allowed: set[str]) -> None:
    """``handrail ledger ...`` used to import every package's commands, the MCP SDK and the
    console's web stack among them: two seconds before anything ran, on every executor and
    sidecar start too."""
    out = subprocess.run(
        [sys.executable, "-c", _PROBE % (_HEAVY,), *argv], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    loaded = set(ast.literal_eval(out.strip().splitlines()[-1]))
    assert loaded <= allowed, f"handrail {' '.join(argv)} imported {sorted(loaded - allowed)}"


def test_help_and_an_unknown_command_still_list_every_command() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "handrail", "no-such-command"], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 2
    assert "invalid choice: 'no-such-command'" in out.stderr
    for names in COMMANDS.values():
        for name in names:
            assert f"'{name}'" in out.stderr


def test_an_executor_on_sqlite_loads_no_database_driver_nor_cedar() -> None:
    """The executor asks the sidecar; it neither stores grants nor evaluates policies, and
    its ledger is a SQLite file unless a ``postgresql://`` URL is given: psycopg and Cedar
    cost a third of a second of every executor start, so they load on first use only."""
    probe = (
        "import sys, handrail.executor._service, handrail.recorder\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'psycopg', 'psycopg_pool', 'cedarpy'}))\n"
        "from handrail.authz import PgStore, serve, Authorizer, PolicyEngine, AuthzServer\n"
        "from handrail.recorder import PgLedgerStore, ledger_executors\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'psycopg', 'cedarpy'}))\n"
        "import handrail.authz\n"
        "try:\n"
        "    handrail.authz.NoSuchName\n"
        "except AttributeError as exc:\n"
        "    print(exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.splitlines() == [
        "[]",
        "['cedarpy', 'psycopg']",
        "module 'handrail.authz' has no attribute 'NoSuchName'",
    ]


@pytest.mark.parametrize("value", ["nan", "inf", "-5", "soon"])
@pytest.mark.parametrize(
    "argv",
    [
        ["console", "--start-timeout"],  # nan waited for ever, saying nothing
        ["console", "--idle-timeout"],
        ["mcp", "--start-timeout"],
        ["mcp", "--approval-wait"],
        ["authz", "serve", "--approval-timeout"],
        ["takeover", "t", "--ttl"],
    ],
)
def test_a_duration_that_is_not_a_number_of_seconds_is_refused_in_one_line(
    argv: list[str], value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as caught:
        build_parser().parse_args([*argv, value])
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert caught.value.code == 2
    assert err.endswith(f"{argv[-1]} takes a number of seconds from 0 up, not {value!r}") or (
        value == "soon" and err.endswith(f"{argv[-1]} takes seconds, not 'soon'")
    ), err
