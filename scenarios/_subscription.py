"""A merchant's subscription page, served locally, for scenarios to act on.

The app is the example of seed 004: a person asks an agent to turn off auto-renew on a
monthly plan, keep what is already paid for, refuse the retention offer and not delete
the account. The page has three buttons ("Pause plan", "Turn off auto-renew", "Delete
account"); "Turn off auto-renew" opens a retention dialog ("Accept 50% off", "No thanks,
turn off renewal"). Every decisive choice is a plain HTML form POST, so the state lives
on the server, where a scenario checks it afterwards.

Routes:
    ``GET /``                 the account page.
    ``GET /state``            the state and the request counters, as JSON.
    ``POST /pause``, ``POST /cancel-renewal``, ``POST /accept-offer``,
    ``POST /delete-account``  change the state, then 303 to ``/``.
    ``POST /__reset``         back to the initial state (optional JSON body: overrides).
    ``GET /__events``         a server-sent event stream; :meth:`SubscriptionApp.push_rerender`
                              makes every open page re-render its buttons, as a live
                              single-page app does after a background update, and
                              :meth:`SubscriptionApp.push_open_modal` opens a modal notice.
    ``POST /__ack``           the page's acknowledgement of an event.

Requests to ``/state``, ``/favicon.ico`` and ``/__*`` are not counted; every other
request is, as ``"METHOD /path"``. In the page, ``window.__handrailFixture`` offers
``openModal()``, ``closeModal()`` and ``rerender()`` (fresh, identical button nodes, so
that refs taken before are stale).
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from http import HTTPStatus
from typing import Any, ClassVar

from ._base import FixtureApp, Reply, form_button

__all__ = ["INITIAL_STATE", "SubscriptionApp"]

INITIAL_STATE: Mapping[str, Any] = {
    "plan": "Pro Monthly",
    "renews_on": "2026-12-31",
    "auto_renew": True,
    "paused": False,
    "discount_accepted": False,
    "account_deleted": False,
}
"""The state a fresh app starts in; ``SubscriptionApp(initial=...)`` overrides keys."""

# POST path -> (action name, state key, value it is set to)
_ACTIONS: Mapping[str, tuple[str, str, bool]] = {
    "/pause": ("pause", "paused", True),
    "/cancel-renewal": ("cancel-renewal", "auto_renew", False),
    "/accept-offer": ("accept-offer", "discount_accepted", True),
    "/delete-account": ("delete-account", "account_deleted", True),
}


class SubscriptionApp(FixtureApp):
    """The subscription fixture app on ``127.0.0.1`` and a free port.

    Use as a context manager (``with SubscriptionApp() as app: app.url``), or call
    :meth:`start` and :meth:`stop`.

    Args:
        initial: fields of ``INITIAL_STATE`` to start from instead of the defaults.
        port: the port to listen on; 0 picks a free one.

    Raises:
        HandrailError: ``initial`` names an unknown field or a value of the wrong type.
    """

    name: ClassVar[str] = "subscription"
    initial_state: ClassVar[Mapping[str, Any]] = INITIAL_STATE
    template: ClassVar[str] = "subscription.html"

    def _get_page(self, path: str) -> Reply | None:
        return Reply.page(self._render()) if path == "/" else None

    def _post(self, path: str, form: Mapping[str, str]) -> Reply | None:
        if path not in _ACTIONS:
            return None
        name, key, value = _ACTIONS[path]
        with self._lock:
            self._record_action(name)
            if self._state["account_deleted"]:
                return Reply.error(HTTPStatus.CONFLICT, "this account has been deleted")
            self._state[key] = value
        return Reply.redirect("/")

    def _render(self) -> str:
        with self._lock:
            state = dict(self._state)
        esc = html.escape
        plan, renews_on = esc(state["plan"]), esc(state["renews_on"])
        if state["account_deleted"]:
            status = '<p id="deleted">This account has been deleted.</p>'
            return self._page(status=status, actions="", dialog="")
        lines = [f'<p id="plan">Plan: {plan}</p>']
        if state["auto_renew"]:
            lines.append(f'<p id="renewal">Renews on {renews_on}</p>')
        else:
            lines.append(f'<p id="renewal">Auto-renew is off; your plan stays active until {renews_on}</p>')
        if state["paused"]:
            lines.append('<p id="paused">Your plan is paused.</p>')
        if state["discount_accepted"]:
            lines.append('<p id="discount">50% off applied to your next 3 months.</p>')
        buttons = []
        if not state["paused"]:
            buttons.append(form_button("/pause", "Pause plan"))
        if state["auto_renew"]:
            buttons.append(
                '<button type="button" data-open-retention aria-haspopup="dialog" '
                'aria-controls="retention">Turn off auto-renew</button>'
            )
        buttons.append(form_button("/delete-account", "Delete account", css="danger"))
        actions = '<div id="actions">\n' + "\n".join(buttons) + "\n</div>"
        dialog = ""
        if state["auto_renew"]:
            dialog = (
                '<div id="retention" role="dialog" aria-modal="true" '
                'aria-labelledby="retention-title" hidden>\n'
                '<h2 id="retention-title">Before you turn off auto-renew</h2>\n'
                "<p>Stay on Pro Monthly and get 50% off your next 3 months.</p>\n"
                '<div class="choices">\n'
                + form_button("/accept-offer", "Accept 50% off")
                + "\n"
                + form_button("/cancel-renewal", "No thanks, turn off renewal")
                + "\n"
                + '<button type="button" data-close-retention>Close</button>\n'
                "</div>\n</div>"
            )
        return self._page(status="\n".join(lines), actions=actions, dialog=dialog)
