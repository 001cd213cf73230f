"""The browser fixture apps by the name a scenario file uses."""

from __future__ import annotations

from ._admin import AdminApp
from ._base import FixtureApp
from ._checkout import CheckoutApp
from ._hostile import FetchShopApp
from ._plans import PlansApp
from ._second_factor import SecondFactorApp
from ._subscription import SubscriptionApp

__all__ = ["FIXTURE_APPS"]

FIXTURE_APPS: dict[str, type[FixtureApp]] = {
    "subscription": SubscriptionApp,
    "checkout": CheckoutApp,
    "admin": AdminApp,
    "fetchshop": FetchShopApp,
    "plans": PlansApp,
    "subscription-2fa": SecondFactorApp,
}
"""Fixture apps by the name a scenario file uses."""
