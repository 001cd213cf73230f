"""Class 3: navigation is judged where the browser goes, before anything leaves it.

A hostile site on two loopback origins (``scenarios._hostile``) tries every way out of the
granted one: the start page, a typed URL that parsers disagree on, links, forms, HTTP
redirects (on any hop), a script, a refresh, pop-ups. The other origin counts every
request it receives: nothing may reach it, and the page stays where it was.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import grpc
import pytest

from handrail.executor import Outcome, PermissionDeniedError, Session
from handrail.recorder import Ledger
from handrail.scenarios._hostile import HostileSite, hostile_site
from tests.conftest import AgentSetup, Stack

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def site() -> Iterator[HostileSite]:
    with hostile_site() as s:
        yield s


def _open(
    stack: Stack, agent: AgentSetup, site: HostileSite, verbs: tuple[str, ...] = ("submit", "navigate")
) -> Session:
    with stack.operator_client() as ops:
        ops.grant(agent.principal.name, agent.target, list(verbs), [site.home])
    session = agent.client.open_session(target=agent.target, start_url=site.home + "/links")
    session.observe()
    return session


def _nothing_reached_elsewhere(site: HostileSite, before: dict[str, int]) -> None:
    assert site.hits("elsewhere") == before, "a request reached the other origin"


def _navigations(stack: Stack, session: Session) -> list[dict[str, object]]:
    with Ledger(stack.data_dir / "ledger.sqlite") as ledger:
        return [dict(e.body) for e in ledger.entries(session_id=session.session_id, kind="navigation")]


def test_the_start_page_is_judged(stack: Stack, agent: AgentSetup, site: HostileSite) -> None:
    before = site.hits("elsewhere")
    # No grant, so no lease: the session opens on its blank tab and says why; nothing loads.
    blank = agent.client.open_session(target=agent.target, start_url=site.elsewhere + "/landing")
    assert blank.info.lease_epoch == 0 and blank.info.lease_reason == "OUT_OF_SCOPE"
    assert blank.latest is not None and [tab.url for tab in blank.latest.tabs] == ["about:blank"]
    (start,) = _navigations(stack, blank)
    assert (start["cause"], start["allowed"]) == ("start", False)
    blank.close()
    _nothing_reached_elsewhere(site, before)
    # Holding the lease on a grant for the home origin: another origin's start page is refused.
    session = _open(stack, agent, site)
    assert session.latest is not None and session.latest.url == site.home + "/links"
    session.close()
    with pytest.raises(grpc.RpcError) as info:
        agent.client.open_session(target=agent.target, start_url=site.elsewhere + "/landing")
    assert info.value.code() == grpc.StatusCode.PERMISSION_DENIED  # type: ignore[attr-defined]
    assert "OUT_OF_SCOPE" in info.value.details()  # type: ignore[attr-defined]
    assert isinstance(info.value, PermissionDeniedError) and info.value.reason == "OUT_OF_SCOPE"
    _nothing_reached_elsewhere(site, before)


def test_a_typed_url_goes_where_chromium_parses_it(stack: Stack, agent: AgentSetup, site: HostileSite) -> None:
    """``http://OTHER\\@HOME/``: RFC 3986 says HOME, the browser (and now the sidecar) OTHER."""
    session = _open(stack, agent, site)
    before = site.hits("elsewhere")
    other = site.elsewhere.removeprefix("http://")
    home = site.home.removeprefix("http://")
    tricky = f"http://{other}\\@{home}/landing"
    r = session.navigate(tricky)
    assert (r.result.outcome, r.result.reason) == (Outcome.REFUSED, "OUT_OF_SCOPE"), r.result
    assert other.split(":")[0] in r.result.message
    _nothing_reached_elsewhere(site, before)
    tab = session.open_tab(tricky)
    assert (tab.result.outcome, tab.result.reason) == (Outcome.REFUSED, "OUT_OF_SCOPE"), tab.result
    _nothing_reached_elsewhere(site, before)


def test_links_and_forms_to_another_origin_are_refused_before_they_leave(
    stack: Stack, agent: AgentSetup, site: HostileSite
) -> None:
    session = _open(stack, agent, site)
    before = site.hits("elsewhere")
    for role, name in (
        ("link", "Partner offer"),
        ("link", "Partner in a new tab"),
        ("button", "Send to partner"),
    ):
        r = session.click(session.find(role, name))
        assert r.result.outcome is Outcome.REFUSED, (name, r.result)
        assert r.result.reason in ("OUT_OF_SCOPE", "POLICY_FORBID"), (name, r.result)
        assert site.elsewhere in r.result.message, r.result.message
        session.observe()
    _nothing_reached_elsewhere(site, before)
    # In scope, the same kinds of controls go through.
    r = session.click(session.find("link", "Inside page"))
    assert r.result.outcome is Outcome.DONE, r.result
    assert r.observation is not None and r.observation.url == site.home + "/inside"


