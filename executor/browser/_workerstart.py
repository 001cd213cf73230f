"""Every dedicated worker starts with Handrail's worker guard as its very first code.

The gate's CDP session reaches a worker only after the worker's first task has run (a
worker is let go the moment Playwright attaches to it; ``_gate``), and a worker's first
task could open a WebTransport or a socket to another origin (measured), or make a worker
of its own that no session ever reaches. So the guard (``WORKER_SCRIPT``: no WebTransport,
sockets to the worker's own origin only, no workers of its own) is put in front of the
worker's source, where no code of the page's comes before it:

- ``new Worker(url)`` in a window or frame is the page script GUARDED_WORKERS (in the init
  script, before any page script; the global and the prototype's ``constructor`` both, as
  for the sockets). For a ``blob:`` or ``data:`` URL it reads the source itself, in the
  constructor's own call, and makes the worker of the guarded source: a new ``blob:`` URL
  (the same origin, the creator's), or a new ``data:`` URL (an opaque one, as before). A
  ``data:`` URL is decoded in place; a ``blob:`` URL's text was kept when the page made its
  Blob or File (or took a script response as a Blob: ``Blob``, ``File``,
  ``URL.createObjectURL`` and ``Response.prototype.blob`` are wrapped to keep it), since a
  request for it is what a content security policy's ``connect-src`` seldom allows (a
  ``connect-src 'self'`` refuses both). Only a Blob whose text was not kept (a slice, one
  from another window) is read by a synchronous request. What is kept only decides what
  runs after the guard: the worker's source is a string the wrapper holds, guard first.
- For an ``http(s):`` URL the wrapper tells the gate first (a synchronous request to
  REGISTER_PATH on the page's own origin, answered by the gate's route and never sent), so
  that the gate's route puts the guard in front of that script's response: the worker
  keeps its URL, so its relative URLs and ``location`` are what they were.
- The guard goes after the source's directive prologue (``"use strict"`` stays a
  directive) and on the same line (line numbers stay). A module worker's guard is a first
  ``import`` of a ``data:`` module: a module's imports are evaluated before its body, in
  order, so the guard's import is evaluated before every other. (A worker whose content
  security policy refuses ``data:`` scripts then fails to start: closed, not open.)
- The wrapper keeps its own copies of what it calls (``XMLHttpRequest``'s methods and
  getters, ``URL``, ``RegExp.prototype.exec`` ...), taken before any page script runs, and
  reads the URL and the options once, passing on what it read: a page that patches the
  prototypes, or hands in an object whose ``toString`` or ``type`` answers differently
  each time, changes nothing.

Anything the wrapper cannot do (a read that fails, a registration not answered) refuses the
worker with a ``SecurityError`` where it is made. A worker's own ``new Worker`` is taken
away (WORKER_SCRIPT): a nested worker's script is fetched with no route of the context's
(measured), so none could be guarded.
"""

from __future__ import annotations

import base64
import json
from urllib.parse import parse_qs, urljoin, urlsplit

import re2
from playwright.async_api import Error as PlaywrightError
from playwright.async_api import Route

from handrail.executor.browser._pagescript import WORKER_SCRIPT

REGISTER_PATH = "/__handrail__/worker-script"

# What may come before a script's first statement and stay there: a first line's hashbang,
# white space, comments, and the directive prologue's string literals. Only the first
# 64 KiB of a source are scanned: here by RE2 (linear-time: a page's script cannot stall
# the executor's loop), in the page by the same pattern (its alternatives start apart, so
# it backtracks little; a page that made it slow would slow only its own worker's start).
# White space and line terminators are JavaScript's, spelled out (``\s`` means less in
# RE2): a line comment ends at a carriage return or a line or paragraph separator as
# well, and what follows one is code, which must stay behind the guard.
_LINE_END = "\n\r\u2028\u2029"
_SPACE = "\t\v\f \u00a0\u1680\u2000-\u200a\u202f\u205f\u3000\ufeff"
PROLOGUE = (
    (
        r"^(?:#![^<END>]*)?(?:[<SPACE><END>]|//[^<END>]*|/\*[\s\S]*?\*/"
        r"|\"(?:\\[\s\S]|[^\"\\<END>])*\"[<SPACE>]*(?:;|[<END>]|$)"
        r"|'(?:\\[\s\S]|[^'\\<END>])*'[<SPACE>]*(?:;|[<END>]|$))*"
    )
    .replace("<SPACE>", _SPACE)
    .replace("<END>", _LINE_END)
)
_PROLOGUE = re2.compile(PROLOGUE)
_SCAN = 65_536

