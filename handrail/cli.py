"""The ``handrail`` command line: one parser, each package registers its own commands."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def build_parser() -> argparse.ArgumentParser:
    # Imported here so that ``handrail --help`` stays cheap and each package owns its commands.
    from handrail.authz import _cli as authz_cli
    from handrail.console import _cli as console_cli
    from handrail.demos import _cli as demo_cli
    from handrail.executor import _cli as executor_cli
    from handrail.mcp import _cli as mcp_cli
    from handrail.recorder import _cli as recorder_cli
    from handrail.scenarios import _cli as scenario_cli

    parser = argparse.ArgumentParser(
        prog="handrail",
        description="A guarded executor for AI agents on a real browser or desktop.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    demo_cli.register(sub)
    authz_cli.register(sub)
    executor_cli.register(sub)
    mcp_cli.register(sub)
    recorder_cli.register(sub)
    scenario_cli.register(sub)
    console_cli.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the process exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
