"""The operator console: a person watches, approves, and takes the wheel, in a browser.

A web application for operators (Starlette, server-rendered Jinja2 pages, a little plain
JavaScript, live updates over server-sent events), on its own listener. It speaks to the
authz sidecar and to the executors as the signed-in operator, with their own token:

- ``_config``: :class:`ConsoleConfig`;
- ``_signin``: server-side sign-ins behind an HttpOnly, SameSite=Strict cookie, CSRF tokens;
- ``_backends``: the sidecar and the executors, and the overview gathered from them;
- ``_app``: the routes and pages (:func:`create_app`);
- ``_serve``: uvicorn, in-process (:func:`start_console`) or as ``handrail console``;
- ``templates/``, ``static/``: the pages, the script and the style, as package files.

What an operator sees and does: ``docs/console.md``.
"""

from __future__ import annotations

from handrail.console._app import create_app
from handrail.console._config import DEFAULT_LISTEN, ConsoleConfig
from handrail.console._serve import RunningConsole, bind, serve_forever, start_console

__all__ = ["DEFAULT_LISTEN", "ConsoleConfig", "RunningConsole", "bind", "create_app", "serve_forever", "start_console"]
