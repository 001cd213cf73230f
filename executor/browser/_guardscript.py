"""The element check and the input guard, as they run in the page (part of INIT_SCRIPT).

``check(el, since)`` — at check time, and again when arming — refuses an element that is
detached, or that changed since the observation (``since``): it, its ancestors (their
attributes, their place in the tree), its content, what names it (``<label>``s,
``aria-labelledby``), the record it sits in (its row, list item, card: every change in
that record's subtree, so that a row re-painted by index is seen), the title of the dialog
it is in; or that is hidden, disabled, inert, behind the topmost open modal, or covered at
its centre (the topmost element there, through open shadow roots, must be it or in it).

``arm(el, since, mode, token, ms)`` runs the check and arms the input guard on the element
(at dispatch time, or with the check before the decision, ``_surface``):

- ``pointer`` (the executor's own click) and ``click`` (Playwright's click): every trusted
  press event (pointerdown … click, dblclick, contextmenu) must land on the element, and
  the element must still be what it was when armed — its *identity*: its tag, role, name
  sources and text, the record it sits in and that record's text, its path of positions
  up to that record and the record's position in its list, the dialog it is in and its
  name, the form it submits (its form owner: a ``form=`` attribute wins) and where to (the
  form's action, method and target, the element's own ``formaction``, ``formmethod``,
  ``formtarget`` ...; for a field, also its form's default button's, which Enter submits
  by) — and, at the first press, still visible, enabled and not inert. The
  first event where any fails is swallowed, and every later one: the page never sees it,
  and the click is not dispatched.
- ``keys`` (fill, type, press into a field): every trusted keydown, keypress and
  beforeinput must go to the element (the focus did not move on) and find its identity
  unchanged (its own text excepted: it is what is being typed; the record's text is taken
  again after each key, as the page may answer a key by updating it). The first key after
  a change is swallowed with all that follow: nothing is typed after it.

``disarm(token)`` ends the guard and reports: ``blocked`` (what the input landed on
instead), ``changed`` (what changed, before → after), ``at`` (the event it was seen at),
``passed`` (the press events that reached the page before), ``keys`` and ``chars`` (the
keys and characters let through), ``navigating`` (the input started a navigation of this
document, or a form submission that will), ``workers`` (the dedicated workers made since
it was armed).
"""

from __future__ import annotations

