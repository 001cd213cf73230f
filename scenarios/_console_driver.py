"""Playing a scenario's person steps: the agent's ask, and an operator in the real console.

:class:`ConsoleDriver` signs an operator in to a running ``handrail console`` over HTTP (the
sign-in form and its CSRF cookie, then the session cookie) and sends what the console's
page would: take over, a person's input on the live view, hand back. :class:`PersonSteps`
plays the format's ``ask_for_person``, ``wait_for_person`` and ``console`` steps for a run.
"""

from __future__ import annotations

import contextlib
import http.cookiejar
import json
import re
import threading
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from ._errors import Divergence
from ._person_steps import AskForPersonSpec, ConsoleSpec, WaitForPersonSpec
from ._procs import free_port, start_server
from ._scenario import AskForPersonStep, ConsoleStep, WaitForPersonStep

__all__ = ["ConsoleDriver", "PersonSteps"]


class ConsoleDriver:
    """One operator signed in to the console at ``url``."""

    def __init__(self, url: str, token: str) -> None:
        self.url = url.rstrip("/")
        self._opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
        form = self._get("/signin")
        pre = re.search(r'name="csrf" value="([^"]+)"', form)
        if pre is None:
            raise Divergence("the console's sign-in form has no CSRF token")
        self._post_form("/signin", {"csrf": pre.group(1), "token": token, "next": "/approvals"})
        page = self._get("/approvals")
        csrf = re.search(r'name="csrf-token" content="([^"]+)"', page)
        if csrf is None or not csrf.group(1):
            raise Divergence("signing in to the console failed")
        self._csrf = csrf.group(1)

    def page(self, path: str) -> str:
        """A page as the signed-in operator's browser gets it."""
        return self._get(path)

    def _get(self, path: str) -> str:
        with self._opener.open(self.url + path, timeout=15) as r:
            return str(r.read().decode())

    def _post_form(self, path: str, data: dict[str, str]) -> None:
        body = urllib.parse.urlencode(data).encode()
        with self._opener.open(urllib.request.Request(self.url + path, body), timeout=15) as r:
            r.read()

    def call(self, method: str, path: str, data: dict[str, Any] | None = None) -> dict[str, Any]:
        """A JSON call as the console's script makes it (CSRF header, this origin)."""
        body = json.dumps(data or {}).encode() if method == "POST" else None
        headers = {"Content-Type": "application/json", "Accept": "application/json", "X-CSRF-Token": self._csrf}
        request = urllib.request.Request(self.url + path, body, headers, method=method)
        try:
            with self._opener.open(request, timeout=30) as r:
                answer: dict[str, Any] = json.loads(r.read() or b"{}")
        except urllib.error.HTTPError as exc:
            answer = json.loads(exc.read() or b"{}")
            answer.setdefault("error", f"HTTP {exc.code}")
        return answer


