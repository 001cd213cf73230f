"""Deprecated: the scenario plugin moved to ``handrail.scenarios.pytest_plugin``.

``-p handrail.recorder.pytest_plugin`` keeps working for one release through this module,
which re-exports the plugin's hooks and classes (``tests/scenarios/test_old_paths.py``
pins them). Enable one of the two paths, not both: pytest would register the hooks twice.

This is the one module of ``handrail.recorder`` that imports the scenario harness (a layer
above the ledger); nothing in the recorder imports it, and it goes in the next release.
"""

from __future__ import annotations

from handrail.scenarios.pytest_plugin import (
    DEFAULT_REPEAT,
    ScenarioFailure,
    ScenarioFile,
    ScenarioItem,
    pytest_addoption,
    pytest_collect_file,
    pytest_configure,
    pytest_terminal_summary,
)

__all__ = [
    "DEFAULT_REPEAT",
    "ScenarioFailure",
    "ScenarioFile",
    "ScenarioItem",
    "pytest_addoption",
    "pytest_collect_file",
    "pytest_configure",
    "pytest_terminal_summary",
]
