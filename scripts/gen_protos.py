"""Regenerate the protobuf and gRPC modules under proto/ from their .proto sources.

Run from anywhere: ``python scripts/gen_protos.py``. protoc sees ``proto/`` as
``handrail/proto/`` so that the generated imports are package-qualified
(``handrail.proto.authz.v1``) and never reach for a top-level ``proto`` module.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

from grpc_tools import protoc

ROOT = Path(__file__).resolve().parent.parent
PROTO_DIR = ROOT / "proto"
SOURCES = sorted(PROTO_DIR.glob("*/v1/*.proto"))


def generate(out_root: Path = PROTO_DIR) -> list[Path]:
    """Generate the modules into ``out_root`` (laid out like ``proto/``); return them."""
    written: list[Path] = []
    with tempfile.TemporaryDirectory() as tmp:
        args = [
            "grpc_tools.protoc",
            f"-Ihandrail/proto={PROTO_DIR}",
            f"--python_out={tmp}",
            f"--pyi_out={tmp}",
            f"--grpc_python_out={tmp}",
            *(f"handrail/proto/{p.relative_to(PROTO_DIR).as_posix()}" for p in SOURCES),
        ]
        if protoc.main(args) != 0:
            raise SystemExit("protoc failed")
        gen_root = Path(tmp) / "handrail" / "proto"
        for produced in sorted(gen_root.rglob("*.py*")):
            rel = produced.relative_to(gen_root)
            dest = out_root / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(produced, dest)
            written.append(dest)
    return written


if __name__ == "__main__":
    for path in generate(Path(sys.argv[1]) if len(sys.argv) > 1 else PROTO_DIR):
        print(path)
