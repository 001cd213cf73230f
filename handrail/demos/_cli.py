"""``handrail demo [--desktop]``: run one of the demos."""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Any

from ._browser import run_demo
from ._console import run_console_demo
from ._desktop import run_desktop_demo

__all__ = ["register"]


def register(sub: Any) -> None:
    """Add ``handrail demo`` to the top-level parser."""
    p = sub.add_parser("demo", help="run the guarded loop end to end on a local fixture app")
    p.add_argument("--chromium", default=None, help="Chromium executable (env HANDRAIL_CHROMIUM)")
    p.add_argument("--data-dir", type=Path, default=None, help="keep the data here (default: a temp dir)")
    p.add_argument(
        "--desktop",
        action="store_true",
        help="the X11 desktop loop instead: Xvfb, a window manager and a small Tk app",
    )
    p.add_argument(
        "--console",
        action="store_true",
        help="a person takes the wheel: the operator console on loopback, its URL and a token to sign in with",
    )
    p.add_argument(
        "--listen", default="127.0.0.1:0", help="with --console: the console's HOST:PORT (default: a free port)"
    )
    p.set_defaults(func=_main)


def _main(args: argparse.Namespace) -> int:
    def run(data_dir: Path) -> int:
        if args.desktop:
            return run_desktop_demo(data_dir)
        if args.console:
            return run_console_demo(data_dir, chromium=args.chromium, listen=args.listen)
        return run_demo(data_dir, chromium=args.chromium)

    if args.data_dir is not None:
        return run(args.data_dir)
    with tempfile.TemporaryDirectory(prefix="handrail-demo-") as tmp:
        return run(Path(tmp))
