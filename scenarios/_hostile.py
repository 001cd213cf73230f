"""Hostile pages: a site that tries to leave its origin, and a shop that loses responses.

Reusable by the tests, the scenarios and the chaos bench (``bench/chaos.py``):

- :class:`HostileSite` serves two origins on loopback, ``home`` (``127.0.0.1``) and
  ``elsewhere`` (``localhost``, another port: another origin), and counts every request
  each one receives, so that a test can say "the other origin received nothing". The home
  pages leave in every way a page can: links, a form posting elsewhere, HTTP redirects
  (302, 307 for a POST, a chain that leaves on its second hop), a meta refresh, a script
  that sets ``location``, ``window.open`` and ``target=_blank`` pop-ups; and they stay in
  the same ways, to show that nothing in scope is refused. ``drop(path)`` makes a path
  handle a request and lose the connection without a response (every time, or the next
  ``count`` times), for form posts and for ``fetch()`` alike.
- :class:`FetchShopApp` (``app: fetchshop`` in a scenario) is a checkout that pays through
  ``fetch()``: the merchant takes the order, and when the connection drops the page says
  "Something went wrong. Please try again." with the Pay button still there. Its orders
  page (``/orders``) shows the real state, to reconcile by looking. A request carrying an
  ``Idempotency-Key`` it has seen returns the order it made then (as Stripe's API does).

The site's pages are catalogued as data, so that a bench or a test can run each of them
through Handrail and through a raw driver alike:

- :data:`WAYS_OUT`: every :class:`WayOut` — a control on a home page (or a page that
  leaves by itself once loaded), how it travels (link, form, redirect, script, refresh,
  pop-up) and whether it ends on the other origin (``leaves``: any request there is a
  request outside the grant of the home origin);
- :data:`LOST_RESPONSES`: every :class:`LostResponse` — a control whose side-effecting
  request (a form post, a ``fetch()``) the server takes and then answers with nothing once
  ``site.drop(path)`` is set: the action's outcome cannot be known from the page.

Between rounds, :meth:`HostileSite.reset` forgets what reached both origins and every
drop; :meth:`HostileSite.leaked` counts what reached the other origin. Example::

    with hostile_site() as site:
        for way in WAYS_OUT:
            page.goto(site.home + way.page)
            if way.role:
                page.get_by_role(way.role, name=way.label, exact=True).click()
            ...
        assert site.leaked() == 0  # through Handrail; a raw driver leaks on every way.leaves
"""

from __future__ import annotations

import contextlib
import html
import json
import socket
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar
from urllib.parse import urlsplit

from ._base import FixtureApp, Reply

__all__ = [
    "FETCHSHOP_INITIAL_STATE",
    "LOST_RESPONSES",
    "WAYS_OUT",
    "FetchShopApp",
    "HostileSite",
    "LostResponse",
    "WayOut",
    "hostile_site",
]


# -- two origins that a page tries to travel between ------------------------------------


@dataclass(frozen=True)
class WayOut:
    """One way a :class:`HostileSite` page takes the browser somewhere.

    Attributes:
        name: a short id (``"link-out"``).
        page: the home page it starts on (``"/links"``).
        role: the ARIA role of the control to act on; ``""``: loading ``page`` is enough
            (a refresh or a timer leaves by itself).
        label: the control's accessible name (``""`` with no control).
        how: ``link``, ``form``, ``redirect``, ``script``, ``refresh``, ``popup`` or
            ``socket`` (a WebSocket: its handshake is a GET the other origin receives).
        leaves: it ends on the other origin (a request there is outside the home grant);
            False: it stays on the home origin (nothing in scope may be refused).
        method: the method of the request it starts (``POST`` for a form that posts).
    """

    name: str
    page: str
    role: str
    label: str
    how: str
    leaves: bool
    method: str = "GET"


