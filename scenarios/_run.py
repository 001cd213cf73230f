"""One run of a scenario: the stack it starts, the steps it plays, what it checks.

A run starts the scenario's fixture app (or its desktop fixture), the authz sidecar and
the executor as real processes with a fresh data dir, makes the principals and grants,
opens the sessions and plays the steps, raising :class:`Divergence` at the first one that
does not behave as stated. ``_replay`` runs it and turns the outcome into a report.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from handrail._vocabulary import Outcome, Verdict
from handrail.authz import AuthzClient, AuthzError, Store
from handrail.executor import ActionKind, DesktopTarget, ExecutorClient
from handrail.recorder import Ledger, ResultBody

from ._acts import NO_INTENT, ActSpec, DecideWhileWaiting, Expected, KillExecutor, ref_from_text
from ._apps import FIXTURE_APPS
from ._base import FixtureApp
from ._checks import StateCheck
from ._console_driver import PersonSteps
from ._desktop import EVENT_TIMEOUT_S, DesktopApps
from ._errors import Divergence
from ._judge import check_state, ledger_problems
from ._procs import ServerProcess, start_authz, start_executor
from ._scenario import (
    ActStep,
    AskForPersonStep,
    CheckStep,
    ConsoleStep,
    FaultStep,
    ObserveStep,
    ReconcileSpec,
    ReconcileStep,
    Scenario,
    Step,
    WaitForPersonStep,
    WaitStep,
)
from ._xvfb import VirtualDisplay

__all__ = ["ADMIN", "EXECUTOR", "Run", "rpc_text"]

EXECUTOR = "executor-0"
ADMIN = "admin-0"
_KILL_WAIT_S = 10.0


@dataclass
class _Act:
    """What a played act step left behind, for reconcile steps and kills."""

    session: str
    session_id: str
    key: str
    action_id: str


class Run:
    """One run of ``scenario`` with its data in ``data_dir``."""

    def __init__(self, scenario: Scenario, data_dir: Path, chromium: str | None) -> None:
        self.s = scenario
        self.data_dir = data_dir
        self.chromium = chromium
        self.log: list[str] = []
        self.failed_checks: list[str] = []
        self.tokens: dict[str, str] = {}
        self.app: FixtureApp | None = None
        self.desktop: DesktopApps | None = None
        self.executor_env: dict[str, str] = {}
        self.authz: ServerProcess | None = None
        self.authz_address = ""
        self.executor: ServerProcess | None = None
        self.agent_clients: dict[str, ExecutorClient] = {}
        self.sessions: dict[str, Any] = {}
        self.labels: dict[str, tuple[str, Any]] = {}
        self.grant_ids: dict[str, str] = {}
        self.grant_expiry_ms: dict[str, int] = {}
        self.acts: dict[str, _Act] = {}
        self.seen_servers: list[ServerProcess] = []
        self.kills = self._kill_faults()
        self.keys = self._keys()
        self.persons = PersonSteps(self)

    # -- setup and teardown ------------------------------------------------------

    def _keys(self) -> dict[int, str]:
        """The idempotency key of each act step: stated, or made from the step number."""
        keys = {}
        for i, step in enumerate(self.s.steps):
            if isinstance(step, ActStep):
                keys[i] = step.act.idempotency_key or f"{self.s.name}-step{i + 1}"
        return keys

    def _kill_faults(self) -> list[str]:
        """``POINT:KEY`` of every kill_executor fault, in step order."""
        out = []
        for i, step in enumerate(self.s.steps):
            if isinstance(step, ActStep) and isinstance(step.act.fault, KillExecutor):
                key = step.act.idempotency_key or f"{self.s.name}-step{i + 1}"
                out.append(f"{step.act.fault.point}:{key}")
        return out

    @contextmanager
    def stack(self) -> Iterator[None]:
        s = self.s
        self.data_dir.mkdir(parents=True, exist_ok=True)
        names = [(a, "agent") for a in s.principals.agents]
        names += [(o, "operator") for o in s.principals.operators]
        names += [(ADMIN, "admin"), (EXECUTOR, "executor")]
        with Store(self.data_dir / "authz.sqlite") as store:
            for name, role in names:
                self.tokens[name] = store.add_principal(name, role)
        with ExitStack() as stack:
            self._stack = stack
            if s.desktop:
                display = stack.enter_context(VirtualDisplay())
                self.executor_env = display.env()
                self.desktop = DesktopApps(display.display, s.name)
                stack.callback(self.desktop.stop)
                self.desktop.start()
            else:
                app = FIXTURE_APPS[s.app](s.initial_state)
                app.start()
                stack.callback(app.stop)
                self.app = app
            self.authz = start_authz(self.data_dir, extra=self.persons.console_origin())
            self.authz_address = self.authz.address
            self.seen_servers.append(self.authz)
            stack.callback(lambda: self.authz.stop() if self.authz else None)
            self._start_executor()
            stack.callback(self.stop_servers)
            self.persons.start_console(stack)
            for grant in s.grants:
                if grant.at_start:
                    self._grant(grant.id)
            for spec in s.sessions:
                self._open(spec.name)
            yield

    def _start_executor(self) -> None:
        extra = ["--fault", self.kills[0]] if self.kills else []
        self.executor = start_executor(
            self.data_dir,
            self.authz_address,
            self.tokens[EXECUTOR],
            chromium=self.chromium,
            extra=extra,
            env=self.executor_env,
        )
        self.seen_servers.append(self.executor)
        for client in self.agent_clients.values():
            client.close()
        self.agent_clients = {
            agent: ExecutorClient(self.executor.address, self.tokens[agent], timeout_s=30.0)
            for agent in self.s.principals.agents
        }

    def _open(self, name: str) -> None:
        spec = self.s.session(name)
        agent = spec.agent or self.s.first_agent
        target = spec.target or self.s.default_target
        client = self.agent_clients[agent]
        if self.desktop is not None:
            window = self.desktop.notes.window_id()
            self.sessions[name] = client.open_session(target=target, desktop=DesktopTarget(window_id=window))
        else:
            assert self.app is not None
            self.sessions[name] = client.open_session(target=target, start_url=self.app.url + spec.path)

    def _state(self) -> dict[str, Any]:
        """The fixture's real state: the app's ``state()``, or the desktop windows' state."""
        if self.desktop is not None:
            return self.desktop.state()
        assert self.app is not None
        return self.app.state()

    def server_trouble(self) -> list[str]:
        """The tail of a server's output when it shows a traceback, for the report."""
        lines: list[str] = []
        for server in self.seen_servers:
            if any("Traceback" in line for line in server.output):
                lines.append(f"{server.name} output (last lines):")
                lines.extend(f"  {line}" for line in server.output[-12:])
        return lines

    def stop_servers(self) -> None:
        for session in self.sessions.values():
            with contextlib.suppress(grpc.RpcError):  # gone with a killed executor
                session.close()
        self.sessions.clear()
        for client in self.agent_clients.values():
            client.close()
        self.agent_clients.clear()
        if self.executor is not None:
            self.executor.stop()
            self.executor = None
        if self.authz is not None:
            self.authz.stop()
            self.authz = None

    def _operator(self, name: str | None) -> AuthzClient:
        who = name or self.s.first_operator
        client = AuthzClient(self.authz_address, self.tokens[who], timeout_s=10.0)
        self._stack.callback(client.close)
        return client

    def _grant(self, grant_id: str, operator: str | None = None) -> None:
        g = self.s.grant(grant_id)
        app_url = self.app.url if self.app is not None else ""
        origins = [app_url if o == "app" else o for o in g.origins if o != "app" or app_url]
        scope: dict[str, Any] = {}
        if g.require_approval_verbs:
            scope["require_approval_verbs"] = [v.value for v in g.require_approval_verbs]
        if g.approval_timeout_s:
            scope["approval_timeout_ms"] = int(g.approval_timeout_s * 1000)
        if g.single_use:
            scope["single_use"] = True
        info = self._operator(operator or g.operator).grant(
            g.principal or self.s.first_agent,
            g.target or self.s.default_target,
            [v.value for v in g.verbs],
            origins,
            ttl_ms=round(g.expires_in_s * 1000),  # on the sidecar's clock
            note=g.note or f"scenario {self.s.name}",
            **scope,
        )
        self.grant_ids[grant_id] = info.grant_id
        self.grant_expiry_ms[grant_id] = info.expires_at_ms

    # -- steps -------------------------------------------------------------------

    def play(self) -> None:
        for i, step in enumerate(self.s.steps):
            where = f"step {i + 1}"
            started, logged = time.monotonic(), len(self.log)
            self._play(i, where, step)
            if len(self.log) > logged:
                self.log[-1] += f"  [{time.monotonic() - started:.2f} s]"

    def _play(self, i: int, where: str, step: Step) -> None:
        if isinstance(step, ObserveStep):
            self._observe(where, step.observe.session, step.observe.label)
        elif isinstance(step, ActStep):
            self._act(i, where, step.act)
        elif isinstance(step, FaultStep):
            self._fault(where, step)
        elif isinstance(step, ReconcileStep):
            self._reconcile(where, step.reconcile)
        elif isinstance(step, WaitStep):
            self._wait(where, step)
        elif isinstance(step, CheckStep):
            self._check(where, step.check)
        elif isinstance(step, AskForPersonStep | WaitForPersonStep | ConsoleStep):
            self.persons.play(where, step)

    def _observe(self, where: str, session: str, label: str | None) -> None:
        try:
            obs = self.sessions[session].observe()
        except grpc.RpcError as exc:
            raise Divergence(f"{where} observe ({session}): error {rpc_text(exc)}") from None
        if label:
            self.labels[label] = (session, obs)
        self.log.append(f"{where} observe {session}: {obs.observation_id} at {obs.url}, epoch {obs.lease_epoch}")

    def _act(self, i: int, where: str, spec: ActSpec) -> None:
        what = f"{where} act {spec.describe()}"
        session = self.sessions[spec.session]
        obs = session.latest
        if spec.observation is not None:
            cited_session, obs = self.labels[spec.observation]
            if cited_session != spec.session:
                raise Divergence(f"{what}: observation {spec.observation!r} is of another session")
        if obs is None:
            raise Divergence(f"{what}: no observation to cite; observe first")
        kw: dict[str, Any] = {"idempotency_key": self.keys[i], "observation": obs}
        if spec.target is not None:
            t = spec.target
            try:
                if t.read_from == "text":
                    kw["ref"] = ref_from_text(obs.snapshot, t.role, t.name)
                else:
                    within = (t.within.role, t.within.name) if t.within is not None else None
                    kw["ref"] = session.find(t.role, t.name, obs, within=within)
            except LookupError as exc:
                raise Divergence(f"{what}: the target is not in the observation: {exc}") from None
        if spec.text:
            kw["text"] = spec.text
        if spec.keys:
            kw["key"] = spec.keys
        if spec.values:
            kw["values"] = tuple(spec.values)
        if spec.x is not None and spec.y is not None:
            kw["x"], kw["y"] = spec.x, spec.y
        if spec.approval_wait_ms:
            kw["approval_wait_ms"] = spec.approval_wait_ms
        if spec.url:
            assert self.app is not None
            kw["url"] = self.app.url + spec.url if spec.url.startswith("/") else spec.url
        if spec.expectation is not None:
            if spec.expectation.text:
                kw["expect_text"] = spec.expectation.text
            if spec.expectation.url:
                kw["expect_url"] = spec.expectation.url
        kind = ActionKind(spec.kind.value)  # the executor's own enum, until it takes the vocabulary's
        if spec.fault is not None and spec.fault.kind == "drop_connection":
            assert self.app is not None
            self.app.drop_next(spec.fault.path, outage_s=spec.fault.outage_s)
        decider = None
        if isinstance(spec.fault, DecideWhileWaiting):
            agent = self.s.session(spec.session).agent or self.s.first_agent
            decider = _Decider(self, spec.fault, agent, spec.approval_wait_ms / 1000)
        try:
            response = session.act(kind, **kw)
        except grpc.RpcError as exc:
            if isinstance(spec.fault, KillExecutor) and _code(exc) == "UNAVAILABLE":
                self._after_kill(what, spec, self.keys[i], session.session_id)
                return
            raise Divergence(f"{what}: expected {spec.expect.describe()}, got error {rpc_text(exc)}") from None
        finally:
            if decider is not None:
                decider.finish()
        if isinstance(spec.fault, KillExecutor):
            raise Divergence(f"{what}: the executor was to be killed {spec.fault.point}, but answered")
        if decider is not None:
            if decider.error:
                raise Divergence(f"{what}: the operator could not decide: {decider.error}")
            if not decider.decided:
                raise Divergence(f"{what}: no approval was asked for while the action waited")
            self.log.append(f"{what}: the operator {decider.verb} {decider.decided} while the action waited")
        result = response.result
        self.acts[self.keys[i]] = _Act(spec.session, session.session_id, self.keys[i], result.action_id)
        self._compare(what, spec.expect, result)

    def _after_kill(self, what: str, spec: ActSpec, key: str, session_id: str) -> None:
        """The executor killed itself: restart it, reopen the sessions, read the ledger."""
        executor = self.executor
        assert executor is not None
        deadline = time.monotonic() + _KILL_WAIT_S
        while executor.proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        if executor.proc.poll() is None:
            raise Divergence(f"{what}: the call failed but the executor is still running")
        executor.kill()  # collects it and closes its output
        self.kills.pop(0)
        self.sessions.clear()
        self._start_executor()
        for name in [x.name for x in self.s.sessions]:
            self._open(name)
        with Ledger(self.data_dir / "ledger.sqlite") as ledger:
            intent = ledger.find_intent_by_key(session_id, key)
            result = ledger.find_result_by_key(session_id, key)
        if result is not None:
            recorded = result.body_as(ResultBody)
            outcome, reason = recorded.outcome, recorded.reason
        else:
            outcome, reason = (Outcome.UNKNOWN.value if intent else NO_INTENT), ""
        action_id = intent.action_id if intent else ""
        self.acts[key] = _Act(spec.session, session_id, key, action_id)
        self.log.append(f"{what}: executor killed, restarted; the ledger says {outcome} {reason}")
        self._check_outcome(what, spec.expect, outcome, reason, None, None, "")

    def _compare(self, what: str, expected: Expected, result: Any) -> None:
        outcome = str(result.outcome.value)
        reason = str(result.reason)
        evidence = str(result.evidence.value)
        self.log.append(f"{what}: {outcome} {reason} ({evidence}) {result.message}")
        self._check_outcome(what, expected, outcome, reason, evidence, bool(result.execution_started), result.message)

    def _check_outcome(
        self,
        what: str,
        expected: Expected,
        outcome: str,
        reason: str,
        evidence: str | None,
        started: bool | None,
        message: str,
    ) -> None:
        wrong = outcome != expected.outcome
        if expected.reason is not None and reason not in expected.reasons():
            wrong = True
        if expected.evidence is not None and evidence != expected.evidence:
            wrong = True
        if expected.execution_started is not None and started != expected.execution_started:
            wrong = True
        if wrong:
            got = f"{outcome} {reason}".strip()
            if evidence is not None:
                got += f" (evidence {evidence}, execution_started {started})"
            detail = f": {message}" if message else ""
            raise Divergence(f"{what}: expected {expected.describe()}, got {got}{detail}")

    def _fault(self, where: str, step: FaultStep) -> None:
        fault = step.fault
        target = fault.target or self.s.default_target
        what = f"{where} fault {fault.kind}"
        app = self.app
        if fault.kind == "rerender":
            assert app is not None
            n = app.push_rerender()
            if not app.wait_rerendered(n, timeout=EVENT_TIMEOUT_S):
                raise Divergence(f"{what}: the page did not re-render")
        elif fault.kind == "open_modal":
            assert app is not None
            n = app.push_open_modal()
            if not app.wait_modal_opened(n, timeout=EVENT_TIMEOUT_S):
                raise Divergence(f"{what}: the page did not open the modal")
        elif fault.kind == "takeover":
            lease = self._operator(fault.operator).take_over(target, note=fault.note)
            what += f" (epoch {lease.epoch})"
        elif fault.kind == "hand_back":
            op = self._operator(fault.operator)
            lease = op.hand_back(target, op.get_lease(target).epoch, next_holder=fault.to)
            what += f" (epoch {lease.epoch}, next {fault.to or 'anyone'})"
        elif fault.kind == "revoke":
            self._operator(fault.operator).revoke(self.grant_ids[fault.grant])
        elif fault.kind == "grant":
            self._grant(fault.grant, fault.operator)
        elif fault.kind == "expire_lease":
            admin = AuthzClient(self.authz_address, self.tokens[ADMIN], timeout_s=10.0)
            self._stack.callback(admin.close)
            expire = getattr(admin, "expire_lease", None)
            if expire is None:
                raise Divergence(f"{what}: the authz client has no expire_lease yet")
            expire(target)
        elif fault.kind == "acquire_lease":
            agent = fault.agent or self.s.first_agent
            worker = AuthzClient(self.authz_address, self.tokens[agent], timeout_s=10.0)
            self._stack.callback(worker.close)
            lease = worker.acquire(target)
            what += f" (epoch {lease.epoch})"
        elif fault.kind == "stop_authz":
            if self.authz is not None:
                self.authz.stop()
                self.authz = None
        elif fault.kind == "start_authz":
            if self.authz is None:
                port = self.authz_address.rsplit(":", 1)[1]
                self.authz = start_authz(self.data_dir, extra=["--listen", f"127.0.0.1:{port}"])
                self.seen_servers.append(self.authz)
        elif fault.kind in ("approve", "deny"):
            agent = fault.agent or self.s.first_agent
            op = self._operator(fault.operator)
            pending = op.list_approvals(status="PENDING", principal=agent)
            if not pending:
                raise Divergence(f"{what}: no pending approval of {agent}")
            newest = max(pending, key=lambda a: a.created_at_ms)
            note = fault.note or f"scenario {self.s.name}"
            (op.approve if fault.kind == "approve" else op.deny)(newest.approval_id, note=note)
            what += f" ({newest.approval_id}: {newest.verb} {newest.element_role} {newest.element_name!r})"
        elif fault.kind == "move_window":
            if self.desktop is None:
                raise Divergence(f"{what}: needs a desktop fixture")
            what += f": {self.desktop.move(fault.x, fault.y)}"
        elif fault.kind == "restart_app":
            if self.desktop is None:
                raise Divergence(f"{what}: needs a desktop fixture")
            what += f": {self.desktop.restart()}"
        elif fault.kind == "steal_focus":
            if self.desktop is None:
                raise Divergence(f"{what}: needs a desktop fixture")
            what += f" ({fault.window}): {self.desktop.steal(fault.window)}"
        self.log.append(what)

    def _reconcile(self, where: str, spec: ReconcileSpec) -> None:
        what = f"{where} reconcile {spec.key}"
        act = self.acts.get(spec.key)
        if act is None or not act.action_id:
            raise Divergence(f"{what}: no action with that key was recorded")
        verdict = spec.verdict
        if spec.happened_if:
            state = self._state()
            holds = all(check_state(state, c) is None for c in spec.happened_if)
            decided = Verdict.HAPPENED if holds else Verdict.DID_NOT_HAPPEN
            if verdict is not None and decided != verdict:
                raise Divergence(f"{what}: the fixture's state says {decided}, the scenario says {verdict}")
            verdict = decided
        assert verdict is not None
        evidence = spec.evidence or f"scenario {self.s.name}: the fixture's state shows {verdict}"
        try:
            result = self.sessions[spec.session].reconcile(act.action_id, verdict.value, evidence)
        except grpc.RpcError as exc:
            raise Divergence(f"{what}: expected {spec.expect.describe()}, got error {rpc_text(exc)}") from None
        result = getattr(result, "result", result)
        self._compare(f"{what} ({verdict})", spec.expect, result)

    def _wait(self, where: str, step: WaitStep) -> None:
        spec = step.wait
        if spec.grant_expired is not None:
            expiry_ms = self.grant_expiry_ms.get(spec.grant_expired, 0)
            if not expiry_ms:
                raise Divergence(f"{where} wait: grant {spec.grant_expired!r} was never made")
            left = expiry_ms / 1000 - time.time() + 0.05
            if left > 0:
                time.sleep(left)
        if spec.seconds:
            time.sleep(spec.seconds)
        self.log.append(f"{where} wait")

    def _check(self, where: str, checks: Sequence[StateCheck]) -> None:
        state = self._state()
        for check in checks:
            problem = check_state(state, check)
            if problem is not None:
                raise Divergence(f"{where} check {check.describe()}: {problem}")
        self.log.append(f"{where} check: {len(checks)} held")

    # -- final checks ------------------------------------------------------------

    def final_checks(self) -> None:
        state = self._state()
        for check in self.s.checks.state:
            problem = check_state(state, check)
            if problem is not None:
                self.failed_checks.append(f"final check {check.describe()}: {problem}")
        with Ledger(self.data_dir / "ledger.sqlite") as ledger:
            entries = ledger.entries()
            verified = ledger.verify() if self.s.checks.ledger.verifies else None
        self.failed_checks.extend(ledger_problems(self.s.checks.ledger, entries, verified))


