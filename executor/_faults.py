"""Fault injection for the crash matrix and the recorded scenarios.

``--fault POINT[:KEY][:sleep=MS]`` (or ``$HANDRAIL_FAULT``) makes the executor kill itself
with SIGKILL — no cleanup, like a crash — or pause, at one point of an action's life:

- ``before-intent``: every check passed and authz allowed; nothing is in the ledger yet;
- ``after-intent``: the intent is durable; nothing was dispatched;
- ``after-dispatch``: the action reached the page; no result is recorded;
- ``after-result``: the result is durable; the reply was not sent.

With ``KEY`` only the action with that idempotency key triggers it. Off unless asked for.
"""

from __future__ import annotations

import asyncio
import os
import signal
from dataclasses import dataclass
from typing import Protocol

from handrail.executor._errors import InvalidArgumentError

POINTS = ("before-intent", "after-intent", "after-dispatch", "after-result")


class FaultPoint(Protocol):
    """What the act path calls at each point of an action's life (``POINTS``)."""

    async def hit(self, point: str, idempotency_key: str) -> None:
        """Act on ``point`` of the action keyed ``idempotency_key``: return to go on."""
        ...


@dataclass(frozen=True)
class Fault:
    point: str
    key: str = ""
    sleep_ms: int = 0  # 0 = kill

    @classmethod
    def parse(cls, text: str) -> Fault:
        point, _, rest = text.partition(":")
        if point not in POINTS:
            raise InvalidArgumentError("fault", f"{point!r} is not one of {', '.join(POINTS)}")
        key, sleep_ms = "", 0
        for part in filter(None, rest.split(":")):
            if part.startswith("sleep="):
                try:
                    sleep_ms = int(part[len("sleep=") :])
                except ValueError as exc:
                    raise InvalidArgumentError("fault", f"bad sleep in {text!r}") from exc
            else:
                key = part
        return cls(point, key, sleep_ms)

    async def hit(self, point: str, idempotency_key: str) -> None:
        if point != self.point or (self.key and self.key != idempotency_key):
            return
        if self.sleep_ms:
            await asyncio.sleep(self.sleep_ms / 1000)
            return
        os.kill(os.getpid(), signal.SIGKILL)


class NoFault:
    """No fault: every point passes."""

    async def hit(self, point: str, idempotency_key: str) -> None:
        return None
