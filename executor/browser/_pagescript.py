"""The script Handrail installs in every page and frame, and the check it runs per action.

The init script keeps, per node, the time of the last mutation that touched it (its
attributes, its subtree, or its place in the tree), so that a check can tell whether the
target or any of its ancestors changed since an observation. Times are
``performance.timeOrigin + performance.now()``: one clock for every frame.
"""

from __future__ import annotations

PICK_EVENT = "__handrail_pick"

# A selector engine run in Playwright's isolated world (``content_script=True``). Chained
# after an aria-ref — ``aria-ref=e5 >> handrail-pick=TOKEN`` — it dispatches PICK_EVENT on
# the element the ref resolves to, and the init script keeps that element for the next
# page-world script that asks for TOKEN. One ``count()`` round trip, against the ~5 ms of
# an element handle adopted into the page's world.
PICK_SELECTOR = "handrail-pick"
PICK_ENGINE = """{
  query(root, token) { return this.queryAll(root, token)[0] || null; },
  queryAll(root, token) {
    if (!root || root.nodeType !== 1) return [];
    root.dispatchEvent(new CustomEvent("PICK_EVENT", { detail: token }));
    return [root];
  }
}""".replace("PICK_EVENT", PICK_EVENT)

INIT_SCRIPT = r"""
(() => {
  if (window.__handrail) return;
  const now = () => performance.timeOrigin + performance.now();
  const attr = new WeakMap(), subtree = new WeakMap(), moved = new WeakMap();
  const state = { mutations: 0, last: 0, attr, subtree, moved, now };
  const markUp = (node, t) => {
    for (let n = node; n; n = n.parentNode) subtree.set(n, t);
  };
  const observer = new MutationObserver((records) => {
    const t = now();
    state.mutations += records.length;
    state.last = t;
    for (const r of records) {
      if (r.type === "attributes") {
        attr.set(r.target, t);
        markUp(r.target.parentNode, t);
      } else markUp(r.target, t);
      if (r.type === "childList") {
        r.addedNodes.forEach((n) => moved.set(n, t));
        r.removedNodes.forEach((n) => moved.set(n, t));
      }
    }
  });
  const start = () => observer.observe(document, {
    subtree: true, childList: true, attributes: true, characterData: true,
  });
  Object.defineProperty(window, "__handrail", { value: state, enumerable: false });
  // PICK_ENGINE hands an element over from Playwright's world (where the snapshot's refs
  // live) to this one: an event on it, caught here before the page can see it.
  document.addEventListener(PICK_EVENT, (e) => {
    state.pick = { token: e.detail, el: e.target };
    e.stopImmediatePropagation();
  }, true);
  // The guard of the executor's own click (ARM_POINTER sets state.arm, DISARM_POINTER
  // reads it): registered here, before any of the page's scripts, its listeners are the
  // first to see an event. Trusted pointer events that do not land on the armed element
  // are swallowed; a form submission and a navigation the click starts are noted.
  // Whether node n is el or inside it, across shadow roots.
  const inside = (n, el) => {
    for (; n; n = n.parentNode || n.host) if (n === el) return true;
    return false;
  };
  state.inside = inside;
  const armed = () => (state.arm && now() < state.arm.until ? state.arm : null);
  const onInput = (e) => {
    const arm = armed();
    if (!arm || !e.isTrusted) return;
    const n = e.composedPath()[0];
    if (!arm.blocked && !inside(n, arm.el))
      arm.blocked = n && n.nodeType === 1 ? n.tagName.toLowerCase() + (n.id ? "#" + n.id : "") : String(n);
    if (arm.blocked) { e.preventDefault(); e.stopPropagation(); e.stopImmediatePropagation(); }
  };
  for (const type of ["pointerdown", "pointerup", "mousedown", "mouseup", "click", "auxclick", "dblclick",
                      "contextmenu"])
    window.addEventListener(type, onInput, true);
  // A form's navigation is planned in a task of its own, which may come after the report
  // is read: its submit event, fired during the click, says one is coming.
  window.addEventListener("submit", (e) => {
    const arm = armed();
    if (arm && e.isTrusted && !arm.submit) arm.submit = e;
  }, true);
  if (window.navigation)
    window.navigation.addEventListener("navigate", (e) => {
      const arm = armed();
      if (arm && !arm.navigate) arm.navigate = e;
    });
  start();
})();
""".replace("PICK_EVENT", repr(PICK_EVENT))

