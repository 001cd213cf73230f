from __future__ import annotations

import http.client
import json
import types
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest

import handrail.scenarios
from handrail._errors import HandrailError
from handrail.scenarios import FIXTURE_APPS, INITIAL_STATE, SubscriptionApp


@pytest.fixture
def app() -> Iterator[SubscriptionApp]:
    with SubscriptionApp() as running:
        yield running


def _get(url: str) -> tuple[int, str]:
    with urllib.request.urlopen(url, timeout=5) as response:
        return response.status, response.read().decode()


def _post(app: SubscriptionApp, path: str, body: bytes = b"") -> http.client.HTTPResponse:
    """POST without following redirects, so that the 303 itself is seen."""
    parts = urlsplit(app.url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=5)
    try:
        conn.request("POST", path, body=body, headers={"Content-Type": "application/x-www-form-urlencoded"})
        response = conn.getresponse()
        response.read()
    finally:
        conn.close()
    return response


def _state(app: SubscriptionApp) -> dict[str, Any]:
    status, text = _get(app.url + "/state")
    assert status == 200
    data: dict[str, Any] = json.loads(text)
    return data


def test_exported_members() -> None:
    public = {
        name
        for name, value in vars(handrail.scenarios).items()
        if not name.startswith("_") and name != "annotations" and not isinstance(value, types.ModuleType)
    }
    assert sorted(handrail.scenarios.__all__) == sorted(public)
    assert FIXTURE_APPS["subscription"] is SubscriptionApp
    assert sorted(FIXTURE_APPS) == ["admin", "checkout", "fetchshop", "plans", "subscription", "subscription-2fa"]


def test_start_returns_a_loopback_url(app: SubscriptionApp) -> None:
    assert app.url.startswith("http://127.0.0.1:")
    assert app.start() == app.url  # idempotent
    assert not app.url.endswith("/")


def test_account_page(app: SubscriptionApp) -> None:
    status, page = _get(app.url + "/")
    assert status == 200
    assert "<h1>Account</h1>" in page
    assert "Plan: Pro Monthly" in page
    assert "Renews on 2026-12-31" in page
    for name in ("Pause plan", "Turn off auto-renew", "Delete account"):
        assert f">{name}</button>" in page
    assert 'role="dialog"' in page
    assert 'aria-modal="true"' in page
    assert ">Accept 50% off</button>" in page
    assert ">No thanks, turn off renewal</button>" in page
    for action in ("/pause", "/cancel-renewal", "/accept-offer", "/delete-account"):
        assert f'<form method="post" action="{action}">' in page
    assert "window.__handrailFixture" in page
    assert "rerender" in page
    assert "openModal" in page
    assert app.state()["requests"] == {"GET /": 1}


def test_cancel_renewal(app: SubscriptionApp) -> None:
    response = _post(app, "/cancel-renewal")
    assert response.status == 303
    assert response.getheader("Location") == "/"

    state = app.state()
    assert state["auto_renew"] is False
    assert state["discount_accepted"] is False
    assert state["account_deleted"] is False
    assert state["requests"] == {"POST /cancel-renewal": 1}
    assert state["actions"] == ["cancel-renewal"]

    _, page = _get(app.url + "/")
    assert "Auto-renew is off; your plan stays active until 2026-12-31" in page
    assert "Renews on" not in page
    assert "Turn off auto-renew" not in page


@pytest.mark.parametrize(
    ("path", "key", "value"),
    [
        ("/pause", "paused", True),
        ("/accept-offer", "discount_accepted", True),
        ("/delete-account", "account_deleted", True),
    ],
)
def test_other_actions(app: SubscriptionApp, path: str, key: str, value: bool) -> None:
    assert _post(app, path).status == 303
    state = app.state()
    assert state[key] is value
    assert state["auto_renew"] is True
    assert state["requests"] == {f"POST {path}": 1}


def test_deleted_account_refuses_further_actions(app: SubscriptionApp) -> None:
    _post(app, "/delete-account")
    assert _post(app, "/cancel-renewal").status == 409
    state = app.state()
    assert state["auto_renew"] is True
    assert state["actions"] == ["delete-account", "cancel-renewal"]
    _, page = _get(app.url + "/")
    assert "deleted" in page
    assert "<button" not in page


