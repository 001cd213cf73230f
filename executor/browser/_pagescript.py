"""The scripts Handrail runs in pages: the init script, the selector engines, the readers.

The init script (INIT_SCRIPT, in every page and frame, before the page's own scripts) keeps,
per node, the time of the last mutation that touched it (its attributes, its subtree, or
its place in the tree; in the document and in every shadow root, watched as it is
attached), so that a check can tell whether the target or its surroundings
changed since an observation; and it holds the input guard (``_guardscript``), which
swallows trusted input that would reach anything but the armed element as it was armed.
Times are ``performance.timeOrigin + performance.now()``: one clock for every frame.

Its state lives in a closure: the page can call the frozen ``window.__handrail`` API, but
cannot reach or replace what the checks read. (A page that patches the DOM's own
prototypes can still lie to any script of the page's world; that is not a page's normal
behaviour, and is out of what this guard claims.)

Two selector engines run in Playwright's isolated world (``content_script=True``), where
the snapshot's refs live:

- PICK_ENGINE hands the element of a ref over to the page's world
  (``aria-ref=e5 >> handrail-pick=TOKEN``): one ``count()`` round trip, against the ~5 ms
  of an element handle adopted across worlds;
- SNAP_ENGINE is the root the observation's snapshot is taken of
  (``handrail-snap=TOKEN``): run in the very task of the snapshot, it tells the page's world
  the moment (the clock and the mutation count the checks compare with), and, once the
  snapshot has given every node its ref, measures every ref's box (the structured
  element list's boxes) — again only when something may have moved them since its last
  measure. It then pushes what it read (the moment, the title, the boxes) to the executor
  through FACTS_BINDING, a CDP binding that exists in Playwright's world alone (``_world``);
  where that binding is not (yet) installed, READ_PAGE collects the same facts.

The page's world answers the engine with the moment on an event target the engine made for
that one snapshot, handed over as the hand-over event's ``relatedTarget`` (and is told the
token there): no page script holds that target, so none can read or forge the answer.

The page never sees these hand-overs: the init script's listeners are the first on the
window and stop them there; their tokens are random per call.
"""

from __future__ import annotations

from handrail.executor.browser._guardscript import GUARD

PICK_EVENT = "__handrail_pick"
SNAP_EVENT = "__handrail_snap"
BOXES_ASK = "__handrail_boxes"
BOXES_ANSWER = "__handrail_boxes_answer"
SNAP_FACTS = "__handrail_snap_facts"
SNAP_TOKEN = "__handrail_snap_token"
# The CDP binding SNAP_ENGINE pushes a snapshot's facts through (installed by ``_world`` in
# Playwright's isolated world only: the page's own scripts cannot call it).
FACTS_BINDING = "__handrail_facts"

PICK_SELECTOR = "handrail-pick"
PICK_ENGINE = """{
  query(root, token) { return this.queryAll(root, token)[0] || null; },
  queryAll(root, token) {
    if (!root || root.nodeType !== 1) return [];
    root.dispatchEvent(new CustomEvent("PICK_EVENT", { detail: token, bubbles: true, composed: true }));
    return [root];
  }
}""".replace("PICK_EVENT", PICK_EVENT)

