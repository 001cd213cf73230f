"""The X11 desktop backend (being built; see the desktop executor issue)."""

from __future__ import annotations

from handrail.executor._backend import Backend
from handrail.executor._errors import BackendError
from handrail.executor._models import DesktopTarget


async def open_desktop(target: DesktopTarget) -> Backend:
    """Open a desktop surface bound to ``target``'s window."""
    raise BackendError("the desktop backend is not available in this build")