# Runs on the target element (locator.evaluate). ``since`` is the observation's time.
# Returns what changed, or facts the loop needs (password field) when nothing did.
CHECK_ELEMENT = r"""
(el, since) => {
  const h = window.__handrail;
  const describe = (n) => {
    if (!n || n.nodeType !== 1) return String(n && n.nodeName);
    const label = n.getAttribute("aria-label") || (n.textContent || "").trim().slice(0, 40);
    return `${n.tagName.toLowerCase()}${n.id ? "#" + n.id : ""}${label ? ' "' + label + '"' : ""}`;
  };
  if (!el.isConnected) return { problem: "the element is no longer attached" };
  if (h) {
    for (let n = el; n; n = n.parentNode) {
      if ((h.attr.get(n) || 0) > since)
        return { problem: n === el ? "the element's attributes changed"
                                   : `an ancestor (${describe(n)}) changed its attributes` };
      if ((h.moved.get(n) || 0) > since)
        return { problem: n === el ? "the element was moved in the page"
                                   : `an ancestor (${describe(n)}) was moved in the page` };
    }
    if ((h.subtree.get(el) || 0) > since) return { problem: "the element's content changed" };
    // Its accessible name may come from elsewhere: its <label>s and aria-labelledby.
    const namers = [...(el.labels || [])];
    for (const id of (el.getAttribute("aria-labelledby") || "").split(/\s+/).filter(Boolean)) {
      const n = el.ownerDocument.getElementById(id);
      if (n) namers.push(n);
    }
    for (const n of namers)
      if ((h.subtree.get(n) || 0) > since || (h.attr.get(n) || 0) > since)
        return { problem: `its label (${describe(n)}) changed` };
  }
  if (el.checkVisibility && !el.checkVisibility({ checkOpacity: true, checkVisibilityCSS: true }))
    return { problem: "the element is not visible" };
  // Disabled itself, by a disabled fieldset, or by aria-disabled on it or an ancestor.
  if (el.disabled || (el.matches && el.matches(":disabled")) || el.closest('[aria-disabled="true"]'))
    return { problem: "the element is disabled" };
  if (el.closest("[inert]")) return { problem: "the element is inert" };
  // The page behind the topmost open modal is inert: highest z-index, then last in the
  // document (a survey drawn over a retention dialog is the one that counts).
  const modals = [...document.querySelectorAll('dialog[open], [aria-modal="true"]')]
    .filter((m) => m.checkVisibility ? m.checkVisibility() : true);
  let top = null, topZ = -Infinity;
  for (const m of modals) {
    const z = parseInt(getComputedStyle(m).zIndex, 10) || 0;
    if (z >= topZ) { top = m; topZ = z; }
  }
  if (top && !top.contains(el)) return { problem: `a modal (${describe(top)}) covers the page` };
  const r = el.getBoundingClientRect();
  const cx = r.left + r.width / 2, cy = r.top + r.height / 2;
  if (r.width > 0 && r.height > 0 && cx >= 0 && cy >= 0 &&
      cx < window.innerWidth && cy < window.innerHeight) {
    const hit = document.elementFromPoint(cx, cy);
    if (hit && hit !== el && !el.contains(hit) && !(hit.shadowRoot && hit.contains(el)))
      return { problem: `it is covered by ${describe(hit)}` };
  }
  return { problem: "", password: el instanceof HTMLInputElement && el.type === "password" };
}
"""


