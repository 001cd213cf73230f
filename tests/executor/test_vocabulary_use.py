"""The executor speaks the shared vocabulary: the very same objects, and an error per refusal.

The layout rules (layers, cycles, sizes, exports) are checked repo-wide by
``tests/test_layout.py``.
"""

from __future__ import annotations

import handrail
from handrail.executor._errors import REFUSAL_ERRORS, ActionRefusedError


def test_the_vocabulary_is_shared_not_copied() -> None:
    import handrail.executor as executor
    from handrail.executor import _models

    for name in ("ActionKind", "Outcome", "Evidence", "Verdict", "Reason"):
        assert getattr(_models, name) is getattr(handrail, name), name
    for name in ("ActionKind", "Outcome", "Evidence", "Verdict", "Reason"):
        assert getattr(executor, name) is getattr(handrail, name), name


def test_every_refusal_reason_has_its_error() -> None:
    refusals = {r for r in handrail.Reason if r not in (handrail.Reason.ALLOW, handrail.Reason.UNAUTHENTICATED)}
    assert set(REFUSAL_ERRORS) == refusals
    for reason, cls in REFUSAL_ERRORS.items():
        assert issubclass(cls, ActionRefusedError) and cls.reason is reason
