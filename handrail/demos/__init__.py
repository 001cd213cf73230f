"""The demos: the guarded loop end to end, for a newcomer (``handrail demo [--desktop]``).

- :func:`run_demo`: a browser on the subscription fixture — a refusal for scope, a stale
  ref after a re-render, an operator's takeover and hand-back, the cancellation.
- :func:`run_console_demo`: a person takes the wheel in the operator console (second factor).
- :func:`run_desktop_demo`: a Tk window on a virtual X display — typing, a keystroke
  refused after another window stole the focus, a click found in a screenshot, a person
  at the desk.

Each starts the authz sidecar and the executor as processes, prints every step and the
ledger's timeline, stops what it started, and returns 0 when every step behaved.
"""

from __future__ import annotations

from ._browser import run_demo
from ._common import Steps
from ._console import run_console_demo
from ._desktop import run_desktop_demo

__all__ = ["Steps", "run_console_demo", "run_demo", "run_desktop_demo"]
