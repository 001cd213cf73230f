"""Class 4: an action is judged by what it does, and a control by its name AND its context.

Enter in a form's field, a line typed into it, a select that submits its form: each is a
submit (on the form's target URL too), not an input; a "Yes" in a dialog titled "Close
your account?" is destructive. Nothing is posted when the grant does not cover it.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from handrail.executor import Outcome, Session
from tests.conftest import AgentSetup, Stack
from tests.executor.site import Site, serve

pytestmark = pytest.mark.browser

FORM = """<!doctype html><title>Profile</title><main><h1>Profile</h1>
<form method="post" action="/submit" aria-label="Profile">
  <label>Nickname <input name="nick"></label>
  <label>Plan <select name="plan" onchange="this.form.submit()">
    <option>Basic</option><option>Pro</option></select></label>
  <button>Save</button>
</form></main>"""

ACCOUNT = """<!doctype html><title>Account</title><main><h1>Account</h1>
<div role="dialog" aria-modal="true" aria-labelledby="t" style="position:fixed;inset:0;background:#fff">
  <h2 id="t">Close your account?</h2><p id="d">All your data will be erased.</p>
  <form method="post" action="/submit"><input type="hidden" name="close" value="yes">
    <button aria-describedby="d">Yes</button></form>
  <form method="post" action="/submit"><button name="end" value="1">Terminate membership</button></form>
  <button onclick="this.closest('[role=dialog]').remove()">Cancel</button>
</div></main>"""


@pytest.fixture
def site() -> Iterator[Site]:
    with serve({"/form": FORM, "/account": ACCOUNT}) as s:
        yield s


def _open(stack: Stack, agent: AgentSetup, site: Site, page: str, verbs: list[str]) -> Session:
    with stack.operator_client() as ops:
        ops.grant(agent.principal.name, agent.target, verbs, [site.url])
    session = agent.client.open_session(target=agent.target, start_url=site.url + page)
    session.observe()
    return session


def _refused(response: object, reason: str) -> str:
    result = response.result  # type: ignore[attr-defined]
    assert (result.outcome, result.reason) == (Outcome.REFUSED, reason), result
    return str(result.message)


def test_keys_that_submit_are_submits(stack: Stack, agent: AgentSetup, site: Site) -> None:
    session = _open(stack, agent, site, "/form", ["input", "navigate"])
    nick = session.find("textbox", "Nickname")
    assert session.fill(nick, "ada").result.outcome is Outcome.DONE  # typing is an input
    _refused(session.press(session.find("textbox", "Nickname"), "Enter"), "OUT_OF_SCOPE")
    _refused(session.type(session.find("textbox", "Nickname"), "x\n"), "OUT_OF_SCOPE")
    _refused(session.press(session.find("button", "Save"), "Enter"), "OUT_OF_SCOPE")
    _refused(session.select(session.find("combobox", "Plan"), "Pro"), "OUT_OF_SCOPE")
    assert site.posts == []
    with stack.operator_client() as ops:
        ops.grant(agent.principal.name, agent.target, ["submit"], [site.url])
    r = session.press(session.find("textbox", "Nickname"), "Enter")
    assert r.result.outcome is Outcome.DONE, r.result
    assert len(site.posts) == 1 and site.posts[0]["nick"] == ["ada"]


def test_a_generic_yes_in_a_closing_dialog_needs_a_delete_grant(stack: Stack, agent: AgentSetup, site: Site) -> None:
    session = _open(stack, agent, site, "/account", ["input", "submit", "navigate"])
    message = _refused(session.click(session.find("button", "Yes")), "POLICY_FORBID")
    assert "destructive-needs-delete-grant" in message or "destructive" in message
    _refused(session.click(session.find("button", "Terminate membership")), "POLICY_FORBID")
    assert site.posts == []
    cancel = session.click(session.find("button", "Cancel"))  # the way out is not destructive
    assert cancel.result.outcome is Outcome.DONE, cancel.result
