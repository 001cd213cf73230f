from __future__ import annotations

import handrail.recorder


def test_exported_members() -> None:
    assert handrail.recorder.__all__ == [
        "GENESIS_HASH",
        "KINDS",
        "LEASE_EVENTS",
        "REDACTED",
        "VERDICTS",
        "Entry",
        "Ledger",
        "LedgerError",
        "LedgerTamperedError",
        "NewEntry",
        "PrincipalKind",
        "RecoveredAction",
        "UnresolvedAction",
        "VerifyReport",
        "canonical_json",
        "entry_hash",
        "redact",
        "timeline",
    ]
    for name in handrail.recorder.__all__:
        assert hasattr(handrail.recorder, name)


def test_errors_derive_from_the_project_base() -> None:
    from handrail._errors import HandrailError

    assert issubclass(handrail.recorder.LedgerTamperedError, handrail.recorder.LedgerError)
    assert issubclass(handrail.recorder.LedgerError, HandrailError)
