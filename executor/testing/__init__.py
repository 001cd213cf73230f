"""Test helpers for the executor's guarded loop: a scripted backend and fault hooks.

``FakeBackend`` stands behind the ``Backend`` protocol (as httpx's ``MockTransport``
behind ``BaseTransport``) so that the loop's invariants — the fence at dispatch, UNKNOWN
blocking, idempotent replay, fail-closed authorization — can be tested in milliseconds,
with a real authz sidecar and a real ledger and no browser or X display.
"""

from __future__ import annotations

from handrail.executor.testing._fake import DEFAULT_SNAPSHOT, Dispatch, FakeBackend, FaultHooks

__all__ = ["DEFAULT_SNAPSHOT", "Dispatch", "FakeBackend", "FaultHooks"]
