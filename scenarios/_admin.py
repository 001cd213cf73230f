"""An admin console's users page, served locally: one destructive action among harmless ones.

Each user row has "Reset password for NAME", "Disable user NAME" (or "Enable user NAME")
and "Delete user NAME". Deleting asks first, in a modal dialog ("Delete NAME?" with
"Yes, delete NAME" and "Cancel"); only the confirmation POSTs.

Routes:
    ``GET /``                  the users page.
    ``POST /reset-password``, ``POST /disable-user``, ``POST /enable-user``,
    ``POST /delete-user``      with form field ``user``; change the state, then 303 to ``/``
                               (409 for an unknown or deleted user).

Plus what every fixture app has (``/state``, ``/__reset``, ``/__events``): see ``_base``.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from http import HTTPStatus
from typing import Any, ClassVar

from ._base import FixtureApp, Reply, form_button

__all__ = ["ADMIN_INITIAL_STATE", "AdminApp"]

ADMIN_INITIAL_STATE: Mapping[str, Any] = {
    "users": {
        "alice": {"role": "editor", "disabled": False, "deleted": False, "password_resets": 0},
        "bob": {"role": "viewer", "disabled": False, "deleted": False, "password_resets": 0},
    },
}
"""The state a fresh admin page starts in; ``AdminApp(initial=...)`` overrides keys."""


class AdminApp(FixtureApp):
    """The admin fixture app on ``127.0.0.1`` and a free port.

    Args:
        initial: fields of ``ADMIN_INITIAL_STATE`` to start from instead.
        port: the port to listen on; 0 picks a free one.
    """

    name: ClassVar[str] = "admin"
    initial_state: ClassVar[Mapping[str, Any]] = ADMIN_INITIAL_STATE
    template: ClassVar[str] = "admin.html"

    def _get_page(self, path: str) -> Reply | None:
        return Reply.page(self._render()) if path == "/" else None

    def _post(self, path: str, form: Mapping[str, str]) -> Reply | None:
        changes: Mapping[str, tuple[str, Any]] = {
            "/reset-password": ("password_resets", None),
            "/disable-user": ("disabled", True),
            "/enable-user": ("disabled", False),
            "/delete-user": ("deleted", True),
        }
        if path not in changes:
            return None
        key, value = changes[path]
        name = form.get("user", "")
        with self._lock:
            self._record_action(f"{path.lstrip('/')} {name}")
            user = self._state["users"].get(name)
            if user is None or user["deleted"]:
                return Reply.error(HTTPStatus.CONFLICT, f"no user {name!r}")
            if value is None:
                user[key] += 1
            else:
                user[key] = value
        return Reply.redirect("/")

    def _render(self) -> str:
        esc = html.escape
        with self._lock:
            users = {k: dict(v) for k, v in self._state["users"].items() if not v["deleted"]}
        rows, dialogs = [], []
        for name, user in users.items():
            status = "Disabled" if user["disabled"] else "Active"
            if user["password_resets"]:
                status += f", password reset sent ({user['password_resets']})"
            toggle = (
                form_button("/enable-user", f"Enable user {name}", hidden={"user": name})
                if user["disabled"]
                else form_button("/disable-user", f"Disable user {name}", hidden={"user": name})
            )
            rows.append(
                f"<tr><td>{esc(name)}</td><td>{esc(str(user['role']))}</td>"
                f'<td id="status-{esc(name)}">{esc(status)}</td><td>'
                + form_button("/reset-password", f"Reset password for {name}", hidden={"user": name})
                + " "
                + toggle
                + f' <button type="button" class="danger" data-confirm-delete="{esc(name)}" '
                f'aria-haspopup="dialog">Delete user {esc(name)}</button></td></tr>'
            )
            dialogs.append(
                f'<div id="confirm-delete-{esc(name)}" class="confirm" role="dialog" '
                f'aria-modal="true" aria-labelledby="confirm-title-{esc(name)}" hidden '
                f"data-rerender>\n"
                f'<h2 id="confirm-title-{esc(name)}">Delete {esc(name)}?</h2>\n'
                f"<p>This removes {esc(name)} and everything they made. It cannot be undone.</p>\n"
                + form_button("/delete-user", f"Yes, delete {name}", css="danger", hidden={"user": name})
                + '\n<button type="button" data-close-confirm>Cancel</button>\n</div>'
            )
        table = (
            '<table id="users" data-rerender>\n<tr><th>User</th><th>Role</th><th>Status</th>'
            "<th>Actions</th></tr>\n" + "\n".join(rows) + "\n</table>"
        )
        if not users:
            table = '<p id="users">No users.</p>'
        return self._page(users=table, dialogs="\n".join(dialogs))