SNAP_SELECTOR = "handrail-snap"
# Evaluated once per isolated world (per document): the listener it registers answers
# READ_PAGE's question for the boxes measured after the snapshot of a token.
SNAP_ENGINE = (
    """(() => {
  const measured = new Map();
  // Boxes are measured again only when something may have moved them since the last
  // measure: the DOM, a load (an image), a pointer, focus or input change (CSS :hover,
  // :focus, :checked, :valid ...), a font, the scroll position or the viewport, the hash
  // (:target), or an animation or transition running now or having run since (a measure
  // taken while one runs is never kept).
  let dirty = true, last = null, lastView = "";
  const soil = () => { dirty = true; };
  new MutationObserver(soil)
    .observe(document, { subtree: true, childList: true, attributes: true, characterData: true });
  for (const type of ["load", "pointermove", "pointerdown", "pointerup", "click", "focusin", "focusout",
                      "keydown", "keyup", "input", "change", "scroll", "toggle",
                      "transitionend", "transitioncancel", "animationend", "animationcancel"])
    document.addEventListener(type, soil, true);
  window.addEventListener("resize", soil);
  window.addEventListener("hashchange", soil);
  if (document.fonts) document.fonts.addEventListener("loadingdone", soil);
  const fresh = () => {
    const view = `${scrollX},${scrollY},${innerWidth},${innerHeight}`;
    const animating = document.getAnimations().some((a) => a.playState === "running");
    if (dirty || last === null || view !== lastView || animating) {
      last = measure();
      dirty = animating;
      lastView = view;
    }
    return last;
  };
  const measure = () => {
    const out = [];
    const walk = (root) => {
      const all = root.querySelectorAll("*");
      for (let i = 0; i < all.length; i++) {
        const el = all[i], a = el._ariaRef;
        if (a) {
          const r = el.getBoundingClientRect();
          out.push(a.ref, Math.round(r.x), Math.round(r.y), Math.round(r.width), Math.round(r.height));
        }
        if (el.shadowRoot) walk(el.shadowRoot);
      }
    };
    walk(document);
    return JSON.stringify(out);
  };
  document.addEventListener("BOXES_ASK", (e) => {
    const boxes = measured.get(e.detail);
    if (boxes === undefined) return;
    measured.delete(e.detail);
    document.dispatchEvent(new CustomEvent("BOXES_ANSWER", { detail: boxes }));
  }, true);
  return {
    query(root, token) { return this.queryAll(root, token)[0] || null; },
    queryAll(root, token) {
      const doc = root.ownerDocument || root;
      const top = doc.body || doc.documentElement;
      if (!top) return [];
      // The snapshot runs right after this, in the same task: tell the page's world now.
      // It answers [clock, mutations] on ``pipe``, which no page script can reach, and is
      // told the token there. (Not a node: an element made in the document, even one never
      // inserted, makes the snapshot of a large page half as slow again.)
      const pipe = new EventTarget();
      let moment = null;
      pipe.addEventListener("SNAP_FACTS", (e) => {
        if (typeof e.detail !== "string") return;
        moment = e.detail;
        pipe.dispatchEvent(new CustomEvent("SNAP_TOKEN", { detail: token }));
      });
      top.dispatchEvent(new FocusEvent("SNAP_EVENT", { relatedTarget: pipe, bubbles: true, composed: true }));
      // After the snapshot (same task, no page script in between): measure its refs, and
      // push the facts to the executor where its binding is in place (else READ_PAGE).
      measured.clear();
      Promise.resolve().then(() => {
        const boxes = fresh();
        measured.set(token, boxes);
        const push = globalThis["FACTS_BINDING"];
        if (moment !== null && typeof push === "function")
          push(JSON.stringify([token, moment, doc.title, boxes]));
      });
      return [top];
    }
  };
})()""".replace("BOXES_ASK", BOXES_ASK)
    .replace("BOXES_ANSWER", BOXES_ANSWER)
    .replace("SNAP_FACTS", SNAP_FACTS)
    .replace("SNAP_TOKEN", SNAP_TOKEN)
    .replace("SNAP_EVENT", SNAP_EVENT)
    .replace("FACTS_BINDING", FACTS_BINDING)
)

# Before any script of a page or frame: no SharedWorker (pages feature-test it and fall
# back to their own requests). A shared worker's requests bypass Playwright's routing, so
# none of them would be reported to its action or carry its Idempotency-Key; service
# workers are blocked for the same kind of reason (``BrowserHost.open_page``).
NO_SHARED_WORKERS = "delete self.SharedWorker;\n"