# Nothing outside a worker: a script that a page loads both as a worker and as its own
# script keeps its window's Worker (there is no document in a worker, and no code of the
# worker's has run before this).
CLASSIC_GUARD = "if (!self.document) { " + WORKER_SCRIPT + " }"
MODULE_GUARD = 'import "data:text/javascript;base64,' + base64.b64encode(CLASSIC_GUARD.encode()).decode("ascii") + '";'

# How many worker script URLs a context keeps. None is forgotten (a page could otherwise
# push its worker's URL out between the announcement and the script's request); past this,
# a page's new workers are refused.
_MOST = 4096


def guarded_source(source: str, module: bool) -> str:
    """``source`` with the worker guard in front of its first statement. A leading byte
    order mark is dropped, as the browser's UTF-8 decoding of a worker's script drops it
    (else the guard, in front of it, would end the directive prologue behind it)."""
    source = source.removeprefix("\ufeff")
    match = _PROLOGUE.match(source[:_SCAN])
    at = match.end() if match else 0
    return source[:at] + (MODULE_GUARD if module else CLASSIC_GUARD) + source[at:]


def _bare(url: str) -> str:
    """``url`` without its fragment (requests are made without one). Both sides are URLs
    as the browser serialized them, where a ``#`` can only start the fragment."""
    return url.partition("#")[0]


class WorkerScripts:
    """The gate's side: the URLs pages made workers of, and their responses, guarded.

    A URL stays a worker's script for the context's life: every script response for it gets
    the guard (which does nothing outside a worker), since which request is the worker's
    and which a page's own cannot be told apart here. Announced once as a module worker's,
    it keeps the module guard (an ``import``): a classic script then fails to parse, where
    a classic guard in front of a module would run after the module's imports.
    """

    def __init__(self) -> None:
        self._kinds: dict[str, bool] = {}  # URL -> is a module

    def note(self, url: str, module: bool) -> bool:
        """``url`` is a worker's script: its responses get the guard. False when the
        context keeps as many as it may (the worker is then refused)."""
        key = _bare(url)
        known = self._kinds.get(key)
        if known is None and len(self._kinds) >= _MOST:
            return False
        self._kinds[key] = bool(known) or module
        return True

    def module_of(self, url: str) -> bool | None:
        """Whether ``url`` is a module worker's script (False: a classic one; None: no
        worker's script that this context remembers)."""
        return self._kinds.get(_bare(url))

    def __len__(self) -> int:
        return len(self._kinds)

    async def answer(self, route: Route) -> bool:
        """Answer ``route`` when it is a registration or a worker's script; False when it is
        neither (the caller routes it as usual)."""
        request = route.request
        parts = urlsplit(request.url)
        if parts.path == REGISTER_PATH and not request.is_navigation_request():  # a document is judged
            query = parse_qs(parts.query)
            url, kind = query.get("u", [""])[0], query.get("t", [""])[0]
            if urlsplit(url).scheme not in ("http", "https") or kind not in ("classic", "module"):
                await route.fulfill(status=400, body="")
                return True
            await route.fulfill(status=204 if self.note(url, kind == "module") else 429, body="")
            return True
        if request.method != "GET" or request.resource_type != "script":
            return False
        module = self.module_of(request.url)
        if module is None:
            return False
        try:
            response = await route.fetch(max_redirects=0)
            location = response.headers.get("location", "")
            if 300 <= response.status < 400 and location:
                # The browser follows it, to a script that must be guarded as well.
                if not self.note(urljoin(request.url, location), module):
                    await route.abort("blockedbyclient")
                    return True
                await route.fulfill(response=response)
                return True
            body = await response.body()
        except PlaywrightError:
            await route.abort("connectionfailed")
            return True
        headers = {
            k: v
            for k, v in response.headers.items()
            if k.lower() not in ("content-length", "content-encoding", "transfer-encoding")
        }
        guarded = guarded_source(body.decode("utf-8", "replace"), module).encode()
        await route.fulfill(status=response.status, headers=headers, body=guarded)
        return True


