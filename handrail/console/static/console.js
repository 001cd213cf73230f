// The Handrail console's only script: live updates and the wheel. No build step.
(function () {
  "use strict";
  var csrf = (document.querySelector('meta[name="csrf-token"]') || {}).content || "";

  function post(url, data) {
    return fetch(url, {
      method: "POST", credentials: "same-origin",
      headers: {"Content-Type": "application/json", "X-CSRF-Token": csrf, "Accept": "application/json"},
      body: JSON.stringify(data)
    }).then(function (r) { return r.json().then(function (body) { body.httpStatus = r.status; return body; }); });
  }

  // -- the overview: re-rendered by the server whenever something changes -------------------
  var overview = document.getElementById("overview");
  if (overview && window.EventSource) {
    var events = new EventSource(overview.dataset.live);
    events.addEventListener("overview", function (e) { overview.innerHTML = e.data; overview.dataset.updated = Date.now(); });
  }
  var reloading = document.querySelector("[data-reload-on]");
  if (reloading && window.EventSource) {
    var first = true;
    new EventSource("/events").addEventListener("overview", function () {
      if (first) { first = false; return; }
      location.reload();
    });
  }

  // -- the session view: the live screen, the timeline and the wheel ------------------------
  var root = document.getElementById("session");
  if (!root) { return; }
  var sid = root.dataset.session, target = root.dataset.target;
  var img = document.getElementById("screen"), wrap = document.getElementById("screen-wrap");
  var status = document.getElementById("input-status");
  var shown = null, pending = null;  // the metadata of the frame on screen, and of the one decoding
  window.__console = {frames: 0, lastFrame: null, inputs: []};

  // Frames no wider than the screen shows them (fewer pixels to encode, send and decode).
  var shownWidth = Math.ceil((wrap.clientWidth || 1280) * (window.devicePixelRatio || 1));
  var live = new EventSource("/sessions/" + encodeURIComponent(sid) + "/live?w=" + shownWidth);
  live.addEventListener("frame", function (e) {
    var meta = JSON.parse(e.data);
    pending = meta;
    img.src = "data:" + meta.mime + ";base64," + meta.data;
  });
  img.addEventListener("load", function () {
    shown = pending;
    window.__console.frames += 1;
    window.__console.lastFrame = shown && {seq: shown.seq, at: shown.at};
    img.dispatchEvent(new CustomEvent("frame-shown", {detail: shown}));
    var waiting = document.getElementById("no-frame");
    if (waiting) { waiting.remove(); }
  });

  var timeline = document.getElementById("timeline");
  live.addEventListener("entry", function (e) {
    var item = JSON.parse(e.data);
    var li = document.createElement("li");
    li.textContent = item.line;
    li.className = (item.human ? "human " : "") + (item.outcome || "").toLowerCase();
    timeline.appendChild(li);
    while (timeline.children.length > 300) { timeline.removeChild(timeline.firstChild); }
    timeline.scrollTop = timeline.scrollHeight;
  });

  // A point of the image on screen, in the surface's pixels (CSS px of the page's viewport):
  // x = px * sw / iw / scale, y = (py * sh / ih - top) / scale, px, py in image pixels.
  function toSurface(event) {
    if (!shown) { return null; }
    var rect = img.getBoundingClientRect();
    var px = (event.clientX - rect.left) * shown.iw / rect.width;
    var py = (event.clientY - rect.top) * shown.ih / rect.height;
    var scale = shown.scale || 1;
    return {x: px * shown.sw / shown.iw / scale, y: (py * shown.sh / shown.ih - shown.top) / scale};
  }

  var queue = Promise.resolve();
  function send(input) {
    var epoch = Number(root.dataset.epoch || 0);
    if (!epoch) { status.textContent = "take the wheel first"; return queue; }
    input.epoch = epoch;
    input.id = "c" + Date.now().toString(36) + Math.random().toString(36).slice(2, 8);
    window.__console.inputs.push({kind: input.kind, sentAt: performance.timeOrigin + performance.now()});
    queue = queue.then(function () {
      return post("/sessions/" + encodeURIComponent(sid) + "/input", input).then(function (r) {
        status.textContent = r.error ? r.error : (r.outcome + " " + (r.reason || "") + " " + (r.message || ""));
        if (r.reason === "NO_LEASE" || r.reason === "STALE_EPOCH") { setHolding(0); }
      });
    });
    return queue;
  }

  function driving() { return Number(root.dataset.epoch || 0) > 0; }

  img.addEventListener("click", function (e) {
    if (!driving()) { return; }
    var p = toSurface(e);
    if (p) { send({kind: "click", x: p.x, y: p.y}); }
    wrap.focus();
  });
  img.addEventListener("dblclick", function (e) {
    if (!driving()) { return; }
    var p = toSurface(e);
    if (p) { send({kind: "double_click", x: p.x, y: p.y}); }
  });
  var wheel = null;
  img.addEventListener("wheel", function (e) {
    if (!driving()) { return; }
    e.preventDefault();
    var p = toSurface(e);
    if (!p) { return; }
    if (!wheel) {
      wheel = {kind: "scroll", x: p.x, y: p.y, dx: 0, dy: 0};
      setTimeout(function () { var w = wheel; wheel = null; send(w); }, 80);
    }
    wheel.dx += Math.round(e.deltaX); wheel.dy += Math.round(e.deltaY);
  }, {passive: false});

  // Keys: printable characters are typed (batched briefly), the others pressed by name.
  var typed = "", flush = null;
  function flushTyped() { flush = null; if (typed) { var t = typed; typed = ""; send({kind: "type", text: t}); } }
  wrap.addEventListener("keydown", function (e) {
    if (!driving()) { return; }
    e.preventDefault();
    var mods = (e.ctrlKey ? "Control+" : "") + (e.altKey ? "Alt+" : "") + (e.metaKey ? "Meta+" : "");
    if (e.key.length === 1 && !e.ctrlKey && !e.metaKey && !e.altKey) {
      typed += e.key;
      if (!flush) { flush = setTimeout(flushTyped, 40); }
      return;
    }
    if (["Shift", "Control", "Alt", "Meta"].indexOf(e.key) >= 0) { return; }
    flushTyped();
    send({kind: "press", key: mods + (e.key.length === 1 && mods.indexOf("Shift") < 0 ? e.key : e.key)});
  });
  document.getElementById("type-form").addEventListener("submit", function (e) {
    e.preventDefault();
    var field = document.getElementById("type-text");
    if (field.value) { send({kind: "type", text: field.value}); field.value = ""; }
  });

  function setHolding(epoch) {
    root.dataset.epoch = String(epoch || 0);
    var mine = epoch > 0;
    document.getElementById("take-over").hidden = mine;
    document.getElementById("hand-back").hidden = !mine;
    document.getElementById("hand-back-none").hidden = !mine;
    document.getElementById("type-form").hidden = !mine;
    wrap.classList.toggle("driving", mine);
    var state = document.getElementById("lease-state");
    state.className = mine ? "mine" : "";
    state.textContent = mine
      ? "You hold the wheel (epoch " + epoch + "): clicks, keys and scrolling on the screen go to the surface as your input."
      : "You do not hold the wheel. Watching only.";
  }
  document.getElementById("take-over").addEventListener("click", function () {
    post("/takeover", {target: target, note: "taken in the console"}).then(function (r) {
      if (r.error) { status.textContent = r.error; return; }
      setHolding(r.epoch);
      wrap.focus();
    });
  });
  ["hand-back", "hand-back-none"].forEach(function (id) {
    document.getElementById(id).addEventListener("click", function (e) {
      queue.then(function () {
        return post("/handback", {target: target, to: e.target.dataset.to}).then(function (r) {
          if (r.error) { status.textContent = r.error; return; }
          setHolding(0);
          document.getElementById("lease-state").textContent = "Handed back to " + (e.target.dataset.to || "no one") + " (epoch " + r.epoch + "). Watching only.";
        });
      });
    });
  });
})();
