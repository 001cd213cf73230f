"""Recorded scenarios and the local fixture apps they run against.

A fixture app stands in for a merchant's web app: it runs on ``127.0.0.1`` and a free
port, keeps its state on the server and reports it, so that a scenario ends by checking
the app's real state rather than the agent's account of it.
"""

from __future__ import annotations

from ._subscription import INITIAL_STATE, SubscriptionApp

__all__ = ["FIXTURE_APPS", "INITIAL_STATE", "SubscriptionApp"]

FIXTURE_APPS: dict[str, type[SubscriptionApp]] = {"subscription": SubscriptionApp}
"""Fixture apps by the name a scenario file uses."""
