"""What an element is in its page, and what acting on it does: its context and its effects.

READ_CONTEXT runs on the target element at describe time (in the same round trip as the
element check) and answers, small and self-contained so that it can join a structured
element list later:

- the element's context for the sidecar's risk classification: the title of the dialog it
  is in, the name of its form, the nearest heading before it, its description;
- what acting on it does: the URL of the link it is in, the form it submits (its target
  URL, resolved as the browser would, and its method), whether it takes text (Enter in it
  submits its form) and whether a change of it submits its form.

:func:`effects_of` turns those facts into the verb the action is judged as and the
:class:`~handrail.executor._backend.Effect` s it has besides (docs/browser.md, "Verbs by
effect").
"""

from __future__ import annotations

from typing import Any

from handrail._vocabulary import ActionKind, Verb
from handrail.executor._backend import Effect
from handrail.executor.browser._pagescript import CHECK_ELEMENT, _on_picked

__all__ = [
    "CHECK_ARM_CONTEXT",
    "CHECK_ELEMENT_CONTEXT",
    "CHECK_PICKED_CONTEXT",
    "READ_CONTEXT",
    "READ_FOCUSED_CONTEXT",
    "effects_of",
    "shown_text",
]

# (el) => facts. Text is whitespace-collapsed and cut at 200 characters.
READ_CONTEXT = r"""
(el) => {
  const doc = el.ownerDocument;
  const text = (n) => (n ? (n.innerText || n.textContent || "") : "").replace(/\s+/g, " ").trim().slice(0, 200);
  // Through the shadow roots an element sits in: their hosts, up to the document.
  const hostOf = (n) => { const r = n.getRootNode(); return r.nodeType === 11 && r.host ? r.host : null; };
  const closest = (n, sel) => {
    for (; n; n = hostOf(n)) { const c = n.closest(sel); if (c) return c; }
    return null;
  };
  const byIds = (n, ids) => {
    const root = n.getRootNode();
    const find = (id) => (root.getElementById ? root.getElementById(id) : null) || doc.getElementById(id);
    return (ids || "").split(/\s+/).filter(Boolean).map((id) => text(find(id))).filter(Boolean).join(" ");
  };
  const labelOf = (n) => (n.getAttribute("aria-label") || byIds(n, n.getAttribute("aria-labelledby")) || "").trim();
  const headingIn = (n) => text(n.querySelector('h1,h2,h3,h4,h5,h6,[role="heading"],legend'));
  const box = closest(el, 'dialog, [role="dialog"], [role="alertdialog"], [aria-modal="true"]');
  const dialog = box ? (labelOf(box) || headingIn(box)) : "";
  const tag = el.tagName.toLowerCase(), type = (el.getAttribute("type") || "").toLowerCase();
  // The form it submits: a listed element's form owner (a form= attribute wins over the form
  // it sits in; none when it names no form), else the form it sits in. Its name, for the
  // context, is the form it is drawn in when it submits none.
  const listed = [HTMLButtonElement, HTMLInputElement, HTMLSelectElement, HTMLTextAreaElement,
                  HTMLFieldSetElement, HTMLOutputElement, HTMLObjectElement].some((c) => el instanceof c);
  const form = listed ? el.form : el.closest("form");
  const named = form || closest(el, "form");
  const formName = named ? (labelOf(named) || named.getAttribute("name") || headingIn(named) || "") : "";
  // The last heading before it in document order (an ancestor heading included), as
  // querySelectorAll(HEADING) finds it; in a shadow root, before it there, then before its
  // host. Walked back from the element first, a few dozen elements at most: a heading near
  // the element costs that walk, not a pass over the page.
  const HEADING = 'h1,h2,h3,h4,h5,h6,[role="heading"]';
  let heading = null, found = false, steps = 0, from = el;
  for (let n = el; n && !found && steps < 64; n = hostOf(n)) {
    const walker = doc.createTreeWalker(n.getRootNode(), NodeFilter.SHOW_ELEMENT);
    walker.currentNode = from = n;
    for (let p = walker.previousNode(); p && steps < 64; p = walker.previousNode(), steps++)
      if (p.matches(HEADING)) { heading = p; found = true; break; }
  }
  if (!found) {
    heading = null;
    for (let h = hostOf(from); h; h = hostOf(from)) from = h;
    for (const h of doc.querySelectorAll(HEADING)) {
      if (h.compareDocumentPosition(from) & Node.DOCUMENT_POSITION_FOLLOWING) heading = h; else break;
    }
  }
  const description = byIds(el, el.getAttribute("aria-describedby")) || el.getAttribute("aria-description")
    || el.getAttribute("title") || "";
  const out = { dialog, form: formName, heading: text(heading), description: description.slice(0, 200), tag, type };
  // What it shows, when an author-given name may say something else ("Save" over "Delete").
  if (el.hasAttribute("aria-label") || el.hasAttribute("aria-labelledby")) {
    const own = tag === "input" ? (["submit", "button", "reset"].includes(type) ? el.value : "") : el.innerText;
    out.shown = (own || "").replace(/\s+/g, " ").trim().slice(0, 200);
  }
  // A click in a shadow root reaches the link its host is in.
  const link = closest(el, "a[href], area[href]");
  if (link && !link.hasAttribute("download")) {
    const raw = link.getAttribute("href") || "";
    const url = link.href;
    const here = location.href.split("#")[0];
    const samePage = raw.trim().startsWith("#") || (url.split("#")[0] === here && url.includes("#"));
    if (!/^\s*javascript:/i.test(raw) && !samePage) out.link = url;
  }
  const submits = (n) => (n instanceof HTMLButtonElement && n.type === "submit") ||
                         (n instanceof HTMLInputElement && (n.type === "submit" || n.type === "image"));
  const submitter = submits(el);
  if (form) {
    const noText = ["checkbox", "radio", "button", "submit", "reset", "image", "file", "hidden", "range", "color"];
    out.textEntry = tag === "input" && !noText.includes(type);
    // Enter in a field submits through the form's default button, its first submit button
    // in tree order (form.elements leaves out image buttons): its formaction and
    // formmethod win over the form's, as a clicked button's do.
    let by = submitter ? el : null;
    if (!by && out.textEntry) {
      for (const c of form.elements) if (submits(c)) { by = c; break; }
      const images = [...form.querySelectorAll('input[type="image" i]')];
      if (form.id) images.push(...form.getRootNode().querySelectorAll('input[type="image" i][form]'));
      for (const c of images)
        if (c.form === form && (!by || by.compareDocumentPosition(c) & Node.DOCUMENT_POSITION_PRECEDING)) by = c;
    }
    const action = by && by.hasAttribute("formaction") ? by.formAction : form.action;
    const method = (by && by.hasAttribute("formmethod") ? by.formMethod : form.method).toLowerCase();
    out.formAction = action || location.href;
    out.formMethod = method === "post" ? "POST" : method === "dialog" ? "DIALOG" : "GET";
    out.submitter = submitter;
    out.autoSubmit = tag === "select" && (/submit/i.test(el.getAttribute("onchange") || "") ||
      el.hasAttribute("data-autosubmit") || form.hasAttribute("data-autosubmit"));
  }
  out.button = submitter || tag === "button" || el.getAttribute("role") === "button";
  return out;
}
"""