WAYS_OUT: tuple[WayOut, ...] = (
    WayOut("link-out", "/links", "link", "Partner offer", "link", True),
    WayOut("link-in", "/links", "link", "Inside page", "link", False),
    WayOut("blank-out", "/links", "link", "Partner in a new tab", "popup", True),
    WayOut("blank-in", "/links", "link", "Inside in a new tab", "popup", False),
    WayOut("form-out", "/links", "button", "Send to partner", "form", True, "POST"),
    WayOut("form-in", "/links", "button", "Order here", "form", False, "POST"),
    WayOut("script-out", "/links", "button", "Go by script", "script", True),
    WayOut("open-out", "/links", "button", "Pop up partner", "popup", True),
    WayOut("open-in", "/links", "button", "Pop up inside", "popup", False),
    WayOut("redirect-out", "/links", "link", "Redirected out", "redirect", True),
    WayOut("redirect-in", "/links", "link", "Redirected in", "redirect", False),
    WayOut("redirect-chain-out", "/links", "link", "Redirected twice", "redirect", True),
    WayOut("post-307-out", "/links", "button", "Post and be sent out", "redirect", True, "POST"),
    WayOut("post-303-in", "/links", "button", "Order and come back", "redirect", False, "POST"),
    WayOut("refresh-out", "/meta-out", "", "", "refresh", True),
    WayOut("timer-out", "/script-out", "", "", "script", True),
    WayOut("socket-out", "/links", "button", "Chat with partner", "socket", True),
    WayOut("worker-socket-out", "/links", "button", "Chat through a worker", "socket", True),
    WayOut("comment-socket-out", "/links", "button", "Chat behind a comment", "socket", True),
)
"""Every way out (and back in) the home pages offer; see :class:`WayOut`."""


@dataclass(frozen=True)
class LostResponse:
    """A control whose side-effecting request can lose its response.

    ``site.drop(path)`` makes the server handle the request (it is counted: the effect
    happened) and close the connection without answering.

    Attributes:
        name: a short id (``"form-post"``).
        page: the home page it is on.
        role, label: the control (ARIA role and accessible name).
        path: the path its POST goes to (what to ``drop``).
        how: ``form`` (a form post: the page navigates) or ``fetch`` (the page stays).
    """

    name: str
    page: str
    role: str
    label: str
    path: str
    how: str


LOST_RESPONSES: tuple[LostResponse, ...] = (
    LostResponse("form-post", "/links", "button", "Order here", "/order", "form"),
    LostResponse("fetch-post", "/slow", "button", "Order by fetch", "/api/order", "fetch"),
)
"""Every control whose response :meth:`HostileSite.drop` can take away."""


def _page(title: str, body: str) -> str:
    return (
        f"<!doctype html><html><head><title>{html.escape(title)}</title></head><body><main>{body}</main></body></html>"
    )


@dataclass
class _Origin:
    """One origin's server and what reached it."""

    name: str
    host: str
    server: ThreadingHTTPServer | None = None
    url: str = ""
    hits: dict[str, int] = field(default_factory=dict)  # "METHOD /path" -> count
    bodies: dict[str, list[str]] = field(default_factory=dict)
    headers: dict[str, list[dict[str, str]]] = field(default_factory=dict)


