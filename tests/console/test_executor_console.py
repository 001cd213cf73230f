"""The executor's console RPCs against a real sidecar, executor and Chromium.

Operators only (an agent's or executor's token is refused PERMISSION_DENIED on every one);
a person's input is accepted only from the lease holder at the current epoch and recorded
under the person; an agent asks for a person and waits for the hand-back.
"""

from __future__ import annotations

import asyncio
import secrets
import threading
import time
from collections.abc import Iterator

import pytest

from handrail.authz import Store
from handrail.executor import ActionKind, ConsoleClient, ExecutorRpcError, HumanInput, Outcome, PersonStatus
from handrail.recorder import Ledger
from handrail.scenarios import SecondFactorApp
from tests.conftest import AgentSetup, Stack

pytestmark = pytest.mark.browser


@pytest.fixture
def fa() -> Iterator[SecondFactorApp]:
    with SecondFactorApp() as app:
        yield app


def _run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(coro)


def _open(stack: Stack, agent: AgentSetup, fa: SecondFactorApp):  # type: ignore[no-untyped-def]
    """A session on the fixture's start page (a document load: its origin granted)."""
    with stack.operator_client() as ops:
        ops.grant(agent.principal.name, agent.target, ["navigate"], [fa.url])
    return agent.client.open_session(target=agent.target, start_url=fa.url + "/")


def _pending_verify(stack: Stack, agent: AgentSetup, fa: SecondFactorApp):  # type: ignore[no-untyped-def]
    with stack.operator_client() as ops:
        ops.grant(agent.principal.name, agent.target, ["navigate", "input", "submit"], [fa.url])
    session = agent.client.open_session(target=agent.target, start_url=fa.url + "/")
    session.observe()
    session.click(session.find("button", "Turn off auto-renew")).raise_for_outcome()
    session.observe()
    session.click(
        session.find("button", "No thanks, turn off renewal"), expect_text="Enter the code"
    ).raise_for_outcome()
    session.observe()
    return session


def test_operator_rpcs_refuse_agent_and_executor_tokens(stack: Stack, agent: AgentSetup, fa: SecondFactorApp) -> None:
    session = _open(stack, agent, fa)

    async def calls(token: str) -> list[str]:
        client = ConsoleClient(stack.executor.address)
        codes = []
        spec = HumanInput(ActionKind.CLICK, 1, 10, 10)
        for call in (
            client.list_sessions(token),
            client.human_input(token, session.session_id, spec),
            client.locate(token, session.session_id, "button", "Pause plan"),
            client.describe_action(token, session.session_id, "a_x"),
        ):
            try:
                await call
                codes.append("OK")
            except ExecutorRpcError as exc:
                codes.append(exc.code_name)
        for stream in (
            client.watch_screen(token, session.session_id),
            client.watch_timeline(token, session.session_id),
        ):
            try:
                async for _ in stream:
                    break
                codes.append("OK")
            except ExecutorRpcError as exc:
                codes.append(exc.code_name)
        await client.close()
        return codes

    assert _run(calls(agent.principal.token)) == ["PERMISSION_DENIED"] * 6
    assert _run(calls(stack.executor_principal.token)) == ["PERMISSION_DENIED"] * 6
    assert _run(calls("no-such-token")) == ["UNAUTHENTICATED"] * 6
    session.close()


