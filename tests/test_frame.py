"""The project's frame: the wire contract, the packaging and the public names."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_generated_protos_do_not_drift(tmp_path: Path) -> None:
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import gen_protos
    finally:
        sys.path.pop(0)
    written = gen_protos.generate(tmp_path)
    assert written, "nothing generated"
    for path in written:
        committed = ROOT / "proto" / path.relative_to(tmp_path)
        assert committed.exists(), f"{committed} is not committed"
        assert committed.read_bytes() == path.read_bytes(), (
            f"{committed.relative_to(ROOT)} drifted from its .proto: run python scripts/gen_protos.py"
        )


def test_generated_imports_are_package_qualified() -> None:
    for path in (ROOT / "proto").rglob("*_pb2*.py"):
        text = path.read_text()
        assert "from proto." not in text and "import proto." not in text, path


@pytest.mark.slow
def test_wheel_installs_only_under_the_handrail_namespace(tmp_path: Path) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
            str(ROOT),
        ],
        check=True,
        timeout=300,
    )
    (wheel,) = tmp_path.glob("handrail-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/", 1)[0] for n in names}
    assert top == {"handrail", next(t for t in top if t.endswith(".dist-info"))}, top
    for module in ("proto", "executor", "authz", "recorder", "scenarios"):
        assert not any(n.startswith(module + "/") or n == module + ".py" for n in names), module
    for expected in (
        "handrail/proto/authz/v1/authz_pb2.py",
        "handrail/proto/executor/v1/executor_pb2_grpc.py",
        "handrail/executor/_guard.py",
        "handrail/authz/policies/default.cedar",
        "handrail/recorder/_ledger.py",
        "handrail/py.typed",
    ):
        assert expected in names, expected


def test_no_top_level_module_of_ours_is_importable_outside_the_repo(tmp_path: Path) -> None:
    code = (
        "import importlib.util, sys\n"
        f"root = {str(ROOT)!r}\n"
        "specs = [(m, importlib.util.find_spec(m)) for m in ('proto','executor','authz','recorder','scenarios')]\n"
        "bad = [m for m, s in specs if s and (s.origin or str(s.submodule_search_locations)).find(root) >= 0]\n"
        "import handrail.executor, handrail.authz, handrail.recorder, handrail.proto\n"
        "print(bad)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
