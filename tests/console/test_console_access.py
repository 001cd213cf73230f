"""Who gets into the console, and what cannot reach it.

Every route refuses an agent's or an executor's token (401: the console takes no bearer
tokens), and a request without a signed-in operator (401); agents and executors cannot
sign in (403); state changes need the session's CSRF token and this console's origin;
sign-out and expiry end a session; an approval decided by anything but a signed-in
operator is impossible; an agent cannot navigate to the console or post to it through
the executor.
"""

from __future__ import annotations

import re
import ssl
import time
from pathlib import Path

import httpx
import pytest

from handrail.authz import AuthzClient, AuthzRpcError, Store
from handrail.console._signin import SignIns
from handrail.executor import ExecutorClient, Outcome
from tests.console.conftest import ConsoleStack
from tests.executor.site import serve

ROUTES = [
    ("GET", "/"),
    ("GET", "/fragments/overview"),
    ("GET", "/events"),
    ("GET", "/sessions/s_x"),
    ("GET", "/sessions/s_x/live"),
    ("POST", "/sessions/s_x/input"),
    ("GET", "/api/sessions/s_x/locate?role=button&name=x"),
    ("POST", "/takeover"),
    ("POST", "/handback"),
    ("GET", "/approvals"),
    ("GET", "/approvals/a1"),
    ("POST", "/approvals/a1/approve"),
    ("POST", "/approvals/a1/deny"),
    ("POST", "/signout"),
    ("GET", "/signin"),
    ("POST", "/signin"),
]


def _signed_in(stack: ConsoleStack, token: str) -> tuple[httpx.Client, httpx.Response]:
    c = httpx.Client(base_url=stack.console.url, timeout=10)
    form = c.get("/signin")
    csrf = re.search(r'name="csrf" value="([^"]+)"', form.text)
    assert csrf is not None
    r = c.post("/signin", data={"csrf": csrf.group(1), "token": token, "next": "/"})
    return c, r


def _csrf(c: httpx.Client) -> str:
    page = c.get("/approvals")
    found = re.search(r'name="csrf-token" content="([^"]+)"', page.text)
    assert found is not None
    return found.group(1)


@pytest.mark.parametrize("role", ["agent", "executor"])
def test_no_agent_or_executor_token_works_on_any_route(console_stack: ConsoleStack, role: str) -> None:
    who = console_stack.add(role)
    codes = {}
    with httpx.Client(base_url=console_stack.console.url, timeout=10) as c:
        for method, path in ROUTES:
            r = c.request(method, path, headers={"Authorization": f"Bearer {who.token}"}, data={"token": who.token})
            codes[(method, path)] = r.status_code
    assert set(codes.values()) == {401}, codes
    c, r = _signed_in(console_stack, who.token)
    assert r.status_code == 403 and "Only operators sign in here" in r.text
    assert "handrail_console=" not in r.headers.get("set-cookie", "")
    assert all(c.request(m, p).status_code in (401, 403) for m, p in ROUTES if p not in ("/signin",))
    c.close()


def test_nothing_but_a_signed_in_operator_gets_in(console_stack: ConsoleStack) -> None:
    with httpx.Client(base_url=console_stack.console.url, timeout=10) as c:
        for method, path in ROUTES:
            if path == "/signin":
                continue
            assert c.request(method, path).status_code == 401, path
        assert c.get("/", headers={"Cookie": "handrail_console=forged"}).status_code == 401
        # DNS rebinding: a Host the console does not serve.
        assert c.get("/signin", headers={"Host": "evil.example:80"}).status_code == 400


def test_operator_signs_in_and_out_and_state_changes_need_csrf(console_stack: ConsoleStack) -> None:
    c, r = _signed_in(console_stack, console_stack.operator.token)
    assert r.status_code == 303
    cookie = r.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie.replace("Strict", "strict") and "Path=/" in cookie
    assert c.get("/").status_code == 200
    # No CSRF token, a wrong one, or another origin: refused.
    assert c.post("/takeover", data={"target": "browser:x"}).status_code == 403
    assert c.post("/takeover", data={"target": "browser:x"}, headers={"X-CSRF-Token": "nope"}).status_code == 403
    token = _csrf(c)
    evil = {"X-CSRF-Token": token, "Origin": "http://evil.example"}
    assert c.post("/takeover", data={"target": "browser:x"}, headers=evil).status_code == 403
    ok = c.post("/takeover", json={"target": "browser:csrf-ok"}, headers={"X-CSRF-Token": token})
    assert ok.status_code == 200 and ok.json()["holder"] == console_stack.operator.name
    assert c.post("/signout", data={"csrf": token}).status_code == 303
    assert c.get("/").status_code == 401
    c.close()


