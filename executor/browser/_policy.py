"""The managed Chromium policy the browser backend needs: no preloading.

Speculation rules (``<script type=speculationrules>`` or a ``Speculation-Rules`` header)
make Chromium prefetch a page, or load and run it (prerender), from the browser process,
where Playwright's routes never apply: a page's rule reached a path outside the grant
with no request the gate saw (measured; ``tests/executor/test_attacks_egress.py``).
No command-line switch of Chromium turns preloading off; its ``NetworkPredictionOptions``
policy does (2: never), and Debian's Chromium reads policies from ``POLICY_DIR``, which
takes root to write: ``scripts/bootstrap.sh`` writes ``POLICY_FILE`` there. A browser host
will not start without it (:func:`policy_problem`).
"""

from __future__ import annotations

import json
from pathlib import Path

POLICY_DIR = Path("/etc/chromium/policies/managed")
POLICY_FILE = "handrail.json"
POLICY = {"NetworkPredictionOptions": 2}


def policy_problem(directory: Path | None = None) -> str | None:
    """Why Chromium would preload pages, in one line that says the fix; None if it won't.

    Every policy file of ``directory`` (default ``POLICY_DIR``) is read (Chromium merges
    them): the setting must be there, and no file may give it another value."""
    directory = POLICY_DIR if directory is None else directory
    fix = f"write {json.dumps(POLICY)} to {directory / POLICY_FILE} (scripts/bootstrap.sh does, as root)"
    found: set[str] = set()
    for path in sorted(directory.glob("*.json")) if directory.is_dir() else []:
        try:
            settings = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            return f"Chromium's policy file {path} cannot be read ({exc}): fix it, then {fix}"
        if not isinstance(settings, dict):
            return f"Chromium's policy file {path} is not a JSON object: fix it, then {fix}"
        for key, want in POLICY.items():
            if key in settings:
                found.add(key)
                if settings[key] != want:
                    return (
                        f"Chromium's policy file {path} sets {key} to {settings[key]!r}"
                        f" (pages would be preloaded past the gate): it must be {want}"
                    )
    missing = [key for key in POLICY if key not in found]
    if missing:
        return f"Chromium would preload pages past the gate (no {', '.join(missing)} policy): {fix}"
    return None