def test_person_types_the_code_only_while_holding_the_lease(
    stack: Stack, agent: AgentSetup, fa: SecondFactorApp
) -> None:
    session = _pending_verify(stack, agent, fa)
    op = stack.operator
    other = stack.add_principal("operator", "ops-bob")

    async def go() -> dict[str, object]:
        client = ConsoleClient(stack.executor.address)
        sid = session.session_id
        out: dict[str, object] = {}
        # Before any takeover the agent holds the lease: a person's input is refused.
        epoch = session.latest.lease_epoch
        r = await client.human_input(op.token, sid, HumanInput(ActionKind.TYPE, epoch, text="1"))
        out["before"] = (r.outcome, r.reason)
        with stack.operator_client() as ops:
            lease = ops.take_over(agent.target, note="I will type the code")
        # Another operator, who did not take it over, cannot type.
        r = await client.human_input(other.token, sid, HumanInput(ActionKind.TYPE, lease.epoch, text="1"))
        out["other"] = (r.outcome, r.reason)
        # The holder at a stale epoch cannot either.
        r = await client.human_input(op.token, sid, HumanInput(ActionKind.TYPE, lease.epoch - 1, text="1"))
        out["stale"] = (r.outcome, r.reason)
        box = await client.locate(op.token, sid, "textbox", "Code")
        r = await client.human_input(
            op.token, sid, HumanInput(ActionKind.CLICK, lease.epoch, box.x + box.width / 2, box.y + box.height / 2)
        )
        out["click"] = (r.outcome, r.reason)
        r = await client.human_input(op.token, sid, HumanInput(ActionKind.TYPE, lease.epoch, text="493817"))
        out["type"] = (r.outcome, r.reason)
        r = await client.human_input(op.token, sid, HumanInput(ActionKind.PRESS, lease.epoch, key="Enter"))
        out["enter"] = (r.outcome, r.reason)
        frames = client.watch_screen(op.token, sid)
        frame = await asyncio.wait_for(frames.__anext__(), 10)
        await frames.aclose()
        out["frame"] = (frame.mime_type, frame.image_width, frame.surface_width)
        items = []
        async for item in client.watch_timeline(op.token, sid):
            items.append(item)
            if (
                item.principal == op.name
                and item.kind == "result"
                and len([i for i in items if i.principal == op.name and i.kind == "result"]) == 3
            ):
                break
        out["timeline"] = items
        await client.close()
        return out

    out = _run(go())
    assert out["before"] == (Outcome.REFUSED, "NO_LEASE")
    assert out["other"] == (Outcome.REFUSED, "NO_LEASE")
    assert out["stale"] == (Outcome.REFUSED, "STALE_EPOCH")
    assert (
        out["click"] == out["type"] == out["enter"] == (Outcome.DONE, "")
    )  # a DONE result carries no reason on the wire
    assert out["frame"][0] == "image/jpeg" and out["frame"][1] > 0 and out["frame"][2] == 1280
    deadline = time.monotonic() + 5
    while not fa.state()["verified"] and time.monotonic() < deadline:
        time.sleep(0.05)
    state = fa.state()
    assert state["verified"] and state["code_entered"] == "493817" and state["auto_renew"] is False
    keys = [i for i in state["inputs"] if i["kind"] == "key"]
    assert keys and all(i["trusted"] for i in keys)  # a person's input, as trusted events
    # The agent's write is refused while the person holds the lease.
    r = session.click(session.find("button", "Verify")).result
    assert (r.outcome, r.reason) == (Outcome.REFUSED, "HELD_BY_HUMAN")
    with Ledger(stack.data_dir / "ledger.sqlite") as ledger:
        mine = [e for e in ledger.entries(session_id=session.session_id) if e.principal == stack.operator.name]
    kinds = [(e.kind, e.principal_kind) for e in mine]
    assert kinds.count(("intent", "human")) == 3 and kinds.count(("result", "human")) == 3
    assert kinds.count(("refusal", "human")) == 2  # before the takeover, and the stale epoch
    session.close()


def test_agent_asks_for_a_person_and_waits_for_the_hand_back(
    stack: Stack, agent: AgentSetup, fa: SecondFactorApp
) -> None:
    session = _pending_verify(stack, agent, fa)
    before = session.latest
    asked = session.ask_for_person("Enter the code sent to your phone")
    assert asked.status is PersonStatus.WAITING
    result: dict[str, object] = {}

    def wait() -> None:
        result["back"] = session.ask_for_person(request_id=asked.request_id, wait_ms=20_000)

    waiter = threading.Thread(target=wait)
    waiter.start()
    with stack.operator_client() as ops:
        lease = ops.take_over(agent.target)
        time.sleep(0.3)
        assert waiter.is_alive()  # taken, not handed back: still waiting
        ops.hand_back(agent.target, lease.epoch, next_holder=agent.principal.name)
    waiter.join(20)
    back = result["back"]
    assert back.status is PersonStatus.HANDED_BACK and back.taken_by == stack.operator.name
    # The old refs are stale; observing again gives the agent the lease back.
    r = session.click(session.find("button", "Verify", before), observation=before).result
    assert r.outcome is Outcome.REFUSED and r.reason in ("STALE_OBSERVATION", "STALE_EPOCH")
    obs = session.observe()
    assert obs.lease_epoch > lease.epoch
    session.close()


