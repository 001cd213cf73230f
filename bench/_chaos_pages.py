"""The pages of bench/chaos.py, what each side tallies, and how the merchant's state is judged."""

from __future__ import annotations

import re
import time
from collections import Counter
from dataclasses import dataclass, field

from handrail.scenarios import FetchShopApp, HostileSite, PlansApp

# Pages whose rows are re-painted by index (the success target is judged on these).
RERENDER_PAGES = [
    "rerender=timer:1000",
    "rerender=timer:3000",
    "rerender=pointermove",
    "rerender=pointerover",
    "rerender=mouseenter",
    "rerender=pointerdown",
    "rerender=mouseup",
]
LIST_PAGES = [*RERENDER_PAGES, "overlay=hover:600", "tick=40"]
FIELD_PAGES = ["swap=focus", "swap=advance", "swap=timer:300"]
ACCOUNT_PAGES = ["account"]
# scenarios._hostile's pages: a page with every way out of its origin (and as many ways
# that stay), and a checkout paying through fetch() whose response is lost half the time.
OUT = [
    ("link", "Partner offer"),
    ("link", "Partner in a new tab"),
    ("button", "Send to partner"),
    ("button", "Go by script"),
    ("button", "Pop up partner"),
    ("link", "Redirected out"),
    ("link", "Redirected twice"),
    ("button", "Post and be sent out"),
    ("button", "Chat with partner"),
    ("button", "Chat through a worker"),
    ("button", "Chat behind a comment"),
]
STAY = [
    ("link", "Inside page"),
    ("link", "Inside in a new tab"),
    ("button", "Order here"),
    ("button", "Pop up inside"),
    ("link", "Redirected in"),
    ("button", "Order and come back"),
]
SCOPE_PAGES = ["links"]
PAY_PAGES = ["pay"]
PAGES = LIST_PAGES + FIELD_PAGES + ACCOUNT_PAGES + SCOPE_PAGES + PAY_PAGES
CANCELS_PER_EPISODE = 4
EMAIL = "ada@example.com"
_POSING = re.compile(r'button "Pause plan" \[ref=([a-z0-9]+)\]')


@dataclass
class Side:
    """What one side did, by page."""

    actions: Counter[str] = field(default_factory=Counter)
    wrong: Counter[str] = field(default_factory=Counter)
    duplicates: Counter[str] = field(default_factory=Counter)
    tasks: Counter[str] = field(default_factory=Counter)
    done: Counter[str] = field(default_factory=Counter)  # tasks done, at most 3 tries
    done_first: Counter[str] = field(default_factory=Counter)
    outside: Counter[str] = field(default_factory=Counter)  # requests another origin received
    refused_ms: list[float] = field(default_factory=list)  # REFUSED: declined at dispatch time
    swallowed_ms: list[float] = field(default_factory=list)  # FAILED, not started: at input time
    seconds: float = 0.0
    outcomes: Counter[str] = field(default_factory=Counter)
    notes: list[str] = field(default_factory=list)

    def wrong_note(self, page: str, note: str) -> None:
        self.wrong[page] += 1
        if len(self.notes) < 12:
            self.notes.append(f"{page}: {note}")


def text_ref(snapshot: str, role: str, name: str) -> str:
    """The ref of the first ``role "name"`` line of the snapshot's text (a raw agent's way)."""
    m = re.search(rf'- {role} "{re.escape(name)}"[^\n]*?\[ref=([a-z0-9]+)\]', snapshot)
    if m is None:
        raise LookupError(f"no {role} {name!r}")
    return m.group(1)


@dataclass
class Others:
    """One side's copies of the other hostile pages (scenarios._hostile)."""

    site: HostileSite
    shop: FetchShopApp

    def outside(self) -> int:
        return sum(self.site.hits("elsewhere").values()) + self.shop.state()["requests"].get("GET /partner", 0)


def _actions_after(app: PlansApp, before: int, wait_s: float) -> list[str]:
    """The merchant's actions after the first ``before``, once any in flight arrived."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline and len(app.state()["actions"]) <= before:
        time.sleep(0.01)
    time.sleep(0.05)  # a second request of the same click (cancel-all behind cancel) lands too
    return list(app.state()["actions"][before:])


def _judge_cancel(
    side: Side, page: str, app: PlansApp, before: int, plan: str, done: bool, cancelled: set[str]
) -> bool:
    """Count a wrong target or a duplicate; True when the asked plan was cancelled."""
    new = _actions_after(app, before, 1.0 if done else 0.15)
    hit = False
    for action in new:
        if action == f"cancel {plan}" and plan not in cancelled:
            hit = True
            cancelled.add(plan)
        elif action == f"cancel {plan}" or (action.startswith("cancel ") and action[7:] in cancelled):
            side.duplicates[page] += 1
        else:
            side.wrong_note(page, f"asked cancel {plan}, got {new}")
    return hit