# Before any script of a page or frame: no way to open a connection that is no HTTP request
# through the routes. A peer connection's ICE gathering sends STUN (UDP) and opens TURN
# (TCP) to any host the page names, with a username it chooses; a WebTransport is QUIC
# (UDP) to any host. Neither passes the routes nor shows as a request or a socket the gate
# hears (measured), so neither is left.
#
# A WebSocket's handshake passes no route either (nor the tab's Fetch interceptor), and its
# messages are effects, as a POST's body is. Only one to the tab's page's own origin (the
# top of the frame tree, which was judged when it loaded; ``ws:``/``wss:`` as
# ``http:``/``https:``) is opened, as the page's own requests go on; any other throws a
# SecurityError where it is made. (A side-effecting request to another origin is asked of
# the sidecar instead; a socket cannot wait for an answer, so another origin, granted or
# not, gets none.) The native constructors stay out of reach: the globals and each
# prototype's ``constructor`` are the guard (a subclass calls it too), and a frame's fresh
# window runs this script first as well.
#
# A dedicated worker (no peer connections there) starts with WORKER_SCRIPT in front of its
# own source (``_workerstart``), and the gate's session evaluates it again once it reaches
# the worker; a worker's sockets may reach its own origin (its creator's).
GUARDED_SOCKETS = r"""(() => {
  const ancestors = self.location && self.location.ancestorOrigins;
  const home = ancestors && ancestors.length ? ancestors[ancestors.length - 1] : self.origin;
  const base = self.document ? () => document.baseURI : () => self.location.href;
  const originOf = (raw) => {
    let url;
    try { url = new URL(String(raw), base()); } catch (e) { return ""; }
    const p = url.protocol;
    const scheme = p === "wss:" || p === "https:" ? "https:" : p === "ws:" || p === "http:" ? "http:" : p;
    return scheme + "//" + url.host;
  };
  for (const name of ["WebSocket", "WebSocketStream"]) {
    const Native = self[name];
    if (typeof Native !== "function") continue;
    const Guarded = new Proxy(Native, {
      construct(target, args, newTarget) {
        const origin = originOf(args[0]);
        if (origin && origin !== home) {
          throw new DOMException(
            "Handrail: a " + name + " to " + origin + " is not opened (only to the page's own origin, " + home + ")",
            "SecurityError");
        }
        return Reflect.construct(target, args, newTarget === Guarded ? Native : newTarget);
      },
    });
    Object.defineProperty(Native.prototype, "constructor", { value: Guarded, writable: true, configurable: true });
    Object.defineProperty(self, name, { value: Guarded, writable: true, configurable: true });
  }
})();
"""
NO_UNROUTED_CONNECTIONS = (
    "delete self.RTCPeerConnection; delete self.webkitRTCPeerConnection; delete self.WebTransport;\n" + GUARDED_SOCKETS
)
# (An unparsable URL gets "" from ``originOf``: the constructor then throws its own error.)
#
# In a dedicated worker, on one line (it goes in front of the worker's own first line:
# ``_workerstart``): no WebTransport, no workers of its own, sockets to its own origin only.
WORKER_SCRIPT = "delete self.WebTransport; delete self.Worker; " + " ".join(
    line.strip() for line in GUARDED_SOCKETS.splitlines() if line.strip()
)

