"""Deprecated: moved to ``handrail.scenarios`` (``start_authz``, ``start_executor`` ...).

Kept for one release so that imports of ``handrail._procs`` keep working; pinned by
``tests/scenarios/test_old_paths.py``.
"""

from __future__ import annotations

from handrail.scenarios._procs import ServerProcess, start_authz, start_executor, start_server

__all__ = ["ServerProcess", "start_authz", "start_executor", "start_server"]
