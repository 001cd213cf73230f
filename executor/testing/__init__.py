"""Test helpers for code that drives the executor's guarded loop (filled in below)."""

from __future__ import annotations

__all__: list[str] = []