# In every window and frame, before any page script (see the module's docstring).
GUARDED_WORKERS = (
    r"""(() => {
  const Native = self.Worker;
  if (typeof Native !== "function" || !self.document) return;
  const apply = Reflect.apply, construct = Reflect.construct, define = Object.defineProperty;
  const getter = (proto, name) => Object.getOwnPropertyDescriptor(proto, name).get;
  const NativeURL = URL, href = getter(URL.prototype, "href"), protocol = getter(URL.prototype, "protocol");
  const createObjectURL = URL.createObjectURL, revokeObjectURL = URL.revokeObjectURL;
  const NativeBlob = Blob, NativeFile = self.File, encode = encodeURIComponent;
  const XHR = XMLHttpRequest, open = XHR.prototype.open, send = XHR.prototype.send;
  const status = getter(XHR.prototype, "status"), text = getter(XHR.prototype, "responseText");
  const baseURI = getter(Node.prototype, "baseURI"), doc = document;
  const exec = RegExp.prototype.exec, slice = String.prototype.slice, toString = String;
  const home = self.location.origin;
  // Trusted Types: a page that requires them hands the constructor a TrustedScriptURL. Its
  // URL is read through the type's own toString (a page's patch of it is not asked), and
  // the page's object is what the constructor gets; the guard's own sources get a URL of
  // the guard's own policy, made when first needed.
  const factory = self.trustedTypes, TTF = self.TrustedTypePolicyFactory, TSU = self.TrustedScriptURL;
  const isScriptURL = TTF ? TTF.prototype.isScriptURL : null, createPolicy = TTF ? TTF.prototype.createPolicy : null;
  const trustedText = TSU ? TSU.prototype.toString : null;
  const createScriptURL = self.TrustedTypePolicy ? self.TrustedTypePolicy.prototype.createScriptURL : null;
  let policy = null;
  const trust = (url) => {
    if (policy === null) {
      try {
        policy = apply(createPolicy, factory, ["handrail-worker", { __proto__: null, createScriptURL: (u) => u }]);
      } catch (e) {
        throw refuse("the page's Trusted Types forbid the guard's policy (trusted-types handrail-worker)");
      }
    }
    return apply(createScriptURL, policy, [url]);
  };
  const PROLOGUE = new RegExp(PATTERN), SCAN = 65536, KEEP = 8 * 1024 * 1024;
  const CLASSIC = CLASSIC_GUARD, MODULE = MODULE_GUARD, REGISTER = REGISTER_PATH_JSON;
  const refuse = (why) => new DOMException("Handrail: " + why, "SecurityError");
  const wrap = (Original, trap) => {
    const Wrapped = new Proxy(Original, {
      construct(target, args, newTarget) { return trap(target, args, newTarget === Wrapped ? Original : newTarget); },
    });
    define(Original.prototype, "constructor", { value: Wrapped, writable: true, configurable: true });
    return Wrapped;
  };
  const get = (url) => {
    const x = new XHR();
    apply(open, x, ["GET", url, false]);
    apply(send, x, []);
    return x;
  };

  // The text of each Blob and File the page makes (and of each script response it takes as
  // a Blob), and of each blob: URL made of one, so that a worker's source is read without a
  // request (a content security policy's connect-src seldom allows blob: or data:). What
  // is kept only decides what the worker runs after the guard: the guard goes first anyway.
  const texts = new WeakMap(), byUrl = new Map();
  const textOf = (parts, options) => {
    if (parts === undefined || parts === null) return "";
    const type = options ? toString(options.type || "") : "";
    if (type && !/javascript|ecmascript|^text\//i.test(type)) return null;  // an image's bytes are no script
    if (options && options.endings === "native") return null;  // line endings converted: read it back instead
    const bytes = new TextDecoder();
    let out = "";
    for (const part of parts) {
      if (typeof part === "string") out += bytes.decode() + part;
      else if (part instanceof ArrayBuffer || ArrayBuffer.isView(part)) out += bytes.decode(part, { stream: true });
      else if (part instanceof NativeBlob) {
        const known = texts.get(part);
        if (typeof known !== "string") return null;
        out += bytes.decode() + known;
      } else out += bytes.decode() + toString(part);
      if (out.length > KEEP) return null;
    }
    return out + bytes.decode();
  };
  const keep = (blob, parts, options) => {
    let kept = null;
    try { kept = textOf(parts, options); } catch (e) { kept = null; }
    texts.set(blob, kept);
    return blob;
  };
  // The parts are iterated once (a generator's parts would be gone for a second reading).
  const made = (at) => (target, args, newTarget) => {
    const given = args[0], parts = given !== null && typeof given === "object" ? Array.from(given) : given;
    const passed = [parts];
    for (let i = 1; i < args.length; i++) passed.push(args[i]);
    return keep(construct(target, passed, newTarget), parts, args[at]);
  };
  self.Blob = wrap(NativeBlob, made(1));
  if (typeof NativeFile === "function") self.File = wrap(NativeFile, made(2));
  URL.createObjectURL = function (object) {
    const url = apply(createObjectURL, NativeURL, [object]);
    const known = texts.get(object);
    if (typeof known === "string") {
      byUrl.set(url, known);
      if (byUrl.size > 4096) byUrl.delete(byUrl.keys().next().value);
    }
    return url;
  };
  URL.revokeObjectURL = function (url) {
    byUrl.delete(toString(url));
    return apply(revokeObjectURL, NativeURL, [url]);
  };
  const responseBlob = Response.prototype.blob;
  Response.prototype.blob = async function () {
    let copy = null;
    try {
      const type = this.headers.get("content-type") || "";
      if (/javascript|ecmascript/i.test(type) && !this.bodyUsed) copy = this.clone();
    } catch (e) { copy = null; }
    const answer = await apply(responseBlob, this, []);
    if (copy !== null && answer.size <= KEEP) {
      try { texts.set(answer, new TextDecoder().decode(await copy.arrayBuffer())); } catch (e) { /* not kept */ }
    }
    return answer;
  };

  // -- the worker: its source, guarded ----------------------------------------------------
  const guarded = (source, module) => {
    const found = apply(exec, PROLOGUE, [apply(slice, source, [0, SCAN])]);
    const at = found ? found[0].length : 0;
    return apply(slice, source, [0, at]) + (module ? MODULE : CLASSIC) + apply(slice, source, [at]);
  };
  const dataText = (where) => {
    const comma = where.indexOf(",");
    if (comma < 0) return null;
    const meta = where.slice(5, comma), body = where.slice(comma + 1).split("#")[0];
    const raw = unescape(body);  // percent-decoded, one char per byte
    const binary = /;\s*base64\s*$/i.test(meta) ? atob(raw.replace(/[\t\n\f\r ]/g, "")) : raw;
    const bytes = new Uint8Array(binary.length);
    for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
    return new TextDecoder().decode(bytes);
  };
  const read = (scheme, where) => {
    let source = null;
    try { source = scheme === "data:" ? dataText(where) : byUrl.get(where); } catch (e) { source = null; }
    if (typeof source === "string") return source;
    const unread = "the worker's script could not be read (a synchronous read of it: sync-xhr allowed?)";
    let x;
    try { x = get(where); } catch (e) { throw refuse(unread); }
    if (apply(status, x, []) !== 200) throw refuse(unread);
    return apply(text, x, []);
  };
  const prepare = (raw, module) => {
    const trusted = isScriptURL !== null && factory && apply(isScriptURL, factory, [raw]) === true;
    const spec = trusted ? apply(trustedText, raw, []) : toString(raw);
    const given = trusted ? raw : spec;  // what the constructor gets when the source is not rebuilt
    let url;
    try { url = new NativeURL(spec, apply(baseURI, doc, [])); } catch (e) { return given; }  // the constructor throws
    const scheme = apply(protocol, url, []), where = apply(href, url, []);
    if (scheme === "blob:" || scheme === "data:") {
      const source = guarded(toString(read(scheme, where)), module);
      let made = "data:text/javascript;charset=utf-8," + encode(source);
      if (scheme === "blob:") {
        const blob = construct(NativeBlob, [[source], { __proto__: null, type: "text/javascript" }]);
        made = apply(createObjectURL, NativeURL, [blob]);
      }
      return trusted ? trust(made) : made;
    }
    if ((scheme === "http:" || scheme === "https:") && home !== "null") {
      let x;
      const ask = home + REGISTER + "?u=" + encode(where) + "&t=" + (module ? "module" : "classic");
      const unsaid = "the worker could not be announced (a synchronous request: sync-xhr and connect-src allowed?)";
      try { x = get(ask); } catch (e) { throw refuse(unsaid); }
      if (apply(status, x, []) !== 204) throw refuse(unsaid);
    }
    return given;
  };
  self.Worker = wrap(Native, (target, args, newTarget) => {
    // Each option read once, into an object with no prototype (no getter of the page's
    // can answer the constructor otherwise than it answered here).
    const given = args[1], options = { __proto__: null, type: "classic", credentials: "same-origin", name: "" };
    if (given !== undefined && given !== null) {
      const type = given.type, credentials = given.credentials, name = given.name;
      if (type !== undefined) options.type = toString(type);
      if (credentials !== undefined) options.credentials = toString(credentials);
      if (name !== undefined) options.name = toString(name);
    }
    const url = prepare(args[0], options.type === "module");
    return construct(target, [url, options], newTarget);
  });
})();
""".replace("PATTERN", json.dumps(PROLOGUE))
    .replace("CLASSIC_GUARD", json.dumps(CLASSIC_GUARD))
    .replace("MODULE_GUARD", json.dumps(MODULE_GUARD))
    .replace("REGISTER_PATH_JSON", json.dumps(REGISTER_PATH))
)
