"""The one place the scenario harness reaches into the executor's X11 helpers.

A desktop fixture needs a few facts of the X display to set its scene (which window is
an application's, which one has the focus, where a window is) and asks the window manager
to activate a window; the executor's desktop backend has all of that, public as
``handrail.executor.desktop.X11``. Everything in ``handrail.scenarios`` (and the desktop
demo) that needs it goes through :func:`connect`.

python-xlib is imported only when a desktop fixture runs: the harness works without it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from handrail.executor.desktop import X11 as X11  # re-exported for type hints

__all__ = ["connect"]


@contextmanager
def connect(display: str) -> Iterator[X11]:
    """A connection to ``display`` with the executor's X11 helpers; closed on exit."""
    from handrail.executor.desktop import X11 as X11  # re-exported for type hints

    x = X11(display)
    try:
        yield x
    finally:
        x.close()
