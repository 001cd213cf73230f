"""Signing in to the console: server-side sessions behind an HttpOnly, SameSite=Strict cookie.

An operator signs in with their sidecar token; the console asks the sidecar who it
belongs to and lets in operators and admins only (an agent's or an executor's token is
refused). The session lives on the server: the cookie holds only a random id. Each session
has a CSRF token that every state-changing request must carry (``X-CSRF-Token`` header or
``csrf`` form field), compared in constant time; the sign-in form has its own, bound to a
pre-session cookie. A session ends at sign-out, after ``idle_s`` without a request, or
``max_age_s`` after sign-in.
"""

from __future__ import annotations

import hmac
import secrets
import threading
import time
from dataclasses import dataclass, field

__all__ = ["COOKIE", "PRE_COOKIE", "SignIn", "SignIns"]

COOKIE = "handrail_console"
PRE_COOKIE = "handrail_console_pre"
_MAX_SESSIONS = 1000


@dataclass
class SignIn:
    """One signed-in operator."""

    session_id: str
    principal: str
    role: str
    token: str = field(repr=False)  # the operator's sidecar token: never sent to a browser
    csrf: str = field(repr=False)
    created: float
    seen: float


class SignIns:
    """The console's server-side sessions.

    Args:
        idle_s: a session ends after this long without a request.
        max_age_s: and this long after sign-in, whatever happens.
        clock: seconds, monotonic (tests pass their own).
    """

    def __init__(self, idle_s: float = 30 * 60, max_age_s: float = 12 * 3600, clock: object = None) -> None:
        self.idle_s = idle_s
        self.max_age_s = max_age_s
        self._clock = clock if callable(clock) else time.monotonic
        self._by_id: dict[str, SignIn] = {}
        self._lock = threading.Lock()

    def _now(self) -> float:
        now: float = self._clock()
        return now

    def open(self, principal: str, role: str, token: str) -> SignIn:
        now = self._now()
        with self._lock:
            self._sweep(now)
            if len(self._by_id) >= _MAX_SESSIONS:
                oldest = min(self._by_id.values(), key=lambda s: s.seen)
                del self._by_id[oldest.session_id]
            sign_in = SignIn(secrets.token_urlsafe(32), principal, role, token, secrets.token_urlsafe(32), now, now)
            self._by_id[sign_in.session_id] = sign_in
        return sign_in

    def get(self, session_id: str | None) -> SignIn | None:
        """The live session with this cookie value (its idle clock restarts), else None."""
        if not session_id:
            return None
        now = self._now()
        with self._lock:
            sign_in = self._by_id.get(session_id)
            if sign_in is None:
                return None
            if now - sign_in.seen > self.idle_s or now - sign_in.created > self.max_age_s:
                del self._by_id[session_id]
                return None
            sign_in.seen = now
            return sign_in

    def alive(self, session_id: str) -> bool:
        """Whether the session is still signed in (without counting this as a request:
        an open page's live stream does not keep an abandoned sign-in alive)."""
        now = self._now()
        with self._lock:
            s = self._by_id.get(session_id)
            return s is not None and now - s.seen <= self.idle_s and now - s.created <= self.max_age_s

    def close(self, session_id: str) -> None:
        with self._lock:
            self._by_id.pop(session_id, None)

    def _sweep(self, now: float) -> None:
        for sid in [
            s for s, v in self._by_id.items() if now - v.seen > self.idle_s or now - v.created > self.max_age_s
        ]:
            del self._by_id[sid]


def same(a: str | None, b: str | None) -> bool:
    """Constant-time equality of two non-empty strings."""
    return bool(a) and bool(b) and hmac.compare_digest(str(a), str(b))
