"""Handrail: a guarded executor for AI agents on a real browser or desktop.

The packages ``handrail.executor``, ``handrail.authz``, ``handrail.recorder`` and
``handrail.proto`` live in the repository's top-level folders of the same names.
"""

from __future__ import annotations

from handrail._errors import HandrailError

__all__ = ["HandrailError", "__version__"]
__version__ = "0.1.0"
