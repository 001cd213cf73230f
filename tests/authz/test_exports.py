"""The public names of handrail.authz are computed, not copied, and old names keep working."""

from __future__ import annotations

import importlib

import handrail
import handrail.authz

#: Names handrail.authz exported before the layout of issue 10; none may go.
EXPORTED_BEFORE = {
    "ApprovalInfo",
    "ApprovalStatus",
    "AsyncAuthzClient",
    "Authorizer",
    "AuthzClient",
    "AuthzError",
    "AuthzRpcError",
    "AuthzServer",
    "AuthzStore",
    "AuthzUnavailableError",
    "Decision",
    "DecisionRecord",
    "GrantInfo",
    "InvalidArgumentError",
    "LeaseConflictError",
    "LeaseInfo",
    "NotFoundError",
    "PermissionDeniedError",
    "PolicyEngine",
    "PolicyError",
    "Reason",
    "SqliteStore",
    "Store",
    "UnauthenticatedError",
    "VERBS",
    "WatchEventInfo",
    "serve",
}

#: Private paths that other packages, benches and tests import; they keep working for a
#: release after the records moved to ._models and the store protocol left the SQLite store.
OLD_PATHS = {
    "handrail.authz._core": [
        "VERBS",
        "ApprovalInfo",
        "ApprovalStatus",
        "CheckInput",
        "Decision",
        "DecisionRecord",
        "GrantInfo",
        "LeaseInfo",
        "PolicyResult",
        "Principal",
        "Reason",
        "WatchEventInfo",
        "is_pattern",
        "lease_acquire",
        "validate_check",
    ],
    "handrail.authz._policies": ["DEFAULT_POLICIES_DIR", "PolicyEngine"],
    "handrail.authz._cli": ["main", "register"],
    "handrail.authz._client": ["AuthzClient"],
    "handrail.authz._sqlite": ["SqliteStore", "Store"],
    "handrail.authz._sqlite_schema": ["DB_NAME", "hash_token", "decision_row", "decision_record"],
}


def test_no_name_was_removed() -> None:
    assert set(handrail.authz.__all__) >= EXPORTED_BEFORE


def test_the_shared_words_are_the_vocabulary_s_own_objects() -> None:
    assert handrail.authz.Reason is handrail.Reason
    assert handrail.authz.VERBS is handrail.VERBS
    assert handrail.authz.Verb is handrail.Verb
    core = importlib.import_module("handrail.authz._core")
    assert core.Reason is handrail.Reason and core.VERBS is handrail.VERBS


def test_old_import_paths_keep_working() -> None:
    for path, names in OLD_PATHS.items():
        module = importlib.import_module(path)
        for name in names:
            assert hasattr(module, name), f"{path}.{name}"
    core = importlib.import_module("handrail.authz._core")
    assert core.Decision is handrail.authz.Decision and core.GrantInfo is handrail.authz.GrantInfo