def test_human_input_bad_fields_are_named(stack: Stack, agent: AgentSetup, fa: SecondFactorApp) -> None:
    session = _open(stack, agent, fa)

    async def go() -> list[str]:
        client = ConsoleClient(stack.executor.address)
        out = []
        for spec in (
            HumanInput(ActionKind.CLICK, 0, 1, 1),
            HumanInput(ActionKind.NAVIGATE, 1),
            HumanInput(ActionKind.CLICK, 1, -5, 1),
            HumanInput(ActionKind.TYPE, 1, text=""),
        ):
            try:
                await client.human_input(stack.operator.token, session.session_id, spec)
            except ExecutorRpcError as exc:
                out.append(f"{exc.code_name} {str(exc).split(': ')[1]}")
        try:
            await client.human_input(stack.operator.token, "s_nope", HumanInput(ActionKind.CLICK, 1, 1, 1))
        except ExecutorRpcError as exc:
            out.append(exc.code_name)
        await client.close()
        return out

    got = _run(go())
    assert got[:4] == [
        "INVALID_ARGUMENT lease_epoch",
        "INVALID_ARGUMENT kind",
        "INVALID_ARGUMENT x",
        "INVALID_ARGUMENT text",
    ]
    assert got[4] == "NOT_FOUND"
    session.close()


def test_a_revoked_operator_is_refused_on_the_next_call(stack: Stack, agent: AgentSetup, fa: SecondFactorApp) -> None:
    """The executor asks the sidecar who the caller is on every console call: nothing
    remembers an operator's token past its revocation."""
    session = _open(stack, agent, fa)
    name = f"ops-{secrets.token_hex(3)}"
    with Store(stack.data_dir / "authz.sqlite") as store:
        token = store.add_principal(name, "operator")

    async def go() -> tuple[int, str, str]:
        client = ConsoleClient(stack.executor.address)
        try:
            seen = len(await client.list_sessions(token, session.session_id))
            with Store(stack.data_dir / "authz.sqlite") as store:
                store.revoke_principal(name)
            codes = []
            for call in (
                client.list_sessions(token, session.session_id),
                client.human_input(token, session.session_id, HumanInput(ActionKind.CLICK, 1, 10, 10)),
            ):
                try:
                    await call
                    codes.append("OK")
                except ExecutorRpcError as exc:
                    codes.append(f"{exc.code_name} {exc.reason}")
            return seen, codes[0], codes[1]
        finally:
            await client.close()

    assert _run(go()) == (1, "UNAUTHENTICATED TOKEN_REVOKED", "UNAUTHENTICATED TOKEN_REVOKED")
    session.close()


def test_a_persons_click_on_a_submit_control_answers_once_the_form_has_gone(
    stack: Stack, agent: AgentSetup, fa: SecondFactorApp
) -> None:
    """A click on a form's submit button posts the form in a task after the input: the
    result waits for it (the page is asked first whether the point may take it somewhere),
    so the person's next input, and the console's view of the outcome, come after the
    form has gone. A click at a superseded epoch is refused."""
    session = _pending_verify(stack, agent, fa)
    op = stack.operator

    async def go() -> tuple[tuple[Outcome, str], tuple[Outcome, str], bool]:
        client = ConsoleClient(stack.executor.address)
        sid = session.session_id
        try:
            with stack.operator_client() as ops:
                lease = ops.take_over(agent.target, note="I will type the code")
            stale = await client.human_input(op.token, sid, HumanInput(ActionKind.CLICK, lease.epoch - 1, 5, 5))
            box = await client.locate(op.token, sid, "textbox", "Code")
            at = (box.x + box.width / 2, box.y + box.height / 2)
            typed = [
                await client.human_input(op.token, sid, HumanInput(ActionKind.CLICK, lease.epoch, *at)),
                await client.human_input(op.token, sid, HumanInput(ActionKind.TYPE, lease.epoch, text="493817")),
            ]
            assert [t.outcome for t in typed] == [Outcome.DONE, Outcome.DONE]
            verify = await client.locate(op.token, sid, "button", "Verify")
            at = (verify.x + verify.width / 2, verify.y + verify.height / 2)
            r = await client.human_input(op.token, sid, HumanInput(ActionKind.CLICK, lease.epoch, *at))
            verified_on_answer = bool(fa.state()["verified"])  # read at once: no waiting here
            return (stale.outcome, stale.reason), (r.outcome, r.reason), verified_on_answer
        finally:
            await client.close()

    stale, clicked, verified_on_answer = _run(go())
    assert stale == (Outcome.REFUSED, "STALE_EPOCH")
    assert clicked == (Outcome.DONE, "")
    assert verified_on_answer  # the form's POST reached the app before the click's answer
    session.close()
