"""Argument types the command lines share."""

from __future__ import annotations

import argparse
from collections.abc import Callable


def seconds(option: str) -> Callable[[str], float]:
    """An argparse ``type`` for a duration in seconds: a finite number, not negative. Python's
    ``float`` takes ``nan``, ``inf`` and ``-5``, which a server would then take as a garbled,
    endless or silent value (``--start-timeout nan`` waited for ever, saying nothing)."""

    def check(value: str) -> float:
        try:
            number = float(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{option} takes seconds, not {value!r}") from None
        if not 0 <= number < 1e12:  # (False for nan)
            raise argparse.ArgumentTypeError(f"{option} takes a number of seconds from 0 up, not {value!r}")
        return number

    return check
