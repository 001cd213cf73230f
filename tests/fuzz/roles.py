"""The fuzz oracle's role table: which roles may get an OK from each RPC.

It mirrors the role table of ``docs/authz.md`` and the console's RPCs of ``docs/console.md``;
``harness.Fuzzer.wrong_allow`` flags an OK outside it.
"""

from __future__ import annotations

ROLE_OF = {"agent": "agent", "other_agent": "agent", "operator": "operator", "executor": "executor", "admin": "admin"}

ANY = frozenset({"agent", "operator", "executor", "admin"})
MANAGE = frozenset({"operator", "admin"})
READ = frozenset({"executor", "operator", "admin"})
#: Which roles may get an OK from each authz RPC (the role table of docs/authz.md).
AUTHZ_ROLES: dict[str, frozenset[str]] = {
    "Check": frozenset({"agent", "executor", "admin"}),
    "Grant": MANAGE,
    "Revoke": MANAGE,
    "ListGrants": ANY,
    "Acquire": ANY,
    "Renew": ANY,
    "Release": ANY,
    "TakeOver": MANAGE,
    "HandBack": MANAGE,
    "GetLease": ANY,
    "WhoAmI": ANY,
    "ReportActivity": frozenset({"executor", "admin"}),
    "ExpireLease": frozenset({"admin"}),
    "CloseTask": MANAGE,
    "Approve": MANAGE,
    "Deny": MANAGE,
    "GetApproval": ANY,
    "ListApprovals": ANY,
    "ReloadPolicies": MANAGE,
    "ExplainDecision": READ,
    "ListDecisions": READ,
    "Watch": READ,
    "ListPrincipals": MANAGE,
    "RevokePrincipal": frozenset({"admin"}),
    "RotateToken": frozenset({"admin"}),
    # a person's input, asked with their own token: only for that caller (see wrong_allow)
    "CheckHumanInput": MANAGE,
    "ListLeases": READ,
}
EXECUTOR_ROLES = frozenset({"agent"})
#: The console's executor RPCs: operators and admins only, never an agent.
EXECUTOR_CONSOLE_RPCS = frozenset(
    {"ListSessions", "WatchScreen", "WatchTimeline", "HumanInput", "Locate", "DescribeAction"}
)
SESSION_RPCS = frozenset({"Observe", "Act", "ActBatch", "Reconcile", "CloseSession", "Attach", "AskForPerson"})