# The context of the focused element, for a key pressed without a ref.
# (In a shadow root: the element focused there, not its host.)
READ_FOCUSED_CONTEXT = (
    "() => { let el = document.activeElement;"
    " if (!el || el === document.body || el === document.documentElement) return null;"
    " while (el.shadowRoot && el.shadowRoot.activeElement) el = el.shadowRoot.activeElement;"
    " return (" + READ_CONTEXT.strip() + ")(el); }"
)

# The element check (CHECK_ELEMENT), and, when nothing changed, the element's context: one
# round trip for both, on the picked element or on an element handle.
# args: [since, point] (a pixel action's point: the element must be under it).
CHECK_PICKED_CONTEXT = _on_picked(
    "  const f = h.check(el, args[0], args[1]);\n  if (!f.problem) f.context = ("
    + READ_CONTEXT.strip()
    + ")(el);\n  return f;"
)
# The same, and, when nothing changed, the input guard armed on the element in the same
# round trip (``_guardscript``'s ``arm``): the arm the dispatch would otherwise make in a
# round trip of its own. args: [since, point, arm token, how long it holds (ms), mode].
# ``armed``: the arm's answer (``{x, y}`` for "pointer", ``{fallback}`` when not armed).
CHECK_ARM_CONTEXT = _on_picked(
    "  const f = h.check(el, args[0], args[1]);\n  if (f.problem) return f;\n  f.context = ("
    + READ_CONTEXT.strip()
    + ")(el);\n  f.armed = h.arm(el, args[0], args[4], args[2], args[3], args[1]);\n  return f;"
)
CHECK_ELEMENT_CONTEXT = (
    "(el, since) => { const f = ("
    + CHECK_ELEMENT.strip()
    + ")(el, since); if (!f.problem) f.context = ("
    + READ_CONTEXT.strip()
    + ")(el); return f; }"
)

