"""The scenario harness: recorded scenarios, their replay, and the local fixture apps.

A scenario (a YAML file, ``docs/scenarios.md``) drives the real stack — the authz sidecar
and the executor as processes, a fixture app on loopback or Tk windows on a virtual X
display — through a task with faults injected at chosen steps, and judges the run by the
fixture's real state and the ledger. A fixture app stands in for a merchant's web app: it
runs on ``127.0.0.1`` and a free port, keeps its state on the server and reports it.

This is the top layer: it uses the executor, the authz sidecar and the ledger, and none
of them uses it.

Example::

    from handrail.scenarios import load_scenario, replay

    report = replay(load_scenario("scenarios/subscription-cancel-renewal.yaml"), repeat=3)
    print(report.summary())  # subscription-cancel-renewal: pass^3 (3/3 runs passed, ...)

With ``-p handrail.scenarios.pytest_plugin`` every ``scenarios/*.yaml`` is a test.
"""

from __future__ import annotations

from ._acts import ACT_KINDS, FAULT_KINDS, OUTCOMES, REASONS, ActSpec, Expected
from ._admin import ADMIN_INITIAL_STATE, AdminApp
from ._apps import FIXTURE_APPS
from ._base import FixtureApp
from ._checkout import CHECKOUT_INITIAL_STATE, CheckoutApp
from ._checks import Checks, LedgerChecks, LedgerCount, StateCheck
from ._desktop import DesktopApps, display_unavailable
from ._errors import DisplayError, RecordError, ScenarioError
from ._hostile import (
    FETCHSHOP_INITIAL_STATE,
    LOST_RESPONSES,
    WAYS_OUT,
    FetchShopApp,
    HostileSite,
    LostResponse,
    WayOut,
    hostile_site,
)
from ._judge import check_state
from ._loading import dump_scenario, load_scenario, parse_scenario
from ._plans import PLAN_IDS, PLANS_INITIAL_STATE, POSING_REF, PlansApp
from ._procs import ServerProcess, free_port, start_authz, start_executor, start_server
from ._record import record_session, scenario_from_session
from ._replay import RunResult, ScenarioReport, replay, run_once
from ._scenario import (
    ActStep,
    CheckStep,
    FaultStep,
    GrantSpec,
    ObserveStep,
    ReconcileStep,
    Scenario,
    SessionSpec,
    Step,
    WaitStep,
)
from ._second_factor import SECOND_FACTOR_CODE, SECOND_FACTOR_STATE, SecondFactorApp
from ._subscription import INITIAL_STATE, SubscriptionApp
from ._tkapps import COLOURS, NOTES_LAYOUT, TkApp
from ._xvfb import VirtualDisplay

__all__ = [
    "ACT_KINDS",
    "ADMIN_INITIAL_STATE",
    "CHECKOUT_INITIAL_STATE",
    "COLOURS",
    "FAULT_KINDS",
    "FETCHSHOP_INITIAL_STATE",
    "FIXTURE_APPS",
    "INITIAL_STATE",
    "LOST_RESPONSES",
    "NOTES_LAYOUT",
    "OUTCOMES",
    "PLANS_INITIAL_STATE",
    "PLAN_IDS",
    "POSING_REF",
    "REASONS",
    "SECOND_FACTOR_CODE",
    "SECOND_FACTOR_STATE",
    "WAYS_OUT",
    "ActSpec",
    "ActStep",
    "AdminApp",
    "CheckStep",
    "CheckoutApp",
    "Checks",
    "DesktopApps",
    "DisplayError",
    "Expected",
    "FaultStep",
    "FetchShopApp",
    "FixtureApp",
    "GrantSpec",
    "HostileSite",
    "LedgerChecks",
    "LedgerCount",
    "LostResponse",
    "ObserveStep",
    "PlansApp",
    "ReconcileStep",
    "RecordError",
    "RunResult",
    "Scenario",
    "ScenarioError",
    "ScenarioReport",
    "SecondFactorApp",
    "ServerProcess",
    "SessionSpec",
    "StateCheck",
    "Step",
    "SubscriptionApp",
    "TkApp",
    "VirtualDisplay",
    "WaitStep",
    "WayOut",
    "check_state",
    "display_unavailable",
    "dump_scenario",
    "free_port",
    "hostile_site",
    "load_scenario",
    "parse_scenario",
    "record_session",
    "replay",
    "run_once",
    "scenario_from_session",
    "start_authz",
    "start_executor",
    "start_server",
]
