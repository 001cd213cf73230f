"""Moved to ``handrail.executor.browser._pagescript`` (the scripts Handrail runs in pages).

This path re-exports its names for one release, for code written against the old flat
layout.
"""

from __future__ import annotations

from handrail.executor.browser._pagescript import (
    ARM_POINTER,
    CHECK_ELEMENT,
    CHECK_PICKED,
    DISARM_POINTER,
    INIT_SCRIPT,
    PICK_ENGINE,
    PICK_EVENT,
    PICK_SELECTOR,
    READ_CLOCK,
)

__all__ = [
    "ARM_POINTER",
    "CHECK_ELEMENT",
    "CHECK_PICKED",
    "DISARM_POINTER",
    "INIT_SCRIPT",
    "PICK_ENGINE",
    "PICK_EVENT",
    "PICK_SELECTOR",
    "READ_CLOCK",
]