class PersonSteps:
    """The person steps of one run (``run`` is the :class:`~._run.Run`)."""

    def __init__(self, run: Any) -> None:
        self.run = run
        self.console_url = ""
        self._drivers: dict[str, ConsoleDriver] = {}
        self._epochs: dict[str, int] = {}
        self._waits: dict[str, tuple[threading.Thread, dict[str, Any]]] = {}
        self._port = 0

    def console_origin(self) -> list[str]:
        """The sidecar's ``--console-origin`` when the scenario plays console steps (the
        console's port is chosen here, before the sidecar starts)."""
        if not self.run.s.needs_console():
            return []
        self._port = free_port()
        return ["--console-origin", f"http://127.0.0.1:{self._port}"]

    def start_console(self, stack: contextlib.ExitStack) -> None:
        """Start ``handrail console`` on that port (the sidecar and the executor run)."""
        if not self._port:
            return
        run = self.run
        args = ["console", "--authz", run.authz_address, "--executor", run.executor.address]
        console = start_server(
            "console", [*args, "--listen", f"127.0.0.1:{self._port}"], ready_prefix="handrail-console listening on "
        )
        stack.callback(console.stop)
        self.console_url = console.address

    def play(self, where: str, step: AskForPersonStep | WaitForPersonStep | ConsoleStep) -> None:
        """One person step."""
        if isinstance(step, AskForPersonStep):
            self.ask(where, step.ask_for_person)
        elif isinstance(step, WaitForPersonStep):
            self.join(where, step.wait_for_person)
        else:
            self.console(where, step.console)

    def driver(self, operator: str) -> ConsoleDriver:
        if operator not in self._drivers:
            self._drivers[operator] = ConsoleDriver(self.console_url, self.run.tokens[operator])
        return self._drivers[operator]

    def ask(self, where: str, spec: AskForPersonSpec) -> None:
        session = self.run.sessions[spec.session]
        asked = session.ask_for_person(spec.reason)
        what = f"{where} ask_for_person {spec.reason!r}: {asked.status.value}"
        if spec.label:
            result: dict[str, Any] = {}

            def wait() -> None:
                try:
                    result["r"] = session.ask_for_person(request_id=asked.request_id, wait_ms=spec.wait_ms)
                except Exception as exc:  # a thread's boundary: the join reports it
                    result["error"] = exc

            thread = threading.Thread(target=wait, name=f"ask-{spec.label}", daemon=True)
            thread.start()
            self._waits[spec.label] = (thread, result)
            self.run.log.append(what + f" (waiting up to {spec.wait_ms} ms in the background)")
            return
        if spec.wait_ms:
            asked = session.ask_for_person(request_id=asked.request_id, wait_ms=spec.wait_ms)
        if spec.expect is not None and asked.status.value != spec.expect:
            raise Divergence(f"{what}: expected {spec.expect}, got {asked.status.value}")
        self.run.log.append(what)

    def join(self, where: str, spec: WaitForPersonSpec) -> None:
        thread, result = self._waits.pop(spec.ask)
        thread.join(620)
        if "error" in result:
            raise Divergence(f"{where} wait_for_person {spec.ask}: {result['error']}")
        got = result["r"].status.value
        if got != spec.expect:
            raise Divergence(f"{where} wait_for_person {spec.ask}: expected {spec.expect}, got {got}")
        self.run.log.append(f"{where} wait_for_person {spec.ask}: {got} (taken by {result['r'].taken_by})")

    def console(self, where: str, spec: ConsoleSpec) -> None:
        run = self.run
        operator = spec.operator or run.s.first_operator
        console = self.driver(operator)
        target = run.s.session(spec.session).target or run.s.default_target
        session_id = run.sessions[spec.session].session_id
        what = f"{where} console {operator}: {spec.describe()}"
        if spec.take_over is not None:
            answer = console.call("POST", "/takeover", {"target": target, "note": spec.take_over.note or "scenario"})
            if "error" in answer:
                raise Divergence(f"{what}: {answer['error']}")
            self._epochs[operator] = int(answer["epoch"])
            run.log.append(f"{what} (epoch {answer['epoch']})")
            return
        if spec.hand_back is not None:
            answer = console.call("POST", "/handback", {"target": target, "to": spec.hand_back.to})
            if "error" in answer:
                raise Divergence(f"{what}: {answer['error']}")
            run.log.append(f"{what} (epoch {answer['epoch']})")
            return
        data: dict[str, Any] = {"epoch": self._epochs.get(operator, 0)}
        if spec.click is not None:
            query = urllib.parse.urlencode({"role": spec.click.role, "name": spec.click.name})
            box = console.call("GET", f"/api/sessions/{session_id}/locate?{query}")
            if "error" in box:
                raise Divergence(f"{what}: the element is not on the screen: {box['error']}")
            data.update(kind="click", x=box["x"] + box["width"] / 2, y=box["y"] + box["height"] / 2)
        elif spec.type is not None:
            data.update(kind="type", text=spec.type)
        elif spec.key is not None:
            data.update(kind="press", key=spec.key)
        else:
            data.update(kind="scroll", x=640, y=400, dy=spec.scroll or 0)
        answer = console.call("POST", f"/sessions/{session_id}/input", data)
        outcome = answer.get("outcome", answer.get("error", "?"))
        if outcome != spec.expect or (spec.reason is not None and answer.get("reason") != spec.reason):
            raise Divergence(
                f"{what}: expected {spec.expect} {spec.reason or ''}, got {outcome} {answer.get('reason', '')}"
            )
        run.log.append(f"{what}: {outcome} {answer.get('reason', '')} {answer.get('message', '')}")
