"""A package's names imported on first use: its module ``__getattr__``."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(package: str, where: dict[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package`` that imports each name of ``where`` from its
    module (``{name: module}``) when first asked for; any other name is an AttributeError.

    For the parts of a package that load heavy libraries (psycopg, Cedar) which most of its
    users never touch; list each name under ``typing.TYPE_CHECKING`` too, for the checker.
    """

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(module), name)

    return __getattr__
