"""Handrail: a guarded executor for AI agents on a real browser or desktop.

The packages ``handrail.executor``, ``handrail.authz``, ``handrail.recorder``,
``handrail.scenarios`` and ``handrail.proto`` live in the repository's top-level folders of
the same names. This root package holds what every layer shares: the base error and the
vocabulary (reasons, outcomes, evidence levels, verbs and action kinds); and, at the top,
the command line (``handrail.cli``) and the demos (``handrail.demos``).
"""

from __future__ import annotations

from handrail._errors import HandrailError
from handrail._vocabulary import DECISION_REASONS, VERBS, ActionKind, Evidence, Outcome, Reason, Verb, Verdict

__all__ = [
    "DECISION_REASONS",
    "VERBS",
    "ActionKind",
    "Evidence",
    "HandrailError",
    "Outcome",
    "Reason",
    "Verb",
    "Verdict",
    "__version__",
]
__version__ = "0.1.0"