INIT_SCRIPT = (
    (
        r"""
(() => {
  if (window.__handrail) return;
  const now = () => performance.timeOrigin + performance.now();
  const attr = new WeakMap(), subtree = new WeakMap(), moved = new WeakMap();
  const st = { mutations: 0, pick: null, arm: null, snaps: new Map(), workers: 0 };
  const markUp = (node, t) => {
    for (let n = node; n; n = n.parentNode || n.host) subtree.set(n, t);
  };
  const OBSERVED = {
    subtree: true, childList: true, attributes: true, characterData: true, characterDataOldValue: true,
  };
  const watched = new WeakSet();
  const watch = (root) => {
    if (watched.has(root)) return;
    watched.add(root);
    observer.observe(root, OBSERVED);
  };
  const observer = new MutationObserver((records) => {
    const t = now();
    for (const r of records) {
      // A text written again with the value it had (a by-index repaint of an unchanged
      // row) changes nothing anyone can see: not a change. (X -> Y -> X in one batch
      // still counts: its second record's old value is Y.)
      if (r.type === "characterData" && r.oldValue === r.target.nodeValue) continue;
      st.mutations += 1;
      if (r.type === "attributes") {
        attr.set(r.target, t);
        markUp(r.target.parentNode, t);
      } else markUp(r.target, t);
      if (r.type === "childList") {
        // A host the parser gave a declarative shadow root: its root is watched from here.
        r.addedNodes.forEach((n) => { moved.set(n, t); if (n.shadowRoot) watch(n.shadowRoot); });
        r.removedNodes.forEach((n) => moved.set(n, t));
      }
    }
  });
  // A change inside a shadow root is a change as well; a document's observer does not see
  // into them. The page's scripts attach their roots after this script ran: each root is
  // watched as it is attached (open or closed: a closed one changes what its host shows),
  // and attaching one is a change of its host.
  const attachShadow = Element.prototype.attachShadow;
  if (typeof attachShadow === "function") {
    const patched = {
      attachShadow(init) {
        const root = Reflect.apply(attachShadow, this, [init]);
        watch(root);
        st.mutations += 1;
        markUp(this, now());
        return root;
      },
    }.attachShadow;
    const desc = Object.getOwnPropertyDescriptor(Element.prototype, "attachShadow");
    Object.defineProperty(Element.prototype, "attachShadow", { ...desc, value: patched });
  }
  const stop = (e) => { e.preventDefault(); e.stopPropagation(); e.stopImmediatePropagation(); };
  // Hand-overs from Playwright's world: first on the window, so the page never sees them.
  window.addEventListener("PICK_EVENT", (e) => {
    st.pick = { token: e.detail, el: e.composedPath()[0] };
    stop(e);
  }, true);
  window.addEventListener("SNAP_EVENT", (e) => {
    stop(e);
    // The engine's own target for this snapshot: it takes the moment and tells the token.
    const pipe = e.relatedTarget;
    if (!pipe) return;
    const snap = { at: now(), mutations: st.mutations };
    let token = null;
    const told = (t) => { if (typeof t.detail === "string") token = t.detail; };
    pipe.addEventListener("SNAP_TOKEN", told);
    try { pipe.dispatchEvent(new CustomEvent("SNAP_FACTS", { detail: JSON.stringify([snap.at, snap.mutations]) })); }
    finally { pipe.removeEventListener("SNAP_TOKEN", told); }
    if (token === null) return;
    st.snaps.set(token, snap);
    if (st.snaps.size > 8) st.snaps.delete(st.snaps.keys().next().value);
  }, true);
"""
        + GUARD
        + r"""
  const take = (token) => {
    const p = st.pick;
    st.pick = null;
    return p && p.token === token ? p.el : null;
  };
  const boxes = (token) => {
    let answer = null;
    const listen = (e) => { answer = e.detail; stop(e); };
    window.addEventListener("BOXES_ANSWER", listen, true);
    try { document.dispatchEvent(new CustomEvent("BOXES_ASK", { detail: token })); }
    finally { window.removeEventListener("BOXES_ANSWER", listen, true); }
    return answer;
  };
  // A dedicated worker the page makes is a target the gate attaches to a moment later,
  // in no order with the input's report: the report says how many were made since the arm
  // (here or in a same-origin child frame), and the dispatch waits for them to attach.
  const workerMade = () => { st.workers += 1; };
  if (typeof self.Worker === "function") {
    const made = () => {
      try { if (window.top !== window && window.top.__handrail) { window.top.__handrail.workerMade(); return; } }
      catch (e) { /* a cross-origin parent: counted here, which no report reads */ }
      workerMade();
    };
    const worker = new Proxy(self.Worker, {
      construct(target, args, newTarget) {
        const w = Reflect.construct(target, args, newTarget);
        made();
        return w;
      },
    });
    Object.defineProperty(self, "Worker", { value: worker, writable: true, configurable: true });
  }
  Object.defineProperty(window, "__handrail", {
    value: Object.freeze({
      take, check, arm, disarm, boxes, workerMade,
      snap: (token) => st.snaps.get(token) || null,
      clock: () => [st.mutations, now()],
      workers: () => st.workers,
    }),
  });
  observer.observe(document, OBSERVED);
})();
"""
    )
    .replace("PICK_EVENT", PICK_EVENT)
    .replace("SNAP_FACTS", SNAP_FACTS)
    .replace("SNAP_TOKEN", SNAP_TOKEN)
    .replace("SNAP_EVENT", SNAP_EVENT)
    .replace("BOXES_ASK", BOXES_ASK)
    .replace("BOXES_ANSWER", BOXES_ANSWER)
)

