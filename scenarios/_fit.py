"""Whether a recorded session fits the fixture app it is said to have run against.

``handrail record`` turns a session into a scenario that replays against a fixture app. A
session that ran against another page would make a scenario that fails on its first step,
so recording refuses when the fixture does not serve the session's start page, and warns
(in the file's notes and on stderr) about what a replay could not bring about: an element
the fixture's start page does not have, or a lease refusal with no lease change before it.
"""

from __future__ import annotations

import html
import urllib.error
import urllib.request
from urllib.parse import urlsplit

from handrail._vocabulary import Reason
from handrail.recorder import IntentBody, LeaseChangeBody, RefusalBody, SessionLog

from ._apps import FIXTURE_APPS
from ._errors import RecordError

__all__ = ["check_fit"]

_LEASE_REASONS = frozenset({Reason.HELD_BY_HUMAN, Reason.STALE_EPOCH, Reason.NO_LEASE})


def check_fit(session: SessionLog, fixture: str) -> list[str]:
    """The warnings of recording ``session`` against ``fixture``.

    Raises:
        RecordError: the fixture is unknown, or it does not serve the session's start page.
    """
    app_cls = FIXTURE_APPS.get(fixture)
    if app_cls is None:
        raise RecordError(f"unknown fixture {fixture!r} (known: {', '.join(sorted(FIXTURE_APPS))})")
    start = urlsplit(session.opened.start_url)
    path = (start.path or "/") + (f"?{start.query}" if start.query else "")
    app = app_cls()
    app.start()
    try:
        try:
            with urllib.request.urlopen(app.url + path, timeout=10) as response:
                page = html.unescape(response.read().decode("utf-8", "replace"))
        except urllib.error.HTTPError as exc:
            raise RecordError(
                f"the session does not fit the {fixture} fixture: it started at {path}, which the fixture "
                f"does not serve (HTTP {exc.code}); pass the fixture it ran against with --fixture"
            ) from None
        except OSError as exc:
            raise RecordError(f"cannot read the {fixture} fixture's {path}: {exc}") from None
    finally:
        app.stop()
    warnings: list[str] = []
    lease_changed = False
    for _entry, body in session:
        if isinstance(body, LeaseChangeBody):
            lease_changed = True
        name = ""
        if isinstance(body, IntentBody):
            name = body.params.name or ""
        elif isinstance(body, RefusalBody):
            name = body.name
            if body.reason in _LEASE_REASONS and not lease_changed:
                warnings.append(
                    f"a {body.reason} refusal of {body.kind} came with no lease change before it in the "
                    "ledger: a replay will not be refused the same way"
                )
        if name and name not in page:
            warnings.append(f"{name!r} is not on the {fixture} fixture's start page {path}: the replay may not find it")
    return list(dict.fromkeys(warnings))
