"""A drag by ref (``Session.drag_to(ref, to_ref)``, the MCP tool ``browser_drag``), in a real browser.

Both refs come from the same observation; both elements are checked as a click's ref is
(unchanged since the observation, visible, not covered) and judged by the sidecar by their
role and name; the input guard is armed on the start element. Judged by the page's real
state: what it says was dropped where.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from handrail.executor import NotFoundError, Outcome, Session
from handrail.recorder import Ledger
from tests.conftest import AgentSetup, Stack
from tests.executor.site import Site, serve

pytestmark = pytest.mark.browser

# A file list whose item is dragged (pointer events, as most web apps do it) onto a folder.
DRAG = """<!doctype html><title>files</title><main><h1>Files</h1>
<button id=item style="width:140px;height:40px">Report.pdf</button>
<p style="display:flex;gap:40px;margin-top:60px">
  <button id=z0 class=zone style="width:160px;height:80px">Archive</button>
  <button id=z1 class=zone style="width:160px;height:80px">Trash</button>
</p><p id=out>Nothing dropped</p>
<script>
let dragging = false;
document.getElementById("item").addEventListener("pointerdown", () => { dragging = true; });
addEventListener("pointerup", (e) => {
  if (!dragging) return;
  dragging = false;
  const zone = document.elementFromPoint(e.clientX, e.clientY);
  if (zone && zone.classList.contains("zone"))
    document.getElementById("out").textContent = "Dropped Report.pdf on " + zone.textContent;
});
</script></main>"""
# The folders re-rendered by index: the node that said Archive says Trash now, and back.
SWAP = "for (const [id, name] of [['z0', 'Trash'], ['z1', 'Archive']]) document.getElementById(id).textContent = name;"


@pytest.fixture
def site() -> Iterator[Site]:
    with serve({"/files": DRAG}) as s:
        yield s


def _session(stack: Stack, agent: AgentSetup, site: Site, names: list[str] | None = None) -> Session:
    with stack.operator_client() as ops:
        ops.grant(agent.principal.name, agent.target, ["navigate"], [site.url])
        scope = {"name_patterns": names} if names else {}
        ops.grant(agent.principal.name, agent.target, ["input"], [site.url], **scope)
    session = agent.client.open_session(target=agent.target, start_url=site.url + "/files")
    session.observe()
    return session


def _page_says(session: Session, text: str) -> bool:
    return text in session.observe().snapshot


def test_a_drag_by_ref_drops_the_item_on_the_cited_folder(stack: Stack, agent: AgentSetup, site: Site) -> None:
    session = _session(stack, agent, site)
    r = session.drag_to(session.find("button", "Report.pdf"), session.find("button", "Archive"))
    assert (r.result.outcome, r.result.execution_started) == (Outcome.DONE, True), r.result
    assert _page_says(session, "Dropped Report.pdf on Archive")
    with Ledger(stack.data_dir / "ledger.sqlite") as ledger:
        params = ledger.entries(session_id=session.session_id, kind="intent")[-1].body["params"]
    assert (params["kind"], params["name"], params["to"]) == ("drag", "Report.pdf", "button Archive"), params


def test_a_drop_target_re_rendered_since_the_snapshot_is_refused_and_nothing_is_dropped(
    stack: Stack, agent: AgentSetup, site: Site
) -> None:
    session = _session(stack, agent, site)
    item, archive = session.find("button", "Report.pdf"), session.find("button", "Archive")
    site.run_js(SWAP)  # between the snapshot and the drag: the cited node says Trash now
    r = session.drag_to(item, archive)
    result = r.result
    assert (result.outcome, result.reason, result.execution_started) == (Outcome.REFUSED, "STALE_REF", False), result
    assert _page_says(session, "Nothing dropped")
    # Looking again, the drag goes to the folder that says Archive now.
    r = session.drag_to(session.find("button", "Report.pdf"), session.find("button", "Archive"))
    assert r.result.outcome is Outcome.DONE, r.result
    assert _page_says(session, "Dropped Report.pdf on Archive")


def test_the_sidecar_judges_the_drop_target_too(stack: Stack, agent: AgentSetup, site: Site) -> None:
    # Input is granted on the item and the Archive folder only: a drop on Trash is out of scope.
    session = _session(stack, agent, site, names=["Report.pdf", "Archive"])
    r = session.drag_to(session.find("button", "Report.pdf"), session.find("button", "Trash"))
    result = r.result
    assert (result.outcome, result.execution_started) == (Outcome.REFUSED, False), result
    assert result.reason == "OUT_OF_SCOPE" and "drop target" in result.message, result
    assert _page_says(session, "Nothing dropped")
    r = session.drag_to(session.find("button", "Report.pdf"), session.find("button", "Archive"))
    assert r.result.outcome is Outcome.DONE, r.result


def test_a_drop_target_of_no_observation_is_not_found(stack: Stack, agent: AgentSetup, site: Site) -> None:
    session = _session(stack, agent, site)
    with pytest.raises(NotFoundError) as info:
        session.drag_to(session.find("button", "Report.pdf"), "e999")
    assert info.value.field == "to_ref"