def test_a_revoked_operator_is_signed_out_on_the_next_request(console_stack: ConsoleStack) -> None:
    """The sidecar revokes an operator: their sign-in ends on the very next request, and an
    open live stream ends too (no sign-in outlives the token behind it)."""
    who = console_stack.add("operator", "ops-revoked")
    c, r = _signed_in(console_stack, who.token)
    assert r.status_code == 303 and c.get("/").status_code == 200
    with c.stream("GET", "/events") as events:
        assert events.status_code == 200
        lines = events.iter_lines()
        assert next(line for line in lines if line.startswith("event:")) == "event: overview"
        with Store(console_stack.data_dir / "authz.sqlite") as store:
            store.revoke_principal(who.name)
        started = time.monotonic()
        for _ in lines:  # the stream ends within a few seconds of the revocation
            assert time.monotonic() - started < 10
    assert c.get("/").status_code == 401  # the stream's check ended the sign-in
    c.close()
    # Without a stream open: the next request finds out, says so, and ends the sign-in.
    who = console_stack.add("operator", "ops-revoked")
    c, r = _signed_in(console_stack, who.token)
    assert r.status_code == 303 and c.get("/approvals").status_code == 200
    with Store(console_stack.data_dir / "authz.sqlite") as store:
        store.revoke_principal(who.name)
    page = c.get("/approvals")
    assert page.status_code == 401 and "no longer knows your token: sign in again" in page.text
    assert c.get("/approvals").status_code == 401  # the sign-in is gone, not only refused once
    c.close()
    # A person's input, whose route leaves the asking to the executor: the same.
    who = console_stack.add("operator", "ops-revoked")
    c, r = _signed_in(console_stack, who.token)
    csrf = _csrf(c)
    with Store(console_stack.data_dir / "authz.sqlite") as store:
        store.revoke_principal(who.name)
    sent = c.post(
        "/sessions/s_x/input", json={"kind": "click", "epoch": 1, "x": 1, "y": 1}, headers={"X-CSRF-Token": csrf}
    )
    assert sent.status_code == 401 and "sign in again" in sent.text
    assert c.get("/approvals").status_code == 401
    c.close()


def test_sign_ins_expire() -> None:
    now = [0.0]
    signins = SignIns(idle_s=10, max_age_s=30, clock=lambda: now[0])
    a = signins.open("ops", "operator", "t")
    now[0] = 9
    assert signins.get(a.session_id) is a
    now[0] = 18
    assert signins.get(a.session_id) is a  # seen at 9: not idle for 10 s yet
    now[0] = 29
    assert signins.get(a.session_id) is None  # idle since 18
    b = signins.open("ops", "operator", "t")
    for t in range(30, 62, 5):
        now[0] = t
        assert (signins.get(b.session_id) is not None) == (t - 29 <= 30)


def test_only_a_signed_in_operator_can_decide_an_approval(console_stack: ConsoleStack) -> None:
    stack = console_stack
    agent = stack.add("agent")
    target = f"browser:{agent.name}"
    with serve({"/": "<title>x</title><form method=post action=/go><button>Pay</button></form>"}) as site:
        with AuthzClient(stack.authz.address, stack.operator.token) as ops:
            ops.grant(agent.name, target, ["navigate"], [site.url])
            ops.grant(agent.name, target, ["submit"], [site.url], require_approval_verbs=["submit"])
        with ExecutorClient(stack.executor.address, agent.token) as client:
            session = client.open_session(target=target, start_url=site.url + "/")
            session.observe()
            r = session.click(session.find("button", "Pay")).result
            assert r.reason == "APPROVAL_REQUIRED" and r.approval_id
            # The agent itself, at the sidecar: PERMISSION_DENIED.
            with AuthzClient(stack.authz.address, agent.token) as itself, pytest.raises(AuthzRpcError) as denied:
                itself.approve(r.approval_id)
            assert denied.value.code_name == "PERMISSION_DENIED"
            # The agent's token at the console: 401.
            with httpx.Client(base_url=stack.console.url, timeout=10) as c:
                auth = {"Authorization": f"Bearer {agent.token}"}
                assert c.post(f"/approvals/{r.approval_id}/approve", headers=auth).status_code == 401
            with AuthzClient(stack.authz.address, stack.operator.token) as ops:
                assert ops.get_approval(r.approval_id).status == "PENDING"
            # A signed-in operator can; then it cannot be decided again.
            c, _ = _signed_in(stack, stack.operator.token)
            token = _csrf(c)
            ok = c.post(f"/approvals/{r.approval_id}/approve", json={"note": "fine"}, headers={"X-CSRF-Token": token})
            assert ok.status_code == 200 and ok.json()["status"] == "APPROVED"
            again = c.post(f"/approvals/{r.approval_id}/deny", json={}, headers={"X-CSRF-Token": token})
            assert again.status_code == 409
            c.close()
            session.close()


