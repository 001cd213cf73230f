"""The checkout and admin fixture apps over plain HTTP, and what every fixture app shares."""

from __future__ import annotations

import http.client
import json
import urllib.parse
import urllib.request
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest

from handrail._errors import HandrailError
from handrail.scenarios import ADMIN_INITIAL_STATE, AdminApp, CheckoutApp, FixtureApp

ORDER = {
    "name": "Ada Lovelace",
    "street": "12 Rue de la Paix",
    "city": "Lyon",
    "postal_code": "69001",
    "country": "France",
    "card": "4242 4242 4242 4242",
}


@pytest.fixture
def checkout() -> Iterator[CheckoutApp]:
    with CheckoutApp() as running:
        yield running


@pytest.fixture
def admin() -> Iterator[AdminApp]:
    with AdminApp() as running:
        yield running


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as response:
        return str(response.read().decode())


def _post(app: FixtureApp, path: str, form: dict[str, str] | None = None) -> http.client.HTTPResponse:
    parts = urlsplit(app.url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=5)
    try:
        body = urllib.parse.urlencode(form or {})
        conn.request("POST", path, body=body, headers={"Content-Type": "application/x-www-form-urlencoded"})
        response = conn.getresponse()
        response.read()
    finally:
        conn.close()
    return response


def _state(app: FixtureApp) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(_get(app.url + "/state"))
    return data


def test_checkout_form(checkout: CheckoutApp) -> None:
    page = _get(checkout.url + "/")
    for label in ("Full name", "Street address", "City", "Postal code", "Card number", "Country"):
        assert f'aria-label="{label}"' in page
    assert 'autocomplete="cc-number"' in page and "data-secret" in page
    assert ">Place order</button>" in page
    assert "Total: $101.00" in page


def test_checkout_order_then_pay(checkout: CheckoutApp) -> None:
    response = _post(checkout, "/order", ORDER)
    assert response.status == 303 and response.getheader("Location") == "/"
    page = _get(checkout.url + "/")
    assert ">Confirm payment of $101.00</button>" in page
    assert 'name="order" value="1001"' in page
    order = checkout.state()["orders"][0]
    assert order["status"] == "pending" and order["card_last4"] == "4242"
    assert order["total_cents"] == 10100

    assert _post(checkout, "/pay", {"order": "1001"}).getheader("Location") == "/receipt"
    assert "Payment received for order #1001: $101.00." in _get(checkout.url + "/receipt")
    state = _state(checkout)
    assert state["payments"] == 1 and state["charged_cents"] == 10100
    assert state["orders"][0]["status"] == "paid"
    assert state["requests"]["POST /pay"] == 1
    assert state["actions"] == ["order", "pay"]
    # A naive merchant: a second POST charges again (what the scenarios must prevent).
    _post(checkout, "/pay", {"order": "1001"})
    assert checkout.state()["payments"] == 2


def test_checkout_rejects_an_incomplete_form(checkout: CheckoutApp) -> None:
    response = _post(checkout, "/order", {**ORDER, "city": "", "country": "Mars"})
    assert response.getheader("Location") == "/?missing=city%2Ccountry"
    assert checkout.state()["orders"] == []
    assert _post(checkout, "/pay", {"order": "1001"}).status == 409


def test_checkout_edit_cancels_the_pending_order(checkout: CheckoutApp) -> None:
    _post(checkout, "/order", ORDER)
    _post(checkout, "/edit")
    assert checkout.state()["orders"][0]["status"] == "cancelled"
    assert ">Place order</button>" in _get(checkout.url + "/")
    assert _post(checkout, "/pay", {"order": "1001"}).status == 409


def test_checkout_drop_after_pay(checkout: CheckoutApp) -> None:
    _post(checkout, "/order", ORDER)
    checkout.drop_next("/pay", outage_s=0.0)
    with pytest.raises((http.client.RemoteDisconnected, ConnectionError)):
        _post(checkout, "/pay", {"order": "1001"})
    assert checkout.state()["payments"] == 1


def test_admin_page(admin: AdminApp) -> None:
    page = _get(admin.url + "/")
    for label in ("Reset password for alice", "Disable user bob", "Delete user alice", "Yes, delete alice"):
        assert f">{label}</button>" in page
    assert 'role="dialog"' in page and "hidden" in page


def test_admin_actions(admin: AdminApp) -> None:
    _post(admin, "/reset-password", {"user": "alice"})
    _post(admin, "/disable-user", {"user": "bob"})
    state = admin.state()
    assert state["users"]["alice"]["password_resets"] == 1
    assert state["users"]["bob"]["disabled"] is True
    page = _get(admin.url + "/")
    assert "Active, password reset sent (1)" in page
    assert ">Enable user bob</button>" in page
    assert _post(admin, "/delete-user", {"user": "alice"}).status == 303
    assert admin.state()["users"]["alice"]["deleted"] is True
    assert "Delete user alice" not in _get(admin.url + "/")
    assert _post(admin, "/reset-password", {"user": "alice"}).status == 409
    assert _post(admin, "/reset-password", {"user": "mallory"}).status == 409
    assert admin.state()["actions"][-1] == "reset-password mallory"


def test_admin_reset_restores_nested_state(admin: AdminApp) -> None:
    _post(admin, "/disable-user", {"user": "alice"})
    admin.reset()
    assert admin.state()["users"] == ADMIN_INITIAL_STATE["users"]
    assert ADMIN_INITIAL_STATE["users"]["alice"]["disabled"] is False  # never mutated


def test_initial_state_overrides_are_checked() -> None:
    with pytest.raises(HandrailError, match="unknown state field 'coupons'"):
        CheckoutApp({"coupons": []})
    with pytest.raises(HandrailError, match="must be int"):
        CheckoutApp({"payments": "1"})
    with CheckoutApp({"payments": 3}) as app:
        assert app.state()["payments"] == 3


def test_events_reach_the_page_stream(checkout: CheckoutApp) -> None:
    with pytest.raises(HandrailError):
        checkout.push_event("explode")
    assert checkout.push_open_modal() == 1
    assert checkout.push_rerender() == 1
    assert not checkout.wait_modal_opened(1, timeout=0.05)  # no page acknowledged it
    _post(checkout, "/__ack?event=open-modal")
    assert checkout.wait_modal_opened(1, timeout=1)
    assert checkout.state()["requests"] == {}  # /__ paths are not counted
