"""What every fixture app shares: a threaded HTTP server on loopback, counters, faults.

A fixture app keeps its state on the server, counts the requests that reach it and
reports both at ``GET /state``, so that a scenario ends by checking the app's real state.
Subclasses name their initial state and template, render their pages and handle their
form POSTs; this module owns the rest:

    ``GET /state``         the state and the request counters, as JSON.
    ``POST /__reset``      back to the initial state (optional JSON body: overrides).
    ``GET /__events``      a server-sent event stream: ``rerender`` (every open page
                           replaces its controls with fresh, identical nodes, so that refs
                           taken before are stale) and ``open-modal`` (every open page
                           opens a modal notice over its content).
    ``POST /__ack``        a page's acknowledgement of an event (``?event=NAME``).

Requests to ``/state``, ``/favicon.ico`` and ``/__*`` are not counted; every other
request is, as ``"METHOD /path"``.
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
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from string import Template
from types import TracebackType
from typing import Any, ClassVar, Self
from urllib.parse import parse_qs, urlsplit

from handrail._errors import HandrailError

__all__ = ["EVENTS", "FixtureApp", "Reply", "form_button"]

EVENTS = ("rerender", "open-modal")
"""Events a fixture app can push to its open pages."""

_UNCOUNTED = ("/state", "/__", "/favicon.ico")
_EVENT_POLL_S = 0.2

# Shared by every template (``$fixture_script``): the event stream and the modal notice.
_FIXTURE_SCRIPT = """
<script>
(function () {
  "use strict";
  function byId(id) { return document.getElementById(id); }
  // The notice is built when it opens, so that a page shows no extra control before.
  function openNotice() {
    if (!byId("fixture-notice")) {
      var backdrop = document.createElement("div");
      backdrop.id = "fixture-notice-backdrop";
      var notice = document.createElement("div");
      notice.id = "fixture-notice";
      notice.setAttribute("role", "dialog");
      notice.setAttribute("aria-modal", "true");
      notice.setAttribute("aria-labelledby", "fixture-notice-title");
      var title = document.createElement("h2");
      title.id = "fixture-notice-title";
      title.textContent = "A quick question";
      var text = document.createElement("p");
      text.textContent = "How likely are you to recommend us to a friend?";
      var dismiss = document.createElement("button");
      dismiss.type = "button";
      dismiss.setAttribute("data-close-notice", "");
      dismiss.textContent = "Dismiss survey";
      notice.append(title, text, dismiss);
      document.body.appendChild(backdrop);
      document.body.appendChild(notice);
    }
    byId("fixture-notice").hidden = false;
    byId("fixture-notice-backdrop").hidden = false;
    byId("fixture-notice").querySelector("button").focus();
    return true;
  }
  function closeNotice() {
    ["fixture-notice", "fixture-notice-backdrop"].forEach(function (id) {
      if (byId(id)) { byId(id).hidden = true; }
    });
    return true;
  }
  // Fresh, identical nodes: same roles and names, new elements (stale refs).
  function rerenderControls() {
    document.querySelectorAll("[data-rerender]").forEach(function (old) {
      old.replaceWith(old.cloneNode(true));
    });
    return true;
  }
  document.addEventListener("click", function (event) {
    var target = event.target instanceof Element ? event.target : null;
    if (target && target.closest("[data-close-notice]")) { closeNotice(); }
  });
  window.__handrailNotice = { open: openNotice, close: closeNotice, rerender: rerenderControls };
  if (window.EventSource) {
    // Events pushed since this page was rendered reach it, even if pushed before the
    // stream connected (a page that just loaded after a form post).
    var events = new EventSource("/__events?since=__EVENTS_SINCE__");
    events.addEventListener("rerender", function () {
      (window.__handrailFixture && window.__handrailFixture.rerender || rerenderControls)();
      fetch("/__ack?event=rerender", { method: "POST" });
    });
    events.addEventListener("open-modal", function () {
      openNotice();
      fetch("/__ack?event=open-modal", { method: "POST" });
    });
  }
})();
</script>
"""

_NOTICE_STYLE = """
  #fixture-notice-backdrop { position: fixed; inset: 0; z-index: 10;
                             background: rgba(0, 0, 0, 0.45); }
  #fixture-notice { position: fixed; top: 25%; left: 50%; transform: translateX(-50%); z-index: 11;
                    background: #fff; padding: 1.5rem; border-radius: 10px; min-width: 20rem; }
  [hidden] { display: none !important; }