def test_the_agent_cannot_navigate_to_the_console_nor_post_to_it(console_stack: ConsoleStack) -> None:
    stack = console_stack
    agent = stack.add("agent")
    target = f"browser:{agent.name}"
    console = stack.console.url
    port = console.rsplit(":", 1)[1]
    c, _ = _signed_in(stack, stack.operator.token)
    token = _csrf(c)
    held = c.post("/takeover", json={"target": "browser:victim"}, headers={"X-CSRF-Token": token}).json()
    c.close()
    page = (
        "<title>evil</title>"
        f'<form method=post action="{console}/handback"><input name=target value=browser:victim>'
        "<input name=to value=x><button>Claim prize</button></form>"
    )
    with serve({"/": page}) as site:
        with AuthzClient(stack.authz.address, stack.operator.token) as ops:
            # The worst case: an operator grants navigation to the console's origin too.
            spellings = [console, f"http://localhost:{port}", f"http://127.1:{port}"]
            ops.grant(agent.name, target, ["navigate", "submit"], [site.url, *spellings])
        with ExecutorClient(stack.executor.address, agent.token) as client:
            session = client.open_session(target=target, start_url=site.url + "/")
            session.observe()
            for url in (f"{console}/approvals", f"http://localhost:{port}/", f"http://127.1:{port}/"):
                r = session.navigate(url).result
                assert (r.outcome, r.reason) == (Outcome.REFUSED, "POLICY_FORBID"), url
                assert "agents-never-reach-the-console" in r.policies
            # A page of its own posts to the console: nothing happens there.
            session.observe()
            session.click(session.find("button", "Claim prize"))
            time.sleep(0.3)
            session.close()
    with AuthzClient(stack.authz.address, stack.operator.token) as ops:
        lease = ops.get_lease("browser:victim")
    assert lease.holder == stack.operator.name and lease.epoch == held["epoch"]


def test_the_console_serves_tls_and_marks_its_cookie_secure(console_stack: ConsoleStack, tmp_path: Path) -> None:
    from handrail.console import ConsoleConfig, start_console
    from handrail.scenarios._postgres import make_certificates

    certs = make_certificates(tmp_path)
    stack = console_stack
    running = start_console(
        ConsoleConfig(
            authz=stack.authz.address,
            executors=(stack.executor.address,),
            listen="127.0.0.1:0",
            tls_cert=str(certs.server_cert),
            tls_key=str(certs.server_key),
        )
    )
    try:
        assert running.url.startswith("https://")
        trust = ssl.create_default_context(cafile=str(certs.ca))
        with httpx.Client(base_url=running.url, verify=trust, timeout=10) as c:
            form = c.get("/signin")
            csrf = re.search(r'name="csrf" value="([^"]+)"', form.text)
            assert form.status_code == 200 and csrf is not None
            assert "Secure" in form.headers["set-cookie"]
            r = c.post("/signin", data={"csrf": csrf.group(1), "token": stack.operator.token, "next": "/"})
            assert r.status_code == 303 and "Secure" in r.headers["set-cookie"]
        with pytest.raises(httpx.HTTPError):  # plaintext to the TLS listener gets nowhere
            httpx.get(running.url.replace("https://", "http://") + "/signin", timeout=5)
    finally:
        running.stop()