# Runs on the target element (an element handle's evaluate, in a child frame).
CHECK_ELEMENT = r"""
(el, since) => window.__handrail ? window.__handrail.check(el, since)
                                 : { problem: "the page's Handrail script is missing" }
"""


def _on_picked(body: str) -> str:
    """A page script on the element PICK_ENGINE handed over for ``token`` (taken: the page
    keeps no reference): ``body`` sees ``el``, ``args`` and ``h`` (the init script's API).
    Answers ``{unpicked}`` when no element came."""
    return (
        "([token, ...args]) => {\n  const h = window.__handrail;\n"
        "  const el = h ? h.take(token) : null;\n"
        "  if (!el) return { unpicked: true };\n" + body + "\n}\n"
    )


# The element check, on the element picked for ``token``; args: [since, point] (the point
# of a pixel action, CSS pixels: the element must be under it; else its centre is checked).
CHECK_PICKED = _on_picked("  return h.check(el, args[0], args[1]);")

# The executor's own pointer, armed on the picked element right before the input goes out;
# args: [since, arm token, how long the arm holds (ms)]. The element check again, at
# dispatch time; then the point to press (its centre) only where Playwright's two-frame
# stability wait would find nothing to wait for — the centre inside the viewport, no
# animation on the element or an ancestor, the element the topmost thing there — else
# ``{fallback}`` and Playwright's click does it all (armed with ARM_INPUT).
ARM_POINTER = _on_picked("  return h.arm(el, args[0], 'pointer', args[1], args[2]);")

# The input guard alone, armed on the picked element before Playwright's own click
# (``mode`` "click") or keyboard input into it ("keys"), or before the executor's input at
# a point ("point", "drag", "point-keys", with the point); args: [since, token, ms, mode,
# point].
ARM_INPUT = _on_picked("  return h.arm(el, args[0], args[3], args[1], args[2], args[4]);")

# Disarms the guard (``token``) and says what happened; see ``_guardscript.DISARM``.
# It answers at once: waiting for a task would wait for the frame Chromium paints after
# input (17 ms). A navigation the input's handlers only planned (``form.submit()``) is
# told by the tab's ``Page.frameRequestedNavigation`` events, which reach the executor
# before this answer (see ``Tab.requested``).
DISARM = r"""
(token) => {
  const h = window.__handrail;
  // Not armed here: this is another document already, the one the input navigated to.
  if (!h) return { blocked: "", changed: "", navigating: true, gone: true };
  return h.disarm(token);
}
"""

# How many dedicated workers the document (with its same-origin frames) has made; null
# where the init script is missing.
READ_WORKERS = "() => { const h = window.__handrail; return h ? h.workers() : null; }"

# After the snapshot of ``token``: the clock and mutation count at its moment, the title,
# and the boxes of its refs. ``{early}`` when this ran before the snapshot did.
READ_PAGE = r"""
(token) => {
  const h = window.__handrail;
  if (!h) return { missing: true, title: document.title };
  const snap = h.snap(token);
  if (!snap) return { early: true, title: document.title };
  return { at: snap.at, mutations: snap.mutations, title: document.title, boxes: h.boxes(token) };
}
"""

# The main frame's mutation count, clock and title (a page without the init script: 0).
READ_CLOCK = (
    "() => { const h = window.__handrail; const c = h ? h.clock() : [0, performance.timeOrigin + performance.now()];"
    " return [c[0], c[1], document.title]; }"
)