_ENTER = frozenset({"Enter", "NumpadEnter"})
_SPACE = frozenset({" ", "Space"})


def _form_effect(facts: dict[str, Any], why: str) -> Effect | None:
    action, method = facts.get("formAction"), facts.get("formMethod", "GET")
    if not action or method == "DIALOG":
        return None
    return Effect(Verb.SUBMIT, str(action), why, str(method))


def _activates(kind: ActionKind, facts: dict[str, Any], key: str, text: str) -> bool:
    """Whether the action activates its element (a click, Enter or Space, a line typed ...)."""
    if kind in (ActionKind.CLICK, ActionKind.DOUBLE_CLICK):
        return True
    if kind in (ActionKind.PRESS, ActionKind.HOTKEY):
        if key in _ENTER:
            return bool(facts.get("link") or facts.get("button") or facts.get("textEntry"))
        return key in _SPACE and bool(facts.get("button"))
    if kind is ActionKind.TYPE:
        return ("\n" in text or "\r" in text) and bool(facts.get("textEntry"))
    return kind is ActionKind.SELECT and bool(facts.get("autoSubmit"))


def effects_of(
    kind: ActionKind, facts: dict[str, Any] | None, *, key: str = "", text: str = ""
) -> tuple[Verb, tuple[Effect, ...]]:
    """The verb an action is judged as, and its effects, from its element's facts.

    - a click on a link (or in one) is a submit on the element and a navigate to the link's
      URL; a click on a form's submit button is also a submit to the form's URL;
    - Enter on a link, a button or a text field of a form, and Space on a button, are a
      submit (with the link's or the form's URL as effect), not an input;
    - typing a line break into a text field of a form submits it;
    - a select whose change submits its form (an ``onchange`` that calls ``submit``, or
      ``data-autosubmit`` on it or its form: what a page says; a listener added by script
      is not visible here, and its load is judged by the navigation gate instead) is a
      submit to the form's URL.
    """
    if not facts or not _activates(kind, facts, key, text):
        return kind.verb, ()
    if facts.get("link"):
        return Verb.SUBMIT, (Effect(Verb.NAVIGATE, str(facts["link"]), "link"),)
    submits = facts.get("submitter") or (
        kind not in (ActionKind.CLICK, ActionKind.DOUBLE_CLICK) and (facts.get("textEntry") or facts.get("autoSubmit"))
    )
    effect = _form_effect(facts, "form") if submits else None
    return Verb.SUBMIT, (effect,) if effect is not None else ()


def shown_text(context: dict[str, Any], name: str) -> str:
    """The text an element shows (READ_CONTEXT's ``shown``), when it is not its name."""
    shown = context.get("shown")
    if not isinstance(shown, str) or " ".join(shown.split()).casefold() == " ".join(name.split()).casefold():
        return ""
    return shown[:200]