GUARD = r"""
  const parentOf = (n) => {
    const p = n.parentNode;
    return p && p.nodeType === 11 ? p.host : p;
  };
  // Whether node n is el or inside it as the page draws it: across shadow roots, and from a
  // node slotted into a shadow tree through its slot.
  const inside = (n, el) => {
    for (; n; n = n.assignedSlot || parentOf(n)) if (n === el) return true;
    return false;
  };
  // The host of the shadow root an element is in (null in the document).
  const hostOf = (n) => {
    const r = n.getRootNode();
    return r.nodeType === 11 && r.host ? r.host : null;
  };
  // The nearest ancestor (or itself) matching sel, through the shadow roots it sits in.
  const closestDeep = (el, sel) => {
    for (let n = el; n; n = hostOf(n)) {
      const c = n.closest(sel);
      if (c) return c;
    }
    return null;
  };
  // The form an element submits: a listed element's form owner (its form= attribute wins
  // over the form it sits in; none when it names no form), else the form it sits in.
  const LISTED = [HTMLButtonElement, HTMLInputElement, HTMLSelectElement, HTMLTextAreaElement, HTMLFieldSetElement,
                  HTMLOutputElement, HTMLObjectElement];
  const formOf = (el) => (LISTED.some((c) => el instanceof c) ? el.form : el.closest("form"));
  const submits = (n) => (n instanceof HTMLButtonElement && n.type === "submit") ||
                         (n instanceof HTMLInputElement && (n.type === "submit" || n.type === "image"));
  // A form's default button (Enter in one of its fields submits through it): its first
  // submit button in tree order (form.elements leaves out image buttons).
  const defaultButton = (f) => {
    let best = null;
    for (const c of f.elements) if (submits(c)) { best = c; break; }
    for (const c of f.querySelectorAll('input[type="image" i]'))
      if (c.form === f && (!best || best.compareDocumentPosition(c) & Node.DOCUMENT_POSITION_PRECEDING)) best = c;
    return best;
  };
  const norm = (s) => (s || "").replace(/\s+/g, " ").trim();
  // An element's text as words: its text nodes joined by spaces (cells do not run together).
  const textOf = (n) => {
    const walker = document.createTreeWalker(n, NodeFilter.SHOW_TEXT);
    const parts = [];
    let size = 0;
    for (let t = walker.nextNode(); t && size < 4000; t = walker.nextNode()) {
      parts.push(t.nodeValue);
      size += t.nodeValue.length;
    }
    return norm(parts.join(" "));
  };
  const short = (s, n) => (s.length > n ? s.slice(0, n - 1) + "\u2026" : s);
  const describe = (n) => {
    if (!n || n.nodeType !== 1) return String(n && n.nodeName);
    const label = n.getAttribute("aria-label") || norm(n.textContent).slice(0, 40);
    return `${n.tagName.toLowerCase()}${n.id ? "#" + n.id : ""}${label ? ' "' + label + '"' : ""}`;
  };
  const RECORD = 'tr,[role="row"],li,[role="listitem"],[role="option"],[role="treeitem"],article,[role="article"]';
  const BOUNDARY = 'form,dialog,[role="dialog"],[role="alertdialog"],fieldset,body,main,nav,[role="region"],' +
                   'table,ul,ol,[role="list"],[role="grid"],[role="table"],[role="listbox"],[role="tree"]';
  // The record an element sits in: its row or list item, else the nearest ancestor with
  // text of its own beyond the element's (a card around a button, the label of a field).
  // A form around the element alone (a row's own "Cancel" form) is part of it, not a bound.
  const recordOf = (el) => {
    const own = norm(el.textContent);
    for (let n = parentOf(el); n && n.nodeType === 1; n = parentOf(n)) {
      if (n.matches(RECORD)) return n;
      // A bound is tested before any text is read: a page-sized <main> costs nothing.
      if (n.matches(BOUNDARY)) {
        if (n.tagName !== "FORM" || norm(n.textContent) !== own) return null;
        continue;
      }
      if (norm(n.textContent) !== own) return n;
    }
    return null;
  };
  const kindOf = (n) => {
    const role = n.getAttribute("role") || "";
    if (n.tagName === "TR" || role === "row") return "row";
    if (n.tagName === "LI" || role === "listitem" || role === "treeitem") return "list item";
    if (role === "option") return "option";
    return `container (${n.tagName.toLowerCase()})`;
  };
  const byId = (el, id) => {
    const root = el.getRootNode();
    return (root.getElementById ? root.getElementById(id) : null) || el.ownerDocument.getElementById(id);
  };
  // What names an element besides its content: its labels and aria-labelledby targets.
  const namers = (el) => {
    const out = [...(el.labels || [])];
    for (const id of (el.getAttribute("aria-labelledby") || "").split(/\s+/).filter(Boolean)) {
      const n = byId(el, id);
      if (n) out.push(n);
    }
    return out;
  };
  const DIALOG = 'dialog,[role="dialog"],[role="alertdialog"]';
  const scopeName = (s) => {
    if (!s) return "";
    const parts = [s.getAttribute("aria-label") || "", s.getAttribute("name") || ""];
    for (const n of namers(s)) parts.push(norm(n.textContent));
    return parts.join("|");
  };
  // Where a submit goes: the button's own form* attributes (and form=), or the form's.
  const AIM = ["form", "formaction", "formmethod", "formtarget", "formenctype", "formnovalidate"];
  const FORM_AIM = ["action", "method", "target", "enctype", "novalidate"];
  const attrs = (n, names) => names.map((a) => n.getAttribute(a));
  const position = (n) => {
    let i = 0;
    for (let s = n.previousElementSibling; s; s = s.previousElementSibling) i++;
    return i;
  };
  const NAMING = ["role", "type", "id", "name", "aria-label", "title", "placeholder", "alt", "href", "for"];
  // What the element is, as the page shows it now (see the module's docstring).
  const identity = (el, keys) => {
    const rec = recordOf(el);
    const own = [el.tagName];
    for (const a of NAMING) own.push(el.getAttribute(a) || "");
    if (!keys) {
      own.push(short(norm(el.textContent), 400));
      if (el instanceof HTMLInputElement && (el.type === "submit" || el.type === "button")) own.push(el.value);
    }
    const path = [];
    for (let n = el; n && n !== rec && n.nodeType === 1; n = parentOf(n)) {
      path.push(position(n));
      if (path.length > 12) break;
    }
    const dialog = closestDeep(el, DIALOG), form = formOf(el);
    // The form it submits and where to; a field's also through its form's default button
    // (Enter submits by it): by its formaction, formmethod ... (no such button, or one
    // with none, is the same: the form's own; one re-rendered, or enabled as the field
    // fills, is no change).
    const aim = [attrs(el, AIM), form ? attrs(form, FORM_AIM) : null];
    const by = keys && form && el instanceof HTMLInputElement ? defaultButton(form) : null;
    const byAim = by ? attrs(by, AIM.slice(1)) : [];
    if (byAim.some((v) => v !== null)) aim.push(byAim);
    return {
      attached: el.isConnected,
      own: own.join("|"),
      label: namers(el).map((n) => norm(n.textContent)).join(" / "),
      record: rec,
      recordText: rec ? textOf(rec) : "",
      recordKind: rec ? kindOf(rec) : "",
      recordAt: rec && rec.parentNode ? position(rec) : -1,
      path: path.join("."),
      dialog,
      dialogName: scopeName(dialog),
      form,
      formName: scopeName(form),
      aim: JSON.stringify(aim),
    };
  };
  // How ``now`` differs from ``was``: one sentence, or "".
  const differs = (was, now) => {
    if (!now.attached) return "it was removed from the page";
    if (now.record !== was.record) return "it was moved into another record";
    if (now.label !== was.label) return `its label changed from "${short(was.label, 60)}" to "${short(now.label, 60)}"`;
    if (now.recordText !== was.recordText)
      return `its ${was.recordKind} changed from "${short(was.recordText, 70)}" to "${short(now.recordText, 70)}"`;
    if (now.recordAt !== was.recordAt)
      return `its ${was.recordKind}'s position in its list changed (${was.recordAt + 1} -> ${now.recordAt + 1})`;
    if (now.path !== was.path) return `its position changed (${was.path} -> ${now.path})`;
    if (now.form !== was.form || now.aim !== was.aim)
      return "where it submits changed (its form, or its form's or its own action, method or target)";
    if (now.own !== was.own) return "its name, text or naming attributes changed";
    if (now.formName !== was.formName) return "the name of the form it is in changed";
    if (now.dialog !== was.dialog || now.dialogName !== was.dialogName) return "the dialog it is in changed";
    return "";
  };

  // What changed since ``since`` (the observation), by the mutation clocks; or "".
  const changedSince = (el, since) => {
    for (let n = el; n; n = parentOf(n)) {
      if ((attr.get(n) || 0) > since)
        return n === el ? "the element's attributes changed" : `an ancestor (${describe(n)}) changed its attributes`;
      if ((moved.get(n) || 0) > since)
        return n === el ? "the element was moved in the page" : `an ancestor (${describe(n)}) was moved in the page`;
    }
    if ((subtree.get(el) || 0) > since) return "the element's content changed";
    for (const n of namers(el))
      if ((subtree.get(n) || 0) > since || (attr.get(n) || 0) > since) return `its label (${describe(n)}) changed`;
    const rec = recordOf(el);
    if (rec && (subtree.get(rec) || 0) > since)
      return `its ${kindOf(rec)} changed since the observation: it reads "${short(textOf(rec), 80)}" now`;
    const dialog = closestDeep(el, DIALOG);
    if (dialog)
      for (const n of namers(dialog))
        if ((subtree.get(n) || 0) > since) return `the title of the ${describe(dialog)} it is in changed`;
    // The form it submits, when not an ancestor (a form= attribute): its action, method ...
    const form = formOf(el);
    if (form && (attr.get(form) || 0) > since && !inside(el, form))
      return `the form it submits (${describe(form)}) changed its attributes`;
    return "";
  };

  // The topmost element at (x, y), through open shadow roots.
  const hitAt = (x, y) => {
    let hit = document.elementFromPoint(x, y);
    while (hit && hit.shadowRoot) {
      const deeper = hit.shadowRoot.elementFromPoint(x, y);
      if (!deeper || deeper === hit) break;
      hit = deeper;
    }
    return hit;
  };
  // ``at``: a point action's point [x, y] (CSS pixels): the element must be what is under
  // it now, in place of the check at its centre; ``{problem, target}`` when it is not.
  // Whether the element can take input now: "" or why not.
  const unusable = (el) => {
    if (el.checkVisibility && !el.checkVisibility({ checkOpacity: true, checkVisibilityCSS: true }))
      return "the element is not visible";
    // Disabled itself, by a disabled fieldset, or by aria-disabled on it or an ancestor.
    if (el.disabled || (el.matches && el.matches(":disabled")) || closestDeep(el, '[aria-disabled="true"]'))
      return "the element is disabled";
    if (closestDeep(el, "[inert]")) return "the element is inert";
    return "";
  };
  const check = (el, since, at) => {
    if (!el.isConnected) return { problem: "the element is no longer attached" };
    // Each shadow root it sits in must be one the page script watches: a root attached
    // through another window's attachShadow (a frame's), to a host the observer saw arrive
    // before it had one, changes unseen.
    for (let r = el.getRootNode(); r.nodeType === 11 && r.host; r = r.host.getRootNode())
      if (!watched.has(r)) return { problem: "it is in a shadow root the guard does not watch" };
    const changed = changedSince(el, since);
    if (changed) return { problem: changed };
    const cannot = unusable(el);
    if (cannot) return { problem: cannot };
    // A point action: something else under the point is another target (a pop-up, a
    // backdrop), before anything else is said about the element.
    const hit = at ? hitAt(at[0], at[1]) : null;
    if (at && !inside(hit, el))
      return { problem: `${hit ? describe(hit) : "nothing"} is under the point now`, target: true };
    // The page behind the topmost open modal is inert: highest z-index, then last in the
    // document (a survey drawn over a retention dialog is the one that counts).
    const modals = [...document.querySelectorAll('dialog[open], [aria-modal="true"]')]
      .filter((m) => m.checkVisibility ? m.checkVisibility() : true);
    let top = null, topZ = -Infinity;
    for (const m of modals) {
      const z = parseInt(getComputedStyle(m).zIndex, 10) || 0;
      if (z >= topZ) { top = m; topZ = z; }
    }
    if (top && !inside(el, top)) return { problem: `a modal (${describe(top)}) covers the page` };
    if (at) return { problem: "", password: el instanceof HTMLInputElement && el.type === "password" };
    const r = el.getBoundingClientRect();
    const cx = r.left + r.width / 2, cy = r.top + r.height / 2;
    if (r.width > 0 && r.height > 0 && cx >= 0 && cy >= 0 && cx < window.innerWidth && cy < window.innerHeight) {
      // The topmost element there, as deep as open shadow roots go, must be it or in it.
      const hit = hitAt(cx, cy);
      if (hit && !inside(hit, el)) return { problem: `it is covered by ${describe(hit)}` };
    }
    return { problem: "", password: el instanceof HTMLInputElement && el.type === "password" };
  };

  const arm = (el, since, mode, token, ms, at) => {
    if (mode === "pointer" && !window.navigation) return { fallback: "no navigation API in this page" };
    const facts = check(el, since, at);
    if (facts.problem) return { problem: facts.problem, target: !!facts.target };
    let answer = {};
    if (mode === "pointer") {
      for (const a of document.getAnimations()) {
        const t = a.effect && a.effect.target;
        if (a.playState === "running" && t && inside(el, t))
          return { fallback: "the element is animating" };
      }
      const r = el.getBoundingClientRect();
      const x = r.left + r.width / 2, y = r.top + r.height / 2;
      if (!(r.width > 0 && r.height > 0 && x >= 0 && y >= 0 && x < window.innerWidth && y < window.innerHeight))
        return { fallback: "the element's centre is outside the viewport" };
      if (!inside(hitAt(x, y), el)) return { fallback: "another element is on top at its centre" };
      answer = { x, y };
    }
    // "point-keys" (typing at a point): the press that focuses the field is guarded as a
    // click is, then the keys as for "keys"; "drag": the press as a click, and what
    // follows (the moves, the release over the drop target) goes through unless the press
    // was swallowed.
    const kb = mode === "keys" || mode === "point-keys";
    // Armed for a bounded time: an input that never came must not guard the next action.
    st.arm = { token, el, kb, press: mode === "point-keys", drag: mode === "drag",
               id: identity(el, kb), blocked: "", changed: "", at: "", passed: [],
               keys: 0, chars: 0, navigate: null, submit: null, until: now() + ms, workers: st.workers };
    return answer;
  };
  const armed = () => (st.arm && now() < st.arm.until ? st.arm : null);
  const onPress = (e) => {
    const a = armed();
    if (!a || (a.kb && !a.press) || !e.isTrusted) return;
    if (a.drag && e.type !== "pointerdown" && e.type !== "mousedown") {
      if (a.blocked || a.changed) stop(e);
      else if (a.passed.length < 12) a.passed.push(e.type);
      return;
    }
    if (!a.blocked && !a.changed) {
      const n = e.composedPath()[0];
      if (!inside(n, a.el)) a.blocked = n && n.nodeType === 1 ? describe(n) : String(n);
      else {
        a.changed = differs(a.id, identity(a.el, a.kb));
        // The first press: the element can still take it (armed with the check, before the
        // decision, it may have been disabled or hidden since).
        if (!a.changed && !a.passed.length) a.changed = unusable(a.el);
        if (a.changed) a.at = e.type;
      }
    }
    if (a.blocked || a.changed) stop(e);
    else if (a.passed.length < 12) a.passed.push(e.type);
  };
  for (const type of ["pointerdown", "mousedown", "pointerup", "mouseup", "click", "auxclick", "dblclick",
                      "contextmenu"])
    window.addEventListener(type, onPress, true);
  const deepActive = () => {
    let n = document.activeElement;
    while (n && n.shadowRoot && n.shadowRoot.activeElement) n = n.shadowRoot.activeElement;
    return n;
  };
  const onKey = (e) => {
    const a = armed();
    if (!a || !a.kb || !e.isTrusted) return;
    if (a.blocked) { stop(e); return; }  // the press that was to focus the field was swallowed
    if (!a.changed && e.type !== "keyup") {
      const focus = deepActive();
      const into = e.composedPath()[0];
      if (!inside(focus, a.el) || !inside(into, a.el)) a.changed = `the focus moved to ${describe(focus)}`;
      else a.changed = differs(a.id, identity(a.el, true));
      if (a.changed) a.at = e.type;
    }
    if (a.changed) { stop(e); return; }
    if (e.type === "keydown") a.keys += 1;
    else if (e.type === "beforeinput" && typeof e.data === "string") a.chars += e.data.length;
    else if (e.type === "keyup") {
      // The page may answer a key by changing the record's text (a counter, a total):
      // the next key is compared with the record as it stands after this one.
      a.id.recordText = identity(a.el, true).recordText;
    }
  };
  for (const type of ["keydown", "keypress", "beforeinput", "keyup"]) window.addEventListener(type, onKey, true);
  // A form's navigation is planned in a task of its own, which may come after the report
  // is read: its submit event, fired during the click, says one is coming.
  window.addEventListener("submit", (e) => {
    const a = armed();
    if (a && e.isTrusted && !a.submit) a.submit = e;
  }, true);
  if (window.navigation)
    window.navigation.addEventListener("navigate", (e) => {
      const a = armed();
      if (a && !a.navigate) a.navigate = e;
    });
  const disarm = (token) => {
    const a = st.arm;
    if (!a || a.token !== token) return { blocked: "", changed: "", navigating: true, gone: true };
    st.arm = null;
    // A press that never reached the page (a disabled control gets no mouse events): said.
    if (!a.kb && !a.drag && !a.passed.length && !a.blocked && !a.changed) a.changed = unusable(a.el);
    const e = a.navigate, s = a.submit;
    let navigating = !!e && !e.defaultPrevented && !e.downloadRequest && !e.destination.sameDocument;
    if (!e && s && !s.defaultPrevented) {
      const form = s.target, by = s.submitter;
      const method = ((by && by.getAttribute("formmethod")) || form.getAttribute("method") || "get").toLowerCase();
      const target = (by && by.getAttribute("formtarget")) || form.getAttribute("target") || "";
      navigating = method !== "dialog" && (target === "" || target === "_self");
    }
    return { blocked: a.blocked, changed: a.changed, at: a.at, passed: a.passed, keys: a.keys, chars: a.chars,
             navigating, workers: st.workers - a.workers, gone: false };
  };
"""
