"""What a page or an agent writes is shown as text in the console, never run.

Element names, URLs, snapshots and an agent's reason for asking for a person are all
controlled by someone other than the operator; the console renders them escaped.
"""

from __future__ import annotations

import re

import httpx

from handrail.authz import AuthzClient
from handrail.executor import ExecutorClient
from tests.console.conftest import ConsoleStack
from tests.executor.site import serve

EVIL = "<img src=x onerror=alert(1)>"


def test_page_and_agent_text_is_escaped(console_stack: ConsoleStack) -> None:
    stack = console_stack
    agent = stack.add("agent")
    target = f"browser:{agent.name}"
    page = f"<title>{EVIL}</title><form method=post action=/go><button aria-label='{EVIL}'>Pay</button></form>"
    with serve({"/": page}) as site:
        with AuthzClient(stack.authz.address, stack.operator.token) as ops:
            ops.grant(agent.name, target, ["navigate"], [site.url])
            ops.grant(agent.name, target, ["submit"], [site.url], require_approval_verbs=["submit"])
        with ExecutorClient(stack.executor.address, agent.token) as client:
            session = client.open_session(target=target, start_url=site.url + "/")
            session.observe()
            r = session.click(session.find("button", EVIL)).result
            assert r.reason == "APPROVAL_REQUIRED"
            session.ask_for_person(f"please {EVIL}")
            with httpx.Client(base_url=stack.console.url, timeout=10) as c:
                form = c.get("/signin")
                csrf = re.search(r'name="csrf" value="([^"]+)"', form.text)
                assert csrf is not None
                c.post("/signin", data={"csrf": csrf.group(1), "token": stack.operator.token, "next": "/"})
                pages = [
                    c.get("/").text,
                    c.get(f"/approvals/{r.approval_id}").text,
                    c.get("/approvals").text,
                    c.get(f"/sessions/{session.session_id}").text,
                ]
            for html in pages:
                assert EVIL not in html
            assert "&lt;img src=x onerror=alert(1)&gt;" in pages[1]  # shown, as text
            assert "please &lt;img" in pages[0]
            session.close()
