"""A test site's command channel: make the open pages run code, and wait until one has.

A page served with :meth:`Commands.script` listens on ``/__events`` (server-sent events) for
commands and acknowledges each on ``/__ack``; the site's request handler hands those two
paths to :meth:`Commands.stream` and :meth:`Commands.ack`. :meth:`Commands.run_js` queues
code and returns once a page ran it, so a test can change a page between an agent's
observe and its act. A page hears every command queued after it was served, even one
queued before its event stream connected.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qs

EVENTS = "/__events"
ACK = "/__ack"

_SCRIPT = """<script>
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


class Commands:
    """The queue of commands and their acknowledgements. ``cond`` guards them; a site may
    guard its own state with it too."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self._commands: list[str] = []
        self._acks: set[int] = set()
        self._stopping = False

    def script(self) -> str:
        """The ``<script>`` a page needs to hear the commands queued from now on."""
        with self.cond:
            return _SCRIPT.replace("SINCE", str(len(self._commands)))

    def run_js(self, code: str, *, timeout: float = 10.0) -> None:
        """Run ``code`` in the open page(s) and wait for the first acknowledgement."""
        with self.cond:
            self._commands.append(code)
            cid = len(self._commands)
            self.cond.notify_all()
            deadline = time.monotonic() + timeout
            while cid not in self._acks:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"no page ran command {cid}: {code[:60]}")
                self.cond.wait(left)

    def ack(self, query: str) -> None:
        """A page's acknowledgement (``id=N``) of command N."""
        with self.cond:
            self._acks.add(int(parse_qs(query)["id"][0]))
            self.cond.notify_all()

    def stream(self, handler: BaseHTTPRequestHandler, query: str) -> None:
        """Answer ``handler``'s ``/__events`` request: every command from ``since`` on, until
        the page goes away or :meth:`stop`."""
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.end_headers()
        since = parse_qs(query).get("since", [""])[0]
        with self.cond:
            seen = len(self._commands)
            if since.isdigit():
                seen = min(seen, int(since))
        try:
            handler.wfile.write(b": hi\n\n")
            handler.wfile.flush()
            while True:
                with self.cond:
                    while len(self._commands) <= seen and not self._stopping:
                        self.cond.wait(0.2)
                    if self._stopping:
                        return
                    new, first, seen = self._commands[seen:], seen + 1, len(self._commands)
                for i, code in enumerate(new):
                    handler.wfile.write(f"data: {json.dumps({'id': first + i, 'code': code})}\n\n".encode())
                handler.wfile.flush()
        except OSError:
            return

    def stop(self) -> None:
        """End every stream (the site is stopping)."""
        with self.cond:
            self._stopping = True
            self.cond.notify_all()
