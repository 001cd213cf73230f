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
                              single-page app does after a background update.
    ``POST /__rerendered``    the page's acknowledgement of a re-render.

Requests to ``/state``, ``/favicon.ico`` and ``/__*`` are not counted; every other
request is, as ``"METHOD /path"``. In the page, ``window.__handrailFixture`` offers
``openModal()``, ``closeModal()`` and ``rerender()`` (fresh, identical button nodes, so
that refs taken before are stale).
"""

from __future__ import annotations

import contextlib
import copy
import html
import json
import socket
import threading
import time
from collections.abc import Mapping
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from string import Template
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

from handrail._errors import HandrailError

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

# POST path -> (action name, state key set to True / False)
_ACTIONS: Mapping[str, tuple[str, str, bool]] = {
    "/pause": ("pause", "paused", True),
    "/cancel-renewal": ("cancel-renewal", "auto_renew", False),
    "/accept-offer": ("accept-offer", "discount_accepted", True),
    "/delete-account": ("delete-account", "account_deleted", True),
}

_UNCOUNTED = ("/state", "/__", "/favicon.ico")
_EVENT_POLL_S = 0.2


def _load_template() -> Template:
    package = __package__ or "handrail.scenarios"
    text = resources.files(package).joinpath("fixtures", "subscription.html").read_text("utf-8")
    return Template(text)


def _checked_state(overrides: Mapping[str, Any] | None) -> dict[str, Any]:
    state = dict(INITIAL_STATE)
    for key, value in (overrides or {}).items():
        if key not in INITIAL_STATE:
            known = ", ".join(INITIAL_STATE)
            raise HandrailError(
                f"subscription fixture: unknown state field {key!r} (known: {known})",
                reason="INVALID_ARGUMENT",
            )
        if type(value) is not type(INITIAL_STATE[key]):
            expected = type(INITIAL_STATE[key]).__name__
            raise HandrailError(
                f"subscription fixture: field {key!r} must be {expected}, got {value!r}",
                reason="INVALID_ARGUMENT",
            )
        state[key] = value
    return state


class SubscriptionApp:
    """The subscription fixture app on ``127.0.0.1`` and a free port.

    Use as a context manager (``with SubscriptionApp() as app: app.url``), or call
    :meth:`start` and :meth:`stop`.

    Args:
        initial: fields of ``INITIAL_STATE`` to start from instead of the defaults.
        port: the port to listen on; 0 picks a free one.

    Raises:
        HandrailError: ``initial`` names an unknown field or a value of the wrong type.
    """

    def __init__(self, initial: Mapping[str, Any] | None = None, *, port: int = 0) -> None:
        self._initial = _checked_state(initial)
        self._port = port
        self._lock = threading.Lock()
        self._state = dict(self._initial)
        self._requests: dict[str, int] = {}
        self._actions: list[str] = []
        self._drops: dict[str, tuple[int, float]] = {}
        self._outages: dict[str, float] = {}
        self._lost: dict[str, int] = {}
        self._template = _load_template()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._url = ""
        # Server-pushed re-renders: a sequence number the event streams follow, and the
        # count of re-renders the pages acknowledged.
        self._events = threading.Condition(self._lock)
        self._rerender_seq = 0
        self._rerendered = 0
        self._stopping = False

    # -- lifecycle -----------------------------------------------------------------

    def start(self) -> str:
        """Start serving in a background thread; return the base URL.

        Returns:
            e.g. ``"http://127.0.0.1:41234"`` (no trailing slash).
        """
        if self._server is not None:
            return self._url
        self._stopping = False
        server = _Server(("127.0.0.1", self._port), _Handler)
        server.app = self
        thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="subscription-fixture",
            daemon=True,
        )
        thread.start()
        self._server, self._thread = server, thread
        host, port = server.server_address[:2]
        self._url = f"http://{host!s}:{port}"
        return self._url

    def stop(self) -> None:
        """Stop serving and release the port. Safe to call twice."""
        server, thread = self._server, self._thread
        self._server = self._thread = None
        with self._events:
            self._stopping = True
            self._events.notify_all()
        if server is not None:
            server.shutdown()
            server.server_close()
        if thread is not None:
            thread.join(timeout=5)

    @property
    def url(self) -> str:
        """The base URL, or ``""`` before :meth:`start`."""
        return self._url

    def __enter__(self) -> SubscriptionApp:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- state ---------------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        """Return a copy of the state and its counters.

        Besides the ``INITIAL_STATE`` fields: ``requests`` (``{"POST /pause": 1, ...}``,
        requests that reached the app), ``actions`` (action names in the order posted) and
        ``lost`` (requests cut off during a :meth:`drop_next` outage, never processed).
        """
        with self._lock:
            snapshot = copy.deepcopy(self._state)
            snapshot["requests"] = dict(self._requests)
            snapshot["actions"] = list(self._actions)
            snapshot["lost"] = dict(self._lost)
        return snapshot

    def reset(self, initial: Mapping[str, Any] | None = None) -> None:
        """Go back to the initial state; zero the counters and forget pending drops.

        Args:
            initial: overrides for this reset; by default the app's own initial state.
        """
        state = _checked_state(initial) if initial is not None else dict(self._initial)
        with self._lock:
            self._state = state
            self._requests.clear()
            self._actions.clear()
            self._drops.clear()
            self._outages.clear()
            self._lost.clear()

    def drop_next(self, path: str, count: int = 1, *, outage_s: float = 1.0) -> None:
        """Make the next request(s) to ``path`` lose their connection after being handled.

        The server changes the state and counts the request as usual, then closes the
        connection without sending a response: "the connection was lost after submit".

        For ``outage_s`` afterwards, further requests to ``path`` are cut off before they
        reach the app (counted under ``lost``, not ``requests``). Browsers silently resend
        a request whose connection closed without a response; without the outage that
        resend would succeed and hide the fault.

        Args:
            path: e.g. ``"/cancel-renewal"``.
            count: how many of the next requests to drop.
            outage_s: how long the path stays unreachable after each drop.
        """
        with self._lock:
            pending, _ = self._drops.get(path, (0, outage_s))
            self._drops[path] = (pending + count, outage_s)

    def push_rerender(self) -> int:
        """Make every open page replace its buttons with fresh, identical nodes.

        Returns:
            How many re-renders have been pushed so far (pass it to :meth:`wait_rerendered`).
        """
        with self._events:
            self._rerender_seq += 1
            self._events.notify_all()
            return self._rerender_seq

    def wait_rerendered(self, count: int, *, timeout: float = 10.0) -> bool:
        """Wait until pages acknowledged ``count`` re-renders; False on timeout."""
        deadline = time.monotonic() + timeout
        with self._events:
            while self._rerendered < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._events.wait(left)
            return True

    # -- used by the handler -------------------------------------------------------

    def _next_event(self, seen: int) -> int | None:
        """Block until a re-render newer than ``seen`` is pushed; None when stopping."""
        with self._events:
            while self._rerender_seq <= seen and not self._stopping:
                self._events.wait(_EVENT_POLL_S)
            return None if self._stopping else self._rerender_seq

    def _ack_rerender(self) -> None:
        with self._events:
            self._rerendered += 1
            self._events.notify_all()

    def _count(self, method: str, path: str) -> None:
        if path.startswith(_UNCOUNTED):
            return
        key = f"{method} {path}"
        with self._lock:
            self._requests[key] = self._requests.get(key, 0) + 1

    def _take_drop(self, path: str) -> bool:
        with self._lock:
            pending, outage_s = self._drops.get(path, (0, 0.0))
            if pending <= 0:
                return False
            self._drops[path] = (pending - 1, outage_s)
            self._outages[path] = time.monotonic() + outage_s
            return True

    def _cut_off(self, method: str, path: str) -> bool:
        with self._lock:
            if time.monotonic() >= self._outages.get(path, 0.0):
                return False
            key = f"{method} {path}"
            self._lost[key] = self._lost.get(key, 0) + 1
            return True

    def _apply(self, path: str) -> bool:
        name, key, value = _ACTIONS[path]
        with self._lock:
            self._actions.append(name)
            if self._state["account_deleted"]:
                return False
            self._state[key] = value
            return True

    def _render(self) -> str:
        with self._lock:
            state = dict(self._state)
        esc = html.escape
        plan, renews_on = esc(state["plan"]), esc(state["renews_on"])
        if state["account_deleted"]:
            status = '<p id="deleted">This account has been deleted.</p>'
            return self._template.substitute(status=status, actions="", dialog="")
        lines = [f'<p id="plan">Plan: {plan}</p>']
        if state["auto_renew"]:
            lines.append(f'<p id="renewal">Renews on {renews_on}</p>')
        else:
            lines.append(
                f'<p id="renewal">Auto-renew is off; your plan stays active until {renews_on}</p>'
            )
        if state["paused"]:
            lines.append('<p id="paused">Your plan is paused.</p>')
        if state["discount_accepted"]:
            lines.append('<p id="discount">50% off applied to your next 3 months.</p>')
        buttons = []
        if not state["paused"]:
            buttons.append(_form("/pause", "Pause plan"))
        if state["auto_renew"]:
            buttons.append(
                '<button type="button" data-open-retention aria-haspopup="dialog" '
                'aria-controls="retention">Turn off auto-renew</button>'
            )
        buttons.append(_form("/delete-account", "Delete account", css="danger"))
        actions = '<div id="actions">\n' + "\n".join(buttons) + "\n</div>"
        dialog = ""
        if state["auto_renew"]:
            dialog = (
                '<div id="retention" role="dialog" aria-modal="true" '
                'aria-labelledby="retention-title" hidden>\n'
                '<h2 id="retention-title">Before you turn off auto-renew</h2>\n'
                "<p>Stay on Pro Monthly and get 50% off your next 3 months.</p>\n"
                '<div class="choices">\n'
                + _form("/accept-offer", "Accept 50% off")
                + "\n"
                + _form("/cancel-renewal", "No thanks, turn off renewal")
                + "\n"
                + '<button type="button" data-close-retention>Close</button>\n'
                "</div>\n</div>"
            )
        return self._template.substitute(status="\n".join(lines), actions=actions, dialog=dialog)


def _form(action: str, label: str, *, css: str = "") -> str:
    klass = f' class="{css}"' if css else ""
    return (
        f'<form method="post" action="{action}">'
        f'<button type="submit"{klass}>{html.escape(label)}</button></form>'
    )


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    app: SubscriptionApp


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    # One request per connection, so that a dropped connection never carries a
    # neighbouring request down with it.
    protocol_version = "HTTP/1.0"

    def log_message(self, format: str, *args: Any) -> None:
        # The fixture's requests are visible through /state; keep test output clean.
        pass

    def do_GET(self) -> None:
        app = self.server.app
        path = urlsplit(self.path).path
        if app._cut_off("GET", path):
            self._hang_up()
            return
        app._count("GET", path)
        if self._dropped(path):
            return
        if path == "/":
            self._send(HTTPStatus.OK, app._render().encode(), "text/html; charset=utf-8")
        elif path == "/__events":
            self._stream_events()
        elif path == "/state":
            self._send_json(HTTPStatus.OK, app.state())
        else:
            self._send(HTTPStatus.NOT_FOUND, b"not found\n", "text/plain; charset=utf-8")

    def do_POST(self) -> None:
        app = self.server.app
        path = urlsplit(self.path).path
        length = int(self.headers.get("Content-Length") or 0)
        data = self.rfile.read(length) if length > 0 else b""
        if app._cut_off("POST", path):
            self._hang_up()
            return
        app._count("POST", path)
        if path == "/__reset":
            self._reset(data)
            return
        if path == "/__rerendered":
            app._ack_rerender()
            self._send(HTTPStatus.NO_CONTENT, b"", "text/plain")
            return
        if path not in _ACTIONS:
            self._send(HTTPStatus.NOT_FOUND, b"not found\n", "text/plain; charset=utf-8")
            return
        applied = app._apply(path)
        if self._dropped(path):
            return
        if applied:
            self._redirect("/")
        else:
            self._send(
                HTTPStatus.CONFLICT, b"this account has been deleted\n", "text/plain; charset=utf-8"
            )

    def _stream_events(self) -> None:
        app = self.server.app
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        with app._events:
            seen = app._rerender_seq  # only re-renders pushed after the page connected
        try:
            self.wfile.write(b": connected\n\n")
            self.wfile.flush()
            while (seq := app._next_event(seen)) is not None:
                seen = seq
                self.wfile.write(f"event: rerender\ndata: {seq}\n\n".encode())
                self.wfile.flush()
        except OSError:
            pass  # the page went away
        self.close_connection = True

    def _reset(self, data: bytes) -> None:
        try:
            overrides = json.loads(data) if data.strip() else None
            if overrides is not None and not isinstance(overrides, dict):
                raise ValueError("the body must be a JSON object")
            self.server.app.reset(overrides)
        except (ValueError, HandrailError) as exc:
            self._send_json(HTTPStatus.BAD_REQUEST, {"error": str(exc)})
            return
        self._send(HTTPStatus.NO_CONTENT, b"", "text/plain")

    def _dropped(self, path: str) -> bool:
        if not self.server.app._take_drop(path):
            return False
        # Handled, counted, and now the connection is lost before any response byte.
        self._hang_up()
        return True

    def _hang_up(self) -> None:
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)
        self.connection.close()

    def _redirect(self, location: str) -> None:
        self.send_response(HTTPStatus.SEE_OTHER)
        self.send_header("Location", location)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _send_json(self, status: HTTPStatus, obj: Any) -> None:
        self._send(status, json.dumps(obj).encode(), "application/json")

    def _send(self, status: HTTPStatus, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)
