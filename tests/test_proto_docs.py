"""The .proto files document themselves: every service, RPC, message, field, enum and enum
value has a comment, and the files say how to authenticate and what the limits are.

The check reads protoc's own source info (``--include_source_info``), so a comment counts
only where protoc attaches it to that element (a leading or trailing comment).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from google.protobuf import descriptor_pb2
from grpc_tools import protoc

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted((ROOT / "proto").glob("*/v1/*.proto"))

# FileDescriptorProto field numbers, as SourceCodeInfo paths use them.
_MESSAGE, _ENUM, _SERVICE = 4, 5, 6
_FIELD, _NESTED, _NESTED_ENUM = 2, 3, 4
_VALUE = 2
_METHOD = 2


def _described(source: Path) -> descriptor_pb2.FileDescriptorProto:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "set.pb"
        args = [
            "grpc_tools.protoc",
            f"-I{source.parent}",
            "--include_source_info",
            f"--descriptor_set_out={out}",
            source.name,
        ]
        assert protoc.main(args) == 0, f"protoc failed on {source}"
        fds = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())
    (file,) = fds.file
    return file


def undocumented(file: descriptor_pb2.FileDescriptorProto) -> list[str]:
    """The elements of ``file`` without a comment, by name."""
    comments = {
        tuple(loc.path): (loc.leading_comments + loc.trailing_comments).strip()
        for loc in file.source_code_info.location
    }
    missing: list[str] = []

    def need(path: tuple[int, ...], name: str) -> None:
        if not comments.get(path):
            missing.append(name)

    def message(msg: descriptor_pb2.DescriptorProto, path: tuple[int, ...], prefix: str) -> None:
        name = f"{prefix}{msg.name}"
        need(path, f"message {name}")
        for i, f in enumerate(msg.field):
            need((*path, _FIELD, i), f"field {name}.{f.name}")
        for i, nested in enumerate(msg.nested_type):
            message(nested, (*path, _NESTED, i), f"{name}.")
        for i, e in enumerate(msg.enum_type):
            enum(e, (*path, _NESTED_ENUM, i), f"{name}.")

    def enum(e: descriptor_pb2.EnumDescriptorProto, path: tuple[int, ...], prefix: str) -> None:
        name = f"{prefix}{e.name}"
        need(path, f"enum {name}")
        for i, v in enumerate(e.value):
            need((*path, _VALUE, i), f"enum value {name}.{v.name}")

    for i, msg in enumerate(file.message_type):
        message(msg, (_MESSAGE, i), "")
    for i, e in enumerate(file.enum_type):
        enum(e, (_ENUM, i), "")
    for i, service in enumerate(file.service):
        need((_SERVICE, i), f"service {service.name}")
        for j, method in enumerate(service.method):
            need((_SERVICE, i, _METHOD, j), f"rpc {service.name}.{method.name}")
    return missing


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.name)
def test_every_element_has_a_comment(source: Path) -> None:
    assert undocumented(_described(source)) == []


def test_the_check_finds_a_missing_comment(tmp_path: Path) -> None:
    bare = tmp_path / "bare.proto"
    bare.write_text(
        'syntax = "proto3";\npackage t;\n// A message.\nmessage M {\n  string a = 1;  // documented\n'
        "  int32 b = 2;\n}\nenum E { E_X = 0; }\nservice S {\n  rpc R(M) returns (M);\n}\n"
    )
    assert undocumented(_described(bare)) == ["field M.b", "enum E", "enum value E.E_X", "service S", "rpc S.R"]


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.name)
def test_the_header_says_how_to_authenticate_and_the_limits(source: Path) -> None:
    text = source.read_text()
    header = text[: text.index("syntax")]
    for needed in ("authorization: Bearer <token>", "any case", "INVALID_ARGUMENT", "NOT_FOUND", "Limits:", "4 MiB"):
        assert needed in header, (source.name, needed)