def test_state_endpoint(app: SubscriptionApp) -> None:
    _post(app, "/cancel-renewal")
    _post(app, "/cancel-renewal")
    data = _state(app)
    assert data == {
        "plan": "Pro Monthly",
        "renews_on": "2026-12-31",
        "auto_renew": False,
        "paused": False,
        "discount_accepted": False,
        "account_deleted": False,
        "requests": {"POST /cancel-renewal": 2},
        "actions": ["cancel-renewal", "cancel-renewal"],
        "lost": {},
    }
    assert data == app.state()


def test_state_is_a_copy(app: SubscriptionApp) -> None:
    snapshot = app.state()
    snapshot["auto_renew"] = False
    snapshot["requests"]["POST /x"] = 9
    assert app.state()["auto_renew"] is True
    assert app.state()["requests"] == {}


def test_unknown_path_is_404(app: SubscriptionApp) -> None:
    assert _post(app, "/refund-everything").status == 404
    with pytest.raises(urllib.error.HTTPError) as caught:
        _get(app.url + "/nope")
    assert caught.value.code == 404
    caught.value.close()
    assert app.state()["auto_renew"] is True


def test_reset(app: SubscriptionApp) -> None:
    _post(app, "/cancel-renewal")
    _post(app, "/pause")
    app.reset()
    state = app.state()
    assert {k: state[k] for k in INITIAL_STATE} == dict(INITIAL_STATE)
    assert state["requests"] == {}
    assert state["actions"] == []

    _post(app, "/accept-offer")
    assert _post(app, "/__reset").status == 204
    assert app.state()["discount_accepted"] is False
    assert app.state()["requests"] == {}


def test_reset_with_overrides(app: SubscriptionApp) -> None:
    assert _post(app, "/__reset", json.dumps({"auto_renew": False}).encode()).status == 204
    assert app.state()["auto_renew"] is False
    assert _post(app, "/__reset", b'{"bogus": 1}').status == 400
    app.reset({"paused": True})
    assert app.state()["paused"] is True


def test_initial_state_is_checked() -> None:
    with pytest.raises(HandrailError, match="unknown state field 'colour'") as caught:
        SubscriptionApp({"colour": "red"})
    assert caught.value.reason == "INVALID_ARGUMENT"
    with pytest.raises(HandrailError, match="must be bool"):
        SubscriptionApp({"auto_renew": "no"})
    with SubscriptionApp({"auto_renew": False, "renews_on": "2027-01-31"}) as app:
        _, page = _get(app.url + "/")
        assert "your plan stays active until 2027-01-31" in page


def test_drop_next_loses_the_response_but_not_the_change(app: SubscriptionApp) -> None:
    app.drop_next("/cancel-renewal", outage_s=0.0)
    with pytest.raises((http.client.RemoteDisconnected, ConnectionError)):
        _post(app, "/cancel-renewal")

    state = app.state()
    assert state["auto_renew"] is False
    assert state["requests"] == {"POST /cancel-renewal": 1}

    # Only the next request is dropped; the server keeps serving.
    assert _post(app, "/cancel-renewal").status == 303
    assert app.state()["requests"] == {"POST /cancel-renewal": 2}


def test_drop_next_through_urllib(app: SubscriptionApp) -> None:
    app.drop_next("/accept-offer", outage_s=0.0)
    request = urllib.request.Request(app.url + "/accept-offer", data=b"", method="POST")
    with pytest.raises((urllib.error.URLError, http.client.HTTPException, ConnectionError)):
        urllib.request.urlopen(request, timeout=5)
    assert app.state()["discount_accepted"] is True


def test_drop_next_outage_cuts_off_resends(app: SubscriptionApp) -> None:
    app.drop_next("/cancel-renewal", outage_s=30.0)
    for _ in range(2):  # the submit, then what a browser would resend
        with pytest.raises((http.client.RemoteDisconnected, ConnectionError)):
            _post(app, "/cancel-renewal")
    state = app.state()
    assert state["auto_renew"] is False
    assert state["requests"] == {"POST /cancel-renewal": 1}
    assert state["actions"] == ["cancel-renewal"]
    assert state["lost"] == {"POST /cancel-renewal": 1}

    # Other paths are unaffected; reset ends the outage.
    assert _post(app, "/pause").status == 303
    app.reset()
    assert _post(app, "/cancel-renewal").status == 303
    assert app.state()["lost"] == {}


def test_stop_releases_the_port() -> None:
    app = SubscriptionApp()
    url = app.start()
    app.stop()
    app.stop()
    with pytest.raises(urllib.error.URLError):
        _get(url + "/")
