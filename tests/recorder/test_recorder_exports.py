from __future__ import annotations

import types

import handrail.recorder


def _public(module: types.ModuleType) -> set[str]:
    """What a package makes public: every name it binds that is not private, nor a module."""
    return {
        name
        for name, value in vars(module).items()
        if not name.startswith("_") and name != "annotations" and not isinstance(value, types.ModuleType)
    }


def test_errors_derive_from_the_project_base() -> None:
    from handrail._errors import HandrailError

    assert issubclass(handrail.recorder.LedgerTamperedError, handrail.recorder.LedgerError)
    assert issubclass(handrail.recorder.LedgerError, HandrailError)
