"""The ``handrail`` command line: one parser, each package registers its own commands.

A command imports only the package that registers it (and what that needs): ``handrail
ledger verify`` does not load the MCP SDK, Chromium's driver or the console's web stack,
which together take seconds to import. ``handrail --help`` (or no command, or one nobody
registers) builds the whole parser.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

#: Each package's command module and the top-level commands it registers, in the order
#: ``handrail --help`` lists them. A test holds this to what the modules register.
COMMANDS: dict[str, tuple[str, ...]] = {
    "handrail.demos._cli": ("demo",),
    "handrail.authz._cli": (
        "authz",
        "grant",
        "close-task",
        "approve",
        "deny",
        "approvals",
        "watch",
        "revoke",
        "grants",
        "takeover",
        "handback",
        "lease",
        "expire-lease",
    ),
    "handrail.executor._cli": ("executor",),
    "handrail.mcp._cli": ("mcp",),
    "handrail.recorder._cli": ("ledger",),
    "handrail.scenarios._cli": ("replay", "record"),
    "handrail.console._cli": ("console",),
}


def _owner(command: str) -> str | None:
    return next((module for module, names in COMMANDS.items() if command in names), None)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of every command, or of ``command`` alone (when a package registers it)."""
    owner = _owner(command) if command else None
    modules = [owner] if owner else list(COMMANDS)
    parser = argparse.ArgumentParser(
        prog="handrail",
        description="A guarded executor for AI agents on a real browser or desktop.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in modules:
        importlib.import_module(module).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the process exit code."""
    # gRPC's core writes what it logs at INFO (a failed TLS handshake, with OpenSSL's
    # reason, on every try) to stderr unless told a level before it starts; a command
    # says what went wrong in its own one line. Read once, when grpc is first imported.
    os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
    args_in = list(sys.argv[1:] if argv is None else argv)
    command = args_in[0] if args_in and not args_in[0].startswith("-") else None
    args = build_parser(command).parse_args(args_in)
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
