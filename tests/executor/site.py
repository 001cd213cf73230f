"""A small controllable test site: pages, a JS command channel and a counted form endpoint.

``site.run_js(code)`` makes every open page run ``code`` (over server-sent events) and
waits for the page to acknowledge it, so a test can change the page between an agent's
observe and act. ``site.drop_next_post()`` makes the next POST /submit be processed and
counted, then its connection closed with no response.

``/ws`` is a WebSocket (RFC 6455, text frames): each frame it receives is an order, counted
in ``site.ws_orders`` and answered with ``ok``; ``site.drop_next_frame()`` makes the next
one be counted and its connection closed with no answer.
"""

from __future__ import annotations

import base64
import hashlib
import struct
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

CHANNEL = """<script>
(function () {
  var es = new EventSource("/__events?since=SINCE");
  es.onmessage = function (e) {
    var cmd = JSON.parse(e.data);
    try { (0, eval)(cmd.code); } finally {
      fetch("/__ack?id=" + cmd.id, { method: "POST" });
    }
  };
})();
</script>"""


class Site:
    def __init__(self, pages: dict[str, str]) -> None:
        self.pages = pages
        self.posts: list[dict[str, list[str]]] = []
        self.keys: list[str] = []  # each counted POST's Idempotency-Key header ("" without one)
        self._cond = threading.Condition()
        self._commands: list[str] = []
        self._acks: set[int] = set()
        self._drop = 0
        self.ws_orders: list[str] = []
        self._drop_frames = 0
        self._drop_control = False
        self.post_delay_s = 0.0  # how long each counted POST /submit waits before its answer
        self.page_delays: dict[str, float] = {}  # how long a page's GET waits, by path
        self._outage_until = 0.0
        self._stopping = False
        self.url = ""
        self._server: ThreadingHTTPServer | None = None

    # -- control -------------------------------------------------------------------

    def run_js(self, code: str, *, timeout: float = 10.0) -> None:
        """Run ``code`` in the open page(s) and wait for the first acknowledgement."""
        with self._cond:
            self._commands.append(code)
            cid = len(self._commands)
            self._cond.notify_all()
            deadline = time.monotonic() + timeout
            while cid not in self._acks:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"no page ran command {cid}: {code[:60]}")
                self._cond.wait(left)

    def drop_next_post(self) -> None:
        self._drop += 1

    def drop_next_frame(self, *, control: bool = False) -> None:
        """The next frame on ``/ws`` is counted, and its connection closed with no answer;
        with ``control``, only control frames come first (a ping, a pong and a close frame,
        code 1011), as a server that keeps its connection alive and then fails it sends."""
        self._drop_frames += 1
        self._drop_control = control

    # -- server --------------------------------------------------------------------

    def start(self) -> str:
        site = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _send(self, code: int, body: bytes, ctype: str = "text/html; charset=utf-8") -> None:
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Cache-Control", "no-store")
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                path = urlsplit(self.path).path
                if path == "/__events":
                    self._events()
                    return
                if path == "/ws" and self.headers.get("Upgrade", "").lower() == "websocket":
                    self._websocket()
                    return
                page = site.pages.get(path)
                time.sleep(site.page_delays.get(path, 0.0))
                if page is None:
                    self._send(404, b"not found")
                    return
                if path.endswith(".js"):  # a script (a worker's): no channel in it
                    self._send(200, page.encode(), "text/javascript")
                    return
                # The page hears every command run after it was served, even one sent
                # before its event stream connected.
                with site._cond:
                    since = len(site._commands)
                self._send(200, (page + CHANNEL.replace("SINCE", str(since))).encode())

            def _websocket(self) -> None:
                key = self.headers.get("Sec-WebSocket-Key", "") + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
                self.send_response(101)
                self.send_header("Upgrade", "websocket")
                self.send_header("Connection", "Upgrade")
                self.send_header("Sec-WebSocket-Accept", base64.b64encode(hashlib.sha1(key.encode()).digest()).decode())
                self.end_headers()
                self.wfile.flush()
                while True:
                    head = self.rfile.read(2)
                    if len(head) < 2 or head[0] & 0x0F == 0x8:  # gone, or a close frame
                        return
                    size = head[1] & 0x7F
                    if size == 126:
                        size = struct.unpack(">H", self.rfile.read(2))[0]
                    elif size == 127:
                        size = struct.unpack(">Q", self.rfile.read(8))[0]
                    mask = self.rfile.read(4)  # a client's frames are masked
                    data = bytes(b ^ mask[i % 4] for i, b in enumerate(self.rfile.read(size)))
                    with site._cond:
                        site.ws_orders.append(data.decode(errors="replace"))
                        dropping = site._drop_frames > 0
                        site._drop_frames -= dropping
                    if dropping:
                        if site._drop_control:  # ping, pong, close (1011): none is an answer
                            self.wfile.write(b"\x89\x02hb\x8a\x02hb\x88\x02" + struct.pack(">H", 1011))
                            self.wfile.flush()
                        self.close_connection = True
                        return  # no answer: the connection closes under the order
                    self.wfile.write(b"\x81\x02ok")
                    self.wfile.flush()

            def _events(self) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                with site._cond:
                    seen = len(site._commands)
                    query = parse_qs(urlsplit(self.path).query)
                    if "since" in query and query["since"][0].isdigit():
                        seen = min(seen, int(query["since"][0]))
                try:
                    self.wfile.write(b": hi\n\n")
                    self.wfile.flush()
                    while True:
                        with site._cond:
                            while len(site._commands) <= seen and not site._stopping:
                                site._cond.wait(0.2)
                            if site._stopping:
                                return
                            new = site._commands[seen:]
                            first = seen + 1
                            seen = len(site._commands)
                        import json

                        for i, code in enumerate(new):
                            data = json.dumps({"id": first + i, "code": code})
                            self.wfile.write(f"data: {data}\n\n".encode())
                        self.wfile.flush()
                except OSError:
                    return

            def do_POST(self) -> None:
                url = urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length).decode() if length else ""
                if url.path == "/__ack":
                    with site._cond:
                        site._acks.add(int(parse_qs(url.query)["id"][0]))
                        site._cond.notify_all()
                    self._send(204, b"")
                    return
                if url.path != "/submit":
                    self._send(404, b"not found")
                    return
                if time.monotonic() < site._outage_until:
                    self.close_connection = True
                    self.connection.close()  # a browser's silent resend: cut off, not counted
                    return
                time.sleep(site.post_delay_s)
                site.posts.append(parse_qs(body))
                site.keys.append(self.headers.get("Idempotency-Key") or "")
                if site._drop:
                    site._drop -= 1
                    site._outage_until = time.monotonic() + 2.0
                    self.close_connection = True
                    self.connection.close()  # processed, but no response
                    return
                self._send(200, b"<title>Thanks</title><h1>Thank you</h1><p>Order received</p>")

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        # Polled every 50 ms (not the default 500): ``stop`` waits for the poll to see it.
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        return self.url

    def stop(self) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()


@contextmanager
def serve(pages: dict[str, str]) -> Iterator[Site]:
    site = Site(pages)
    site.start()
    try:
        yield site
    finally:
        site.stop()