def test_a_script_navigation_is_blocked_and_the_click_says_so(
    stack: Stack, agent: AgentSetup, site: HostileSite
) -> None:
    session = _open(stack, agent, site)
    before = site.hits("elsewhere")
    r = session.click(session.find("button", "Go by script"))
    assert r.result.outcome is Outcome.DONE, r.result
    assert "was not loaded" in r.result.message and site.elsewhere in r.result.message
    assert r.observation is not None and r.observation.url == site.home + "/links"  # left where it was
    _nothing_reached_elsewhere(site, before)
    blocked = [n for n in _navigations(stack, session) if not n["allowed"]]
    assert blocked and blocked[-1]["cause"] == "action" and str(blocked[-1]["url"]).startswith(site.elsewhere)


@pytest.mark.parametrize("link", ["Redirected out", "Redirected twice"])
def test_every_hop_of_a_redirect_is_judged(stack: Stack, agent: AgentSetup, site: HostileSite, link: str) -> None:
    session = _open(stack, agent, site)
    before = site.hits("elsewhere")
    r = session.click(session.find("link", link))
    assert r.result.outcome is Outcome.DONE, r.result
    assert "was not loaded" in r.result.message, r.result.message
    _nothing_reached_elsewhere(site, before)
    session.observe()
    assert session.latest is not None and session.latest.url == site.home + "/links"
    # A redirect that stays in scope loads.
    r = session.click(session.find("link", "Redirected in"))
    assert r.observation is not None and r.observation.url == site.home + "/inside", r.result


def test_a_post_redirected_elsewhere_is_stopped_after_the_post(
    stack: Stack, agent: AgentSetup, site: HostileSite
) -> None:
    session = _open(stack, agent, site)
    before_home, before = site.hits("home"), site.hits("elsewhere")
    r = session.click(session.find("button", "Post and be sent out"))
    # The POST went to the granted origin; the 307 that would re-post it elsewhere did not.
    assert site.hits("home").get("POST /post-redirect-out", 0) == before_home.get("POST /post-redirect-out", 0) + 1
    assert r.result.execution_started and "was not loaded" in r.result.message, r.result
    _nothing_reached_elsewhere(site, before)


def test_pop_ups_are_judged(stack: Stack, agent: AgentSetup, site: HostileSite) -> None:
    session = _open(stack, agent, site)
    before = site.hits("elsewhere")
    r = session.click(session.find("button", "Pop up partner"))
    assert r.result.outcome is Outcome.DONE, r.result
    deadline = time.monotonic() + 5  # the new tab's load may come after the click's result
    while not [n for n in _navigations(stack, session) if not n["allowed"]] and time.monotonic() < deadline:
        time.sleep(0.1)
    (refused,) = [n for n in _navigations(stack, session) if not n["allowed"]]
    assert refused["cause"] == "popup" and str(refused["url"]).startswith(site.elsewhere)
    _nothing_reached_elsewhere(site, before)
    deadline = time.monotonic() + 15  # a starved machine (load 40+ on 2 cores) took over 5 s
    while len(session.observe().tabs) != 1 and time.monotonic() < deadline:  # the refused tab closes
        time.sleep(0.1)
    assert len(session.observe().tabs) == 1
    session.click(session.find("button", "Pop up inside"))
    deadline = time.monotonic() + 5  # the server answers before the new tab commits its page
    while [t.url for t in session.observe().tabs][1:] != [site.home + "/inside"] and time.monotonic() < deadline:
        time.sleep(0.1)
    tabs = session.observe().tabs
    assert len(tabs) == 2 and tabs[1].url == site.home + "/inside", tabs
    _nothing_reached_elsewhere(site, before)


def test_a_refresh_and_a_timer_are_judged_without_an_action(stack: Stack, agent: AgentSetup, site: HostileSite) -> None:
    session = _open(stack, agent, site)
    before = site.hits("elsewhere")
    for path in ("/meta-out", "/script-out"):
        r = session.navigate(site.home + path)
        assert r.result.outcome is Outcome.DONE, r.result
        time.sleep(0.5)  # the page's own navigation, after the action
        assert session.observe().url == site.home + path
    _nothing_reached_elsewhere(site, before)
    refused = [n for n in _navigations(stack, session) if not n["allowed"]]
    assert len(refused) >= 2 and all(str(n["url"]).startswith(site.elsewhere) for n in refused)