def _on_picked(body: str) -> str:
    """A page script on the element PICK_ENGINE handed over for ``token``, taken (the page
    keeps no reference): ``body`` sees ``el``, ``since``, ``h`` (the init script's state)
    and ``check`` (CHECK_ELEMENT). Answers ``{unpicked}`` when no element came."""
    return (
        "([token, since]) => {\n  const check = "
        + CHECK_ELEMENT.strip()
        + """;
  const h = window.__handrail, picked = h && h.pick;
  if (h) { h.pick = null; h.arm = null; }
  if (!picked || picked.token !== token) return { unpicked: true };
  const el = picked.el;
"""
        + body
        + "\n}\n"
    )


# CHECK_ELEMENT on the element picked for ``token``.
CHECK_PICKED = _on_picked("  return check(el, since);")

# The main frame's mutation count, clock and title, read at observation time.
READ_CLOCK = (
    "() => [window.__handrail ? window.__handrail.mutations : 0,"
    " performance.timeOrigin + performance.now(), document.title]"
)

# The executor's own pointer dispatch, armed on the target element right before the input
# goes out (on the element PICK_ENGINE handed over for ``token``; ``since`` is the
# observation's time). It re-runs CHECK_ELEMENT at dispatch time — so a change in the
# moments since the check refuses — and answers the point to press (the element's centre)
# only when Playwright's two-frame stability wait would find nothing to wait for: the
# centre inside the viewport, no animation running on the element or an ancestor, and the
# element the topmost thing at that point. Otherwise it answers ``{fallback}`` and
# Playwright's own click does it all. Armed, the init script's guard swallows trusted
# pointer events that do not land on the element, as Playwright's click does, and notes a
# navigation the input starts, so the executor waits for it to commit or fail.
ARM_POINTER = _on_picked(
    r"""
  if (!window.navigation) return { fallback: "no navigation API in this page" };
  const facts = check(el, since);
  if (facts.problem) return { problem: facts.problem };
  for (const a of document.getAnimations()) {
    const t = a.effect && a.effect.target;
    if (a.playState === "running" && t && (t === el || t.contains(el)))
      return { fallback: "the element is animating" };
  }
  const r = el.getBoundingClientRect();
  const x = r.left + r.width / 2, y = r.top + r.height / 2;
  if (!(r.width > 0 && r.height > 0 && x >= 0 && y >= 0 && x < window.innerWidth && y < window.innerHeight))
    return { fallback: "the element's centre is outside the viewport" };
  let hit = document.elementFromPoint(x, y);
  while (hit && hit.shadowRoot) {
    const deeper = hit.shadowRoot.elementFromPoint(x, y);
    if (!deeper || deeper === hit) break;
    hit = deeper;
  }
  if (!h.inside(hit, el)) return { fallback: "another element is on top at its centre" };
  // Armed for a few seconds at most: a click that never came must not guard the next one.
  h.arm = { el, blocked: "", navigate: null, submit: null, until: h.now() + 5000 };
  return { x, y };
"""
)

# Disarms the guard and says what happened: whether input was swallowed, and whether a
# navigation of this page to another document started (not cancelled, not a download) or
# a form submission will start one. One task passes first, so that a navigation the input
# planned has fired its navigate event.
DISARM_POINTER = r"""
async () => {
  const h = window.__handrail, arm = h && h.arm;
  // Not armed here: this is another document already, the one the input navigated to.
  if (!arm) return { blocked: "", navigating: true };
  await new Promise((r) => setTimeout(r, 0));
  if (h.arm === arm) h.arm = null;
  const e = arm.navigate, s = arm.submit;
  let navigating = !!e && !e.defaultPrevented && !e.downloadRequest && !e.destination.sameDocument;
  if (!e && s && !s.defaultPrevented) {
    const form = s.target, by = s.submitter;
    const method = ((by && by.getAttribute("formmethod")) || form.getAttribute("method") || "get").toLowerCase();
    const target = (by && by.getAttribute("formtarget")) || form.getAttribute("target") || "";
    navigating = method !== "dialog" && (target === "" || target === "_self");
  }
  return { blocked: arm.blocked, navigating };
}
"""