class HostileSite:
    """Two origins on loopback whose pages try to take the browser elsewhere.

    ``site.home`` and ``site.elsewhere`` are the base URLs; ``site.hits("elsewhere")``
    what reached the other origin. See the module docstring for the pages.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._origins = {"home": _Origin("home", "127.0.0.1"), "elsewhere": _Origin("elsewhere", "localhost")}
        self._drops: dict[str, int] = {}  # path -> how many more to drop (-1: every one)
        self.slow_s = 2.0  # how long POST /api/slow takes to answer

    # -- control -------------------------------------------------------------------

    @property
    def home(self) -> str:
        return self._origins["home"].url

    @property
    def elsewhere(self) -> str:
        return self._origins["elsewhere"].url

    def hits(self, origin: str = "elsewhere") -> dict[str, int]:
        """What reached ``origin`` ("home" or "elsewhere"), ``"METHOD /path"`` -> count."""
        with self._lock:
            return dict(self._origins[origin].hits)

    def headers(self, origin: str, key: str) -> list[dict[str, str]]:
        """The headers of each request ``"METHOD /path"`` that reached ``origin``."""
        with self._lock:
            return list(self._origins[origin].headers.get(key, []))

    def drop(self, path: str, count: int = -1) -> None:
        """Handle requests to ``path``, then lose the connection without a response.

        ``count`` < 0: every one (a browser's silent re-send is dropped too).
        """
        with self._lock:
            self._drops[path] = count

    def reset(self) -> None:
        """Forget what reached both origins (hits, bodies, headers) and every drop."""
        with self._lock:
            self._drops.clear()
            for origin in self._origins.values():
                origin.hits.clear()
                origin.bodies.clear()
                origin.headers.clear()

    def leaked(self) -> int:
        """How many requests reached the other origin (``elsewhere``) since the last reset."""
        with self._lock:
            return sum(self._origins["elsewhere"].hits.values())

    def _take_drop(self, path: str) -> bool:
        with self._lock:
            left = self._drops.get(path, 0)
            if left == 0:
                return False
            if left > 0:
                self._drops[path] = left - 1
            return True

    # -- pages ---------------------------------------------------------------------

    def page(self, origin: str, path: str) -> tuple[int, str, dict[str, str]]:
        """The answer of ``origin`` to ``GET path``: status, body, headers."""
        there = self.elsewhere
        if origin == "elsewhere":
            if path == "/landing":
                return 200, _page("Partner landing", "<h1>Partner landing</h1><p>You left the shop.</p>"), {}
            return 404, "not found", {}
        pages = {
            "/links": _page(
                "Ways out",
                f'<h1>Ways out</h1><p><a href="{there}/landing">Partner offer</a></p>'
                '<p><a href="/inside">Inside page</a></p>'
                f'<p><a href="{there}/landing" target="_blank">Partner in a new tab</a></p>'
                '<p><a href="/inside" target="_blank">Inside in a new tab</a></p>'
                f'<form method="post" action="{there}/collect"><input type="hidden" name="card" value="4242">'
                "<button>Send to partner</button></form>"
                '<form method="post" action="/order"><input type="hidden" name="item" value="socks">'
                "<button>Order here</button></form>"
                '<form method="get" action="/search"><label>Search <input name="q"></label></form>'
                f"<button onclick=\"location.href='{there}/landing'\">Go by script</button>"
                f"<button onclick=\"window.open('{there}/landing')\">Pop up partner</button>"
                "<button onclick=\"window.open('/inside')\">Pop up inside</button>"
                f"<button onclick=\"new WebSocket('{there.replace('http', 'ws', 1)}/chat')\">Chat with partner</button>"
                # ... from a worker's very first task, before any session of the gate's reaches it
                # (window.URL: in an inline handler, URL is the document's).
                "<button onclick=\"new Worker(window.URL.createObjectURL(new Blob(['new WebSocket(&quot;"
                f"{there.replace('http', 'ws', 1)}/chat&quot;)'])))\">Chat through a worker</button>"
                # ... from behind a line comment that JavaScript ends at U+2028, not at a newline
                "<button onclick=\"new Worker(window.URL.createObjectURL(new Blob(['// chat\\u2028new WebSocket(&quot;"
                f"{there.replace('http', 'ws', 1)}/chat&quot;)\\n'])))\">Chat behind a comment</button>"
                '<p><a href="/redirect-out">Redirected out</a> <a href="/redirect-in">Redirected in</a> '
                '<a href="/redirect-chain">Redirected twice</a></p>'
                '<form method="post" action="/post-redirect-out"><button>Post and be sent out</button></form>'
                '<form method="post" action="/order-then-home"><button>Order and come back</button></form>',
            ),
            "/inside": _page("Inside", "<h1>Inside</h1><p>Still in the shop.</p>"),
            "/search": _page("Search", "<h1>Search results</h1>"),
            "/meta-out": (
                f'<!doctype html><title>Moving</title><meta http-equiv="refresh" content="0;url={there}/landing">'
                "<h1>Moving</h1>"
            ),
            "/script-out": _page(
                "Script", f"<h1>Script</h1><script>setTimeout(() => {{ location = '{there}/landing'; }}, 50)</script>"
            ),
            "/ordered": _page("Ordered", "<h1>Thank you</h1>"),
            "/slow": _page(
                "Slow",
                "<h1>Slow saves</h1><button onclick=\"fetch('/api/slow', {method: 'POST', body: 'x=1'})"
                ".then(() => document.getElementById('said').textContent = 'saved')"
                ".catch(() => document.getElementById('said').textContent = 'lost')\">Save slowly</button>"
                "<button onclick=\"fetch('/api/order', {method: 'POST', body: 'x=1'})"
                ".then(() => document.getElementById('said').textContent = 'ordered')"
                ".catch(() => document.getElementById('said').textContent = 'lost')\">Order by fetch</button>"
                '<p id="said" role="status">idle</p>',
            ),
        }
        redirects = {
            "/redirect-out": f"{there}/landing",
            "/redirect-in": "/inside",
            "/redirect-chain": "/redirect-out",
        }
        if path in redirects:
            return 302, "", {"Location": redirects[path]}
        if path in pages:
            return 200, pages[path], {}
        return 404, "not found", {}

    def post(self, origin: str, path: str) -> tuple[int, str, dict[str, str]]:
        """The answer of ``origin`` to ``POST path``."""
        if origin == "home":
            if path == "/post-redirect-out":
                return 307, "", {"Location": f"{self.elsewhere}/collect"}
            if path == "/order-then-home":
                return 303, "", {"Location": "/ordered"}
            if path == "/api/slow":
                time.sleep(self.slow_s)
                return 200, "saved", {}
            if path in ("/order", "/api/order"):
                return 200, _page("Ordered", "<h1>Order received</h1>"), {}
        if origin == "elsewhere" and path == "/collect":
            return 200, _page("Collected", "<h1>Thanks for your card</h1>"), {}
        return 404, "not found", {}

    # -- server --------------------------------------------------------------------

    def start(self) -> HostileSite:
        for origin in self._origins.values():
            server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self, origin))
            server.daemon_threads = True
            threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
            origin.server = server
            origin.url = f"http://{origin.host}:{server.server_address[1]}"
        return self

    def stop(self) -> None:
        for origin in self._origins.values():
            if origin.server is not None:
                origin.server.shutdown()
                origin.server.server_close()
                origin.server = None

    def _record(self, origin: _Origin, method: str, path: str, body: str, headers: dict[str, str]) -> None:
        key = f"{method} {path}"
        with self._lock:
            origin.hits[key] = origin.hits.get(key, 0) + 1
            origin.bodies.setdefault(key, []).append(body)
            origin.headers.setdefault(key, []).append(headers)


def _handler(site: HostileSite, origin: _Origin) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _answer(self, status: int, body: str, headers: Mapping[str, str]) -> None:
            data = body.encode()
            self.send_response(status)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Cache-Control", "no-store")
            for k, v in headers.items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

        def _hang_up(self) -> None:
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)
            self.connection.close()

        def do_GET(self) -> None:
            path = urlsplit(self.path).path
            if path == "/favicon.ico":
                self._answer(404, "", {})
                return
            site._record(origin, "GET", path, "", dict(self.headers))
            self._answer(*site.page(origin.name, path))

        def do_POST(self) -> None:
            path = urlsplit(self.path).path
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length).decode("utf-8", "replace") if length else ""
            site._record(origin, "POST", path, body, dict(self.headers))
            if site._take_drop(path):
                self._hang_up()  # handled, and no response
                return
            self._answer(*site.post(origin.name, path))

    return Handler


@contextlib.contextmanager
def hostile_site() -> Iterator[HostileSite]:
    """A started :class:`HostileSite`, stopped on exit."""
    site = HostileSite().start()
    try:
        yield site
    finally:
        site.stop()


# -- a checkout that pays through fetch() ------------------------------------------------

FETCHSHOP_INITIAL_STATE: Mapping[str, Any] = {"orders": [], "price_cents": 4200, "keys": [], "coupons": []}
"""The state a fresh fetch shop starts in. ``orders``: ``{"id", "item", "key"}``;
``keys``: the ``Idempotency-Key`` headers seen, in order; ``coupons``: codes applied."""

_PAY_SCRIPT = """
<script>
document.getElementById("pay").addEventListener("click", async () => {
  const status = document.getElementById("status");
  status.textContent = "Paying…";
  try {
    const r = await fetch("/api/pay", {
      method: "POST",
      headers: {"Content-Type": "application/x-www-form-urlencoded"},
      body: "item=trail-shoes",
    });
    const order = await r.json();
    status.textContent = "Paid: order #" + order.id;
  } catch (e) {
    status.textContent = "Something went wrong. Please try again.";
  }
});
</script>
"""


class FetchShopApp(FixtureApp):
    """A checkout whose Pay button POSTs ``/api/pay`` with ``fetch()`` (see the module docstring).

    Routes: ``GET /`` (the cart and its Pay button, a coupon form, and ways to the
    "partner" site: the same server under the host name ``localhost``, so another origin),
    ``GET /orders`` (the orders taken), ``GET /partner`` (only linked through the other
    origin: a request for it means the browser left), ``POST /api/pay`` (takes an order;
    JSON ``{"id": ...}``), ``POST /coupon`` (applies a code, then 303 to ``/``). Drop the
    answer of the next payment with ``app.drop_next("/api/pay")``.
    """

    name: ClassVar[str] = "fetchshop"
    initial_state: ClassVar[Mapping[str, Any]] = FETCHSHOP_INITIAL_STATE

    def _get_page(self, path: str) -> Reply | None:
        with self._lock:
            if path == "/":
                price = int(self._state["price_cents"])
                body = (
                    "<h1>Your cart</h1><p>Trail shoes: "
                    f"${price // 100}.{price % 100:02d}</p>"
                    '<button id="pay">Pay now</button><p id="status" role="status">Ready</p>'
                    '<p><a href="/orders">Your orders</a></p>'
                    f'<p><a href="{self._partner()}">Partner offers</a></p>'
                    f"<button onclick=\"window.open('{self._partner()}')\">Get help</button>"
                    '<form method="post" action="/coupon" aria-label="Coupon">'
                    '<label>Coupon code <input name="code"></label><button>Apply</button></form>'
                    f"<p>{len(self._state['coupons'])} coupon(s) applied</p>" + _PAY_SCRIPT
                )
                return Reply.page(_page("Checkout", body))
            if path == "/partner":
                return Reply.page(_page("Partner", "<h1>Partner offers</h1>"))
            if path == "/orders":
                orders = self._state["orders"]
                rows = "".join(f"<li>Order #{o['id']}: {html.escape(str(o['item']))}</li>" for o in orders)
                body = f"<h1>Your orders</h1><p>{len(orders)} order(s)</p><ul>{rows}</ul>"
                return Reply.page(_page("Your orders", body))
        return None

    def _partner(self) -> str:
        """The partner page, on this server under another host name: another origin."""
        return self.url.replace("127.0.0.1", "localhost") + "/partner"

    def _post(self, path: str, form: Mapping[str, str]) -> Reply | None:
        if path == "/coupon":
            with self._lock:
                self._state["coupons"].append(form.get("code", ""))
            return Reply.redirect("/")
        if path != "/api/pay":
            return None
        key = self.request_header("Idempotency-Key")
        with self._lock:
            orders: list[dict[str, Any]] = self._state["orders"]
            if key:
                self._state["keys"].append(key)
                seen = next((o for o in orders if o.get("key") == key), None)
                if seen is not None:  # the same key again: the same order, not another
                    return Reply(HTTPStatus.OK, body=json.dumps({"id": seen["id"]}), content_type="application/json")
            order = {"id": 1001 + len(orders), "item": form.get("item", ""), "key": key}
            orders.append(order)
            self._record_action("pay")
        return Reply(HTTPStatus.OK, body=json.dumps({"id": order["id"]}), content_type="application/json")
