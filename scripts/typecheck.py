"""Run mypy (strict) over the packages as they are installed: ``handrail.*``.

The repository keeps ``executor/``, ``authz/`` ... at its root and installs them under
``handrail.`` through setuptools' package-dir mapping, which mypy cannot follow. This
script lays a tree of symlinks (``.typecheck/handrail/executor -> executor`` ...) and
runs mypy on it, so absolute imports like ``handrail.authz`` resolve.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = {
    "executor": "executor",
    "authz": "authz",
    "recorder": "recorder",
    "proto": "proto",
    "scenarios": "scenarios",
}


def main() -> int:
    tree = ROOT / ".typecheck"
    shutil.rmtree(tree, ignore_errors=True)
    pkg = tree / "handrail"
    pkg.mkdir(parents=True)
    for item in (ROOT / "handrail").iterdir():
        if item.suffix in (".py", ".typed") or (item.is_dir() and (item / "__init__.py").is_file()):
            (pkg / item.name).symlink_to(item, target_is_directory=item.is_dir())
    for name, folder in PACKAGES.items():
        (pkg / name).symlink_to(ROOT / folder, target_is_directory=True)
    cmd = [
        sys.executable,
        "-m",
        "mypy",
        "--config-file",
        str(ROOT / "pyproject.toml"),
        "-p",
        "handrail",
        *sys.argv[1:],
    ]
    return subprocess.call(cmd, cwd=tree)


if __name__ == "__main__":
    raise SystemExit(main())
