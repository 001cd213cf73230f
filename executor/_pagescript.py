"""The script Handrail installs in every page and frame, and the check it runs per action.

The init script keeps, per node, the time of the last mutation that touched it (its
attributes, its subtree, or its place in the tree), so that a check can tell whether the
target or any of its ancestors changed since an observation. Times are
``performance.timeOrigin + performance.now()``: one clock for every frame.
"""

from __future__ import annotations

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
  start();
})();
"""

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
  if (el.disabled || el.getAttribute("aria-disabled") === "true")
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

# The main frame's mutation count, clock and title, read at observation time.
READ_CLOCK = (
    "() => [window.__handrail ? window.__handrail.mutations : 0,"
    " performance.timeOrigin + performance.now(), document.title]"
)

# The fast path of the element check: nothing at all changed in the page since ``since``
# and no modal is open. Then the element the observation named is as it was: attached
# (the count says so), visible and enabled as the snapshot showed it, nothing over it
# that was not there when the agent looked.
QUIET_SINCE = (
    "(since) => !!window.__handrail && window.__handrail.last <= since"
    " && !document.querySelector('dialog[open], [aria-modal=\"true\"]')"
)
