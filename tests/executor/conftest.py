"""Fixtures of the executor's in-process tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.executor.attacks import ELSEWHERE, HOME, Origins
from tests.executor.inproc import Sidecar, start_sidecar


@pytest.fixture
def sidecar(tmp_path: Path) -> Iterator[Sidecar]:
    """A real authz sidecar in this process, on a temp store (``inproc.start_sidecar``)."""
    s = start_sidecar(tmp_path / "authz")
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture(scope="module")
def origins() -> Iterator[Origins]:
    """The attack probes' two origins (``tests/executor/attacks.py``)."""
    site = Origins(HOME, ELSEWHERE).start()
    try:
        yield site
    finally:
        site.stop()