class _Decider:
    """An operator who approves or denies the approval an act asks for while it waits.

    Polls the sidecar for a pending approval of ``agent`` that was not pending before the
    act began, and decides it; gives up after ``seconds``.
    """

    def __init__(self, run: Run, fault: DecideWhileWaiting, agent: str, seconds: float) -> None:
        self.verb = "approved" if fault.kind == "approve" else "denied"
        self.decided = ""
        self.error = ""
        self._fault = fault
        self._agent = agent
        self._seconds = seconds
        self._stop = threading.Event()
        self._client = AuthzClient(run.authz_address, run.tokens[fault.operator or run.s.first_operator], timeout_s=10)
        self._note = fault.note or f"scenario {run.s.name}"
        self._before = {a.approval_id for a in self._client.list_approvals(status="PENDING", principal=agent)}
        self._thread = threading.Thread(target=self._run, name="scenario-approver", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        deadline = time.monotonic() + self._seconds
        try:
            while not self._stop.is_set() and time.monotonic() < deadline:
                pending = self._client.list_approvals(status="PENDING", principal=self._agent)
                new = [a for a in pending if a.approval_id not in self._before]
                if new:
                    approval = max(new, key=lambda a: a.created_at_ms)
                    decide = self._client.approve if self._fault.kind == "approve" else self._client.deny
                    decide(approval.approval_id, note=self._note)
                    self.decided = approval.approval_id
                    return
                self._stop.wait(0.05)
        except (AuthzError, grpc.RpcError) as exc:
            self.error = str(exc)

    def finish(self) -> None:
        self._stop.set()
        self._thread.join(15)
        self._client.close()


def _code(exc: grpc.RpcError) -> str:
    code = exc.code() if hasattr(exc, "code") else None
    return str(code.name) if code is not None else ""


def rpc_text(exc: BaseException) -> str:
    """A gRPC error as ``CODE: details``; any other error as its message."""
    if isinstance(exc, grpc.RpcError):
        code = exc.code() if hasattr(exc, "code") else None
        details = exc.details() if hasattr(exc, "details") else ""
        return f"{code.name if code else 'RPC'}: {details}"
    return str(exc)
