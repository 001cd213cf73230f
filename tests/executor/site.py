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

from tests.executor.channel import ACK, EVENTS, Commands


class Site:
    def __init__(self, pages: dict[str, str]) -> None:
        self.pages = pages
        self.posts: list[dict[str, list[str]]] = []
        self.keys: list[str] = []  # each counted POST's Idempotency-Key header ("" without one)
        self.channel = Commands()
        self._cond = self.channel.cond  # guards the counters below too
        self._drop = 0
        self.ws_orders: list[str] = []
        self._drop_frames = 0
        self._drop_control = False
        self.post_delay_s = 0.0  # how long each counted POST /submit waits before its answer
        self.page_delays: dict[str, float] = {}  # how long a page's GET waits, by path
        self._outage_until = 0.0
        self.url = ""
        self._server: ThreadingHTTPServer | None = None

    # -- control -------------------------------------------------------------------

    def run_js(self, code: str, *, timeout: float = 10.0) -> None:
        """Run ``code`` in the open page(s) and wait for the first acknowledgement."""
        self.channel.run_js(code, timeout=timeout)

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
                url = urlsplit(self.path)
                path = url.path
                if path == EVENTS:
                    site.channel.stream(self, url.query)
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
                self._send(200, (page + site.channel.script()).encode())

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

            def do_POST(self) -> None:
                url = urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length).decode() if length else ""
                if url.path == ACK:
                    site.channel.ack(url.query)
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
        self.channel.stop()
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