"""


@dataclass(frozen=True)
class Reply:
    """What a fixture route answers: a 303 to ``location``, or a status and a body."""

    status: HTTPStatus = HTTPStatus.SEE_OTHER
    location: str = ""
    body: str = ""
    content_type: str = "text/plain; charset=utf-8"

    @classmethod
    def redirect(cls, location: str) -> Reply:
        return cls(HTTPStatus.SEE_OTHER, location)

    @classmethod
    def page(cls, text: str) -> Reply:
        return cls(HTTPStatus.OK, body=text, content_type="text/html; charset=utf-8")

    @classmethod
    def error(cls, status: HTTPStatus, text: str) -> Reply:
        return cls(status, body=text + "\n")


def form_button(action: str, label: str, *, css: str = "", hidden: Mapping[str, str] | None = None) -> str:
    """A one-button HTML form that POSTs to ``action`` (hidden fields optional)."""
    klass = f' class="{css}"' if css else ""
    fields = "".join(
        f'<input type="hidden" name="{html.escape(k)}" value="{html.escape(v)}">' for k, v in (hidden or {}).items()
    )
    return (
        f'<form method="post" action="{action}">{fields}'
        f'<button type="submit"{klass}>{html.escape(label)}</button></form>'
    )


class FixtureApp:
    """Base of the fixture apps: serve on ``127.0.0.1`` and a free port, count, inject faults.

    Subclasses set ``name``, ``initial_state`` and ``template`` and implement
    :meth:`_get_page` and :meth:`_post`. Use an app as a context manager
    (``with CheckoutApp() as app: app.url``), or call :meth:`start` and :meth:`stop`.

    Args:
        initial: top-level fields of ``initial_state`` to start from instead of the defaults.
        port: the port to listen on; 0 picks a free one.

    Raises:
        HandrailError: ``initial`` names an unknown field or a value of the wrong type.
    """

    name: ClassVar[str] = "fixture"
    initial_state: ClassVar[Mapping[str, Any]] = {}
    template: ClassVar[str] = ""

    def __init__(self, initial: Mapping[str, Any] | None = None, *, port: int = 0) -> None:
        self._initial = self._checked_state(initial)
        self._port = port
        self._lock = threading.Lock()
        self._state = copy.deepcopy(self._initial)
        self._requests: dict[str, int] = {}
        self._actions: list[str] = []
        self._drops: dict[str, tuple[int, float]] = {}
        self._outages: dict[str, float] = {}
        self._lost: dict[str, int] = {}
        self._page_template = self._load_template() if self.template else Template("")
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._url = ""
        # Server-pushed events: the streams follow a sequence number; pages acknowledge.
        self._events = threading.Condition(self._lock)
        self._event_log: list[str] = []
        self._acks: dict[str, int] = {}
        self._stopping = False
        self._headers = threading.local()  # the headers of the request being handled

    def request_header(self, name: str) -> str:
        """A header of the POST being handled (for ``_post``), or ``""``."""
        headers = getattr(self._headers, "value", None)
        return str(headers.get(name, "")) if headers is not None else ""

    # -- lifecycle -----------------------------------------------------------------

    def start(self) -> str:
        """Start serving in a background thread; return the base URL (no trailing slash)."""
        if self._server is not None:
            return self._url
        self._stopping = False
        server = _Server(("127.0.0.1", self._port), _Handler)
        server.app = self
        thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"{self.name}-fixture",
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

    def __enter__(self) -> Self:
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

        Besides the state's own fields: ``requests`` (``{"POST /pay": 1, ...}``, requests
        that reached the app), ``actions`` (action names in the order posted) and ``lost``
        (requests cut off during a :meth:`drop_next` outage, never processed).
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
        state = self._checked_state(initial) if initial is not None else self._initial
        with self._lock:
            self._state = copy.deepcopy(state)
            self._requests.clear()
            self._actions.clear()
            self._drops.clear()
            self._outages.clear()
            self._lost.clear()

    @classmethod
    def _checked_state(cls, overrides: Mapping[str, Any] | None) -> dict[str, Any]:
        state = copy.deepcopy(dict(cls.initial_state))
        for key, value in (overrides or {}).items():
            if key not in cls.initial_state:
                known = ", ".join(cls.initial_state)
                raise HandrailError(
                    f"{cls.name} fixture: unknown state field {key!r} (known: {known})",
                    reason="INVALID_ARGUMENT",
                )
            if type(value) is not type(cls.initial_state[key]):
                expected = type(cls.initial_state[key]).__name__
                raise HandrailError(
                    f"{cls.name} fixture: field {key!r} must be {expected}, got {value!r}",
                    reason="INVALID_ARGUMENT",
                )
            state[key] = copy.deepcopy(value)
        return state

    # -- faults --------------------------------------------------------------------

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

    def push_event(self, event: str) -> int:
        """Push ``event`` (one of :data:`EVENTS`) to every open page.

        Returns:
            How many events of that kind were pushed so far (see :meth:`wait_acked`).
        """
        if event not in EVENTS:
            raise HandrailError(f"unknown fixture event {event!r}", reason="INVALID_ARGUMENT")
        with self._events:
            self._event_log.append(event)
            self._events.notify_all()
            return self._event_log.count(event)

    def wait_acked(self, event: str, count: int, *, timeout: float = 10.0) -> bool:
        """Wait until pages acknowledged ``count`` events of this kind; False on timeout."""
        deadline = time.monotonic() + timeout
        with self._events:
            while self._acks.get(event, 0) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._events.wait(left)
            return True

    def push_rerender(self) -> int:
        """Make every open page replace its controls with fresh, identical nodes.

        Returns:
            How many re-renders have been pushed so far (pass it to :meth:`wait_rerendered`).
        """
        return self.push_event("rerender")

    def wait_rerendered(self, count: int, *, timeout: float = 10.0) -> bool:
        """Wait until pages acknowledged ``count`` re-renders; False on timeout."""
        return self.wait_acked("rerender", count, timeout=timeout)

    def push_open_modal(self) -> int:
        """Make every open page open a modal notice ("Dismiss survey") over its content.

        Returns:
            How many have been pushed so far (pass it to :meth:`wait_modal_opened`).
        """
        return self.push_event("open-modal")

    def wait_modal_opened(self, count: int, *, timeout: float = 10.0) -> bool:
        """Wait until pages acknowledged ``count`` modal notices; False on timeout."""
        return self.wait_acked("open-modal", count, timeout=timeout)

    # -- for subclasses ------------------------------------------------------------

    def _load_template(self) -> Template:
        package = __package__ or "handrail.scenarios"
        text = resources.files(package).joinpath("fixtures", self.template).read_text("utf-8")
        return Template(text)

    def _page(self, **parts: str) -> str:
        """Fill the template: ``parts`` plus ``$fixture_script`` and ``$fixture_style``."""
        # Callers may hold the app's lock already: a list's length is read without it.
        since = len(self._event_log)
        script = _FIXTURE_SCRIPT.replace("__EVENTS_SINCE__", str(since))
        return self._page_template.substitute(fixture_script=script, fixture_style=_NOTICE_STYLE, **parts)

    def _record_action(self, name: str) -> None:
        """Note an action in ``actions``; call with the lock held."""
        self._actions.append(name)

    def _get_page(self, path: str) -> Reply | None:
        """Answer a counted ``GET``; ``None`` for an unknown path (404)."""
        raise NotImplementedError

    def _get_page_at(self, path: str, query: Mapping[str, str]) -> Reply | None:
        """Answer a counted ``GET`` with its query string (the last value of each key);
        by default :meth:`_get_page`, which sees the path only."""
        return self._get_page(path)

    def _post(self, path: str, form: Mapping[str, str]) -> Reply | None:
        """Handle a counted form ``POST``; ``None`` for an unknown path (404)."""
        raise NotImplementedError

    # -- used by the handler -------------------------------------------------------

    def _next_event(self, seen: int) -> tuple[int, str] | None:
        """Block until an event after the ``seen`` first ones; None when stopping."""
        with self._events:
            while len(self._event_log) <= seen and not self._stopping:
                self._events.wait(_EVENT_POLL_S)
            return None if self._stopping else (seen + 1, self._event_log[seen])

    def _ack(self, event: str) -> None:
        with self._events:
            self._acks[event] = self._acks.get(event, 0) + 1
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


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    app: FixtureApp


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
        if path == "/__events":
            self._stream_events()
        elif path == "/state":
            self._send_json(HTTPStatus.OK, app.state())
        else:
            query = {k: v[-1] for k, v in parse_qs(urlsplit(self.path).query).items()}
            self._reply(app._get_page_at(path, query))

    def do_POST(self) -> None:
        app = self.server.app
        parts = urlsplit(self.path)
        path = parts.path
        length = int(self.headers.get("Content-Length") or 0)
        data = self.rfile.read(length) if length > 0 else b""
        if app._cut_off("POST", path):
            self._hang_up()
            return
        app._count("POST", path)
        if path == "/__reset":
            self._reset(data)
            return
        if path in ("/__ack", "/__rerendered"):
            query = parse_qs(parts.query)
            app._ack(query.get("event", ["rerender"])[0])
            self._send(HTTPStatus.NO_CONTENT, b"", "text/plain")
            return
        form = {k: v[-1] for k, v in parse_qs(data.decode("utf-8", "replace")).items()}
        app._headers.value = self.headers
        reply = app._post(path, form)
        if reply is not None and self._dropped(path):
            return
        self._reply(reply)

    def _reply(self, reply: Reply | None) -> None:
        if reply is None:
            self._send(HTTPStatus.NOT_FOUND, b"not found\n", "text/plain; charset=utf-8")
        elif reply.status is HTTPStatus.SEE_OTHER:
            self.send_response(HTTPStatus.SEE_OTHER)
            self.send_header("Location", reply.location)
            self.send_header("Content-Length", "0")
            self.end_headers()
        else:
            self._send(reply.status, reply.body.encode(), reply.content_type)

    def _stream_events(self) -> None:
        app = self.server.app
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        query = parse_qs(urlsplit(self.path).query)
        with app._events:
            seen = len(app._event_log)  # by default, events pushed after the page connected
            with contextlib.suppress(KeyError, ValueError):
                seen = min(seen, max(0, int(query["since"][0])))  # or since it was rendered
        try:
            self.wfile.write(b": connected\n\n")
            self.wfile.flush()
            while (event := app._next_event(seen)) is not None:
                seen, name = event
                self.wfile.write(f"event: {name}\ndata: {seen}\n\n".encode())
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

    def _send_json(self, status: HTTPStatus, obj: Any) -> None:
        self._send(status, json.dumps(obj).encode(), "application/json")

    def _send(self, status: HTTPStatus, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)
