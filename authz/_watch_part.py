"""The authorizer's side of Watch: subscribing a caller, and publishing each change.

:class:`WatchPart` is a part of :class:`~handrail.authz._authorizer.Authorizer` (a mixin
over its store and event hub): every state change the authorizer commits is published
here, to this process's streams and (for a shared store) to every replica's.
"""

from __future__ import annotations

from handrail.authz import _core
from handrail.authz._errors import InvalidArgumentError
from handrail.authz._models import ApprovalInfo, GrantInfo, LeaseInfo, Principal, WatchEventInfo
from handrail.authz._store import AuthzStore
from handrail.authz._watch import EventHub, Subscription


class WatchPart:
    """Watch for the authorizer (``store`` and ``hub`` are the authorizer's)."""

    store: AuthzStore
    hub: EventHub

    def watch(self, caller: Principal, targets: list[str], since_seq: int) -> tuple[list[WatchEventInfo], Subscription]:
        """Subscribe to changes (executor, operator, admin).

        Returns:
            Events to send first (the current lease of each target, marked ``resync``, when
            ``since_seq`` is older than the replay buffer) and the subscription.
        """
        _core.require_role(caller, _core.WATCHERS, "watch")
        for i, target in enumerate(targets):
            _core.check_text(f"targets[{i}]", target, required=True)
        if since_seq < 0:
            raise InvalidArgumentError("since_seq", "must not be negative")
        sub = self.hub.subscribe(targets, since_seq)
        first: list[WatchEventInfo] = []
        if sub.gap:
            now = self.store.now_ms()
            names = targets or [lease.target for lease in self.store.leases()]
            for target in names:
                first.append(
                    WatchEventInfo(
                        seq=self.hub.last_seq,
                        kind="lease",
                        target=target,
                        change="resync",
                        lease=self.store.get_lease(target),
                        at_ms=now,
                    )
                )
        return first, sub

    def _publish_lease(self, change: str, lease: LeaseInfo) -> None:
        self.hub.publish(kind="lease", target=lease.target, change=change, lease=lease, at_ms=self.store.now_ms())

    def _publish_grant(self, change: str, grant: GrantInfo) -> None:
        self.hub.publish(
            kind="grant",
            target=grant.target,
            change=change,
            grant_id=grant.grant_id,
            grant=grant,
            at_ms=self.store.now_ms(),
        )

    def _publish_approval(self, change: str, approval: ApprovalInfo) -> None:
        self.hub.publish(
            kind="approval",
            target=approval.target,
            change=change,
            approval_id=approval.approval_id,
            approval_status=approval.status,
            approval=approval,
            at_ms=self.store.now_ms(),
        )
