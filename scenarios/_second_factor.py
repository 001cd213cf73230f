"""The subscription page with a second factor: turning the renewal off needs a code.

Seed 004's walk-through: the agent declines the retention offer, and the merchant asks
for "the code sent to your phone" — something only the person has. The agent asks for a
person; the person types the code at the wheel (or changes their mind and keeps the
subscription), hands back, and the agent finishes.

Routes besides the subscription app's (``_subscription``):
    ``POST /cancel-renewal``  no longer turns the renewal off: it asks for the code
                              (``pending: cancel-renewal``), then 303 to ``/``, which shows
                              the verification form.
    ``POST /verify``          ``code``: the right code turns the renewal off ("Auto-renew
                              is off") and records it (``code_entered``); a wrong one is
                              counted (``failed_codes``) and asked for again.
    ``POST /keep``            the person keeps the subscription: nothing is pending, the
                              renewal stays on, ``kept`` is true.

The verification page records every key and click a person makes in it (``inputs`` in
the state, in the order the page saw them: ``kind`` key or click, ``trusted`` — the
event's ``isTrusted`` — ``key`` and ``target``), so that a test sees that input arrived as
a person's, not as a script's.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from http import HTTPStatus
from typing import Any, ClassVar

from ._base import Reply, form_button
from ._subscription import INITIAL_STATE, SubscriptionApp

__all__ = ["SECOND_FACTOR_CODE", "SECOND_FACTOR_STATE", "SecondFactorApp"]

SECOND_FACTOR_CODE = "493817"

SECOND_FACTOR_STATE: Mapping[str, Any] = {
    **INITIAL_STATE,
    "code": SECOND_FACTOR_CODE,
    "pending": "",
    "verified": False,
    "code_entered": "",
    "failed_codes": 0,
    "kept": False,
    "inputs": [],
}
"""The state a fresh app starts in (the subscription's, and the second factor's)."""

_VERIFY = """
<section id="verify" aria-label="Verification">
<h2>Confirm it is you</h2>
<p>Enter the code sent to your phone ending in 42.</p>
<form method="post" action="/verify" id="verify-form">
<label for="code">Code</label>
<input id="code" name="code" autocomplete="one-time-code" inputmode="numeric">
<button type="submit">Verify</button>
</form>
ERROR
KEEP
</section>
<script>
(function () {
  "use strict";
  var seq = 0;  // the reports race each other to the server: they are put back in order there
  function note(kind, event) {
    seq += 1;
    var target = (event.target && (event.target.id || event.target.tagName)) || "";
    var body = new URLSearchParams({seq: String(seq), kind: kind, trusted: String(event.isTrusted),
                                    key: event.key || "", target: target});
    fetch("/__input", {method: "POST", body: body, keepalive: true});
  }
  document.addEventListener("keydown", function (e) { note("key", e); }, true);
  document.addEventListener("click", function (e) { note("click", e); }, true);
})();
</script>
"""


class SecondFactorApp(SubscriptionApp):
    """The subscription app whose cancellation needs the code sent to the person's phone."""

    name: ClassVar[str] = "subscription-2fa"
    initial_state: ClassVar[Mapping[str, Any]] = SECOND_FACTOR_STATE

    def _post(self, path: str, form: Mapping[str, str]) -> Reply | None:
        if path == "/cancel-renewal":
            with self._lock:
                self._record_action("cancel-renewal")
                if self._state["auto_renew"]:
                    self._state["pending"] = "cancel-renewal"
            return Reply.redirect("/")
        if path == "/verify":
            code = form.get("code", "")
            with self._lock:
                self._record_action("verify")
                if not self._state["pending"]:
                    return Reply.error(HTTPStatus.CONFLICT, "nothing to verify")
                if code != self._state["code"]:
                    self._state["failed_codes"] += 1
                    return Reply.redirect("/?error=1")
                self._state.update(pending="", verified=True, code_entered=code, auto_renew=False)
            return Reply.redirect("/")
        if path == "/keep":
            with self._lock:
                self._record_action("keep")
                self._state.update(pending="", kept=True)
            return Reply.redirect("/")
        if path == "/__input":
            seq = int(form["seq"]) if form.get("seq", "").isdigit() else 0
            report = {
                "seq": seq,
                "kind": form.get("kind", ""),
                "trusted": form.get("trusted") == "true",
                "key": form.get("key", ""),
                "target": form.get("target", ""),
            }
            with self._lock:
                inputs = self._state["inputs"]
                inputs.append(report)
                inputs.sort(key=lambda r: r["seq"])  # in the order the page saw them
            return Reply(HTTPStatus.NO_CONTENT)
        return super()._post(path, form)

    def _get_page(self, path: str) -> Reply | None:
        if path != "/":
            return None
        with self._lock:
            pending = self._state["pending"]
            failed = self._state["failed_codes"]
        if not pending:
            return super()._get_page(path)
        error = '<p id="code-error" role="alert">That code is not right; try again.</p>' if failed else ""
        verify = _VERIFY.replace("ERROR", error).replace("KEEP", form_button("/keep", "Keep my subscription"))
        page = self._page(
            status=f'<p id="plan">Plan: {html.escape(INITIAL_STATE["plan"])}</p>', actions=verify, dialog=""
        )
        return Reply.page(page)
