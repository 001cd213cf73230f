"""The sidecar's part in the operator console: a person's input, and every lease.

:class:`PersonChecks` is a part of :class:`~handrail.authz._authorizer.Authorizer` (a
mixin over its store): a person's input at the wheel is decided by
:func:`._reach.decide_human` and logged like any check; the console's overview lists the
leases.
"""

from __future__ import annotations

import dataclasses

from handrail.authz import _core
from handrail.authz._errors import PermissionDeniedError
from handrail.authz._explain import redact_check
from handrail.authz._models import CheckInput, Decision, DecisionRecord, LeaseInfo, Principal
from handrail.authz._reach import ConsoleOrigins, decide_human
from handrail.authz._store import AuthzStore


class PersonChecks:
    """The console's part of the authorizer (``store`` is the authorizer's).

    Attributes:
        console_origins: where the operator console is served: agents never reach it
            (``context.origin_is_console`` of every check; ``serve`` sets it).
    """

    store: AuthzStore
    console_origins: ConsoleOrigins = ConsoleOrigins()

    def check_human_input(self, caller: Principal, request: CheckInput) -> Decision:
        """Decide and log a person's own input at the wheel (:func:`._reach.decide_human`)."""
        _core.validate_check(request)
        _core.require_role(caller, _core.MANAGERS, "send a person's input")
        if request.principal != caller.name:
            raise PermissionDeniedError(f"{caller.name!r} may send only its own input, not {request.principal!r}'s")
        now, lease = self.store.now_ms(), self.store.lease_row(request.target)
        decision = dataclasses.replace(decide_human(request, lease, now), decision_id=self.store.new_decision_id())
        self.store.record_decision(
            DecisionRecord(decision.decision_id, now, caller.name, redact_check(request), decision, lease)
        )
        return decision

    def list_leases(self, caller: Principal) -> list[LeaseInfo]:
        """Every target's lease as it stands now (executor, operator, admin)."""
        _core.require_role(caller, _core.READERS, "list leases")
        return [lease.effective(self.store.now_ms()) for lease in self.store.leases()]
