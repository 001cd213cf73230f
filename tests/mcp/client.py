"""Starting ``handrail mcp`` as a user would (a subprocess), and the SDK's client on it."""

from __future__ import annotations

import contextlib
import re
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator

from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult, TextContent

from handrail.scenarios import free_port

REF = re.compile(r'- (\w+) "([^"]*)" \[ref=(\w+)\]')


def mcp_args(executor: str, token: str, target: str, start_url: str, *extra: str) -> list[str]:
    return [
        "-m",
        "handrail",
        "mcp",
        "--executor",
        executor,
        "--token",
        token,
        "--target",
        target,
        "--start-url",
        start_url,
        *extra,
    ]


@contextlib.asynccontextmanager
async def stdio_session(args: list[str], **client_kw: object) -> AsyncIterator[ClientSession]:
    """``handrail mcp`` over stdio, with the SDK's ClientSession on it."""
    params = StdioServerParameters(command=sys.executable, args=args)
    with tempfile.TemporaryFile("w+") as errlog:
        try:
            async with (
                stdio_client(params, errlog=errlog) as (read, write),
                ClientSession(read, write, **client_kw) as session,
            ):  # type: ignore[arg-type]
                await session.initialize()
                yield session
        except BaseException as exc:  # say what the server said (a server that exited at start)
            errlog.seek(0)
            said = errlog.read()[-4000:]
            exc.add_note("handrail mcp's stderr:\n" + (said or "(nothing)"))
            raise


@contextlib.contextmanager
def http_server(args: list[str]) -> Iterator[str]:
    """``handrail mcp --transport http`` as a process; yields its endpoint URL."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, *args, "--transport", "http", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        deadline = time.monotonic() + 30
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
                break
            assert proc.poll() is None, "handrail mcp --transport http exited"
            assert time.monotonic() < deadline, "handrail mcp did not listen within 30 s"
            time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=15)


@contextlib.asynccontextmanager
async def http_session(url: str) -> AsyncIterator[ClientSession]:
    async with streamable_http_client(url) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


def text(result: CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, TextContent))


def ref_of(snapshot: str, role: str, name: str) -> str:
    """An agent's way: the ref of the snapshot line for ``role "name"``."""
    refs = [m.group(3) for m in REF.finditer(snapshot) if (m.group(1), m.group(2)) == (role, name)]
    assert len(refs) == 1, f"{role} {name!r}: {refs} in\n{snapshot}"
    return refs[0]
