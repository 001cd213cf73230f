"""Recorded scenarios and the local fixture apps they run against.

A fixture app stands in for a merchant's web app: it runs on ``127.0.0.1`` and a free
port, keeps its state on the server and reports it, so that a scenario ends by checking
the app's real state rather than the agent's account of it.
"""

from __future__ import annotations

from ._admin import ADMIN_INITIAL_STATE, AdminApp
from ._base import FixtureApp
from ._checkout import CHECKOUT_INITIAL_STATE, CheckoutApp
from ._subscription import INITIAL_STATE, SubscriptionApp

__all__ = [
    "ADMIN_INITIAL_STATE",
    "CHECKOUT_INITIAL_STATE",
    "FIXTURE_APPS",
    "INITIAL_STATE",
    "AdminApp",
    "CheckoutApp",
    "FixtureApp",
    "SubscriptionApp",
]

FIXTURE_APPS: dict[str, type[FixtureApp]] = {
    "subscription": SubscriptionApp,
    "checkout": CheckoutApp,
    "admin": AdminApp,
}
"""Fixture apps by the name a scenario file uses."""
