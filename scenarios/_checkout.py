"""A shop's checkout, served locally: a form, then a payment confirmation step.

The cart holds two items. The form asks for a name, an address, a country (a select) and
a card number (an input marked secret: ``autocomplete="cc-number"``, ``data-secret``);
"Place order" creates a pending order, and the page then asks "Confirm payment of
$101.00". Confirming POSTs ``/pay``, which charges the order: a naive merchant, it charges
again for every POST that reaches it, so that a double submit shows in ``payments``.

Routes:
    ``GET /``          the cart and its form, or the confirmation step of a pending order.
    ``GET /receipt``   the latest payment.
    ``POST /order``    create a pending order from the form (missing fields: back to the
                       form with an error), then 303 to ``/``.
    ``POST /pay``      charge the pending order, then 303 to ``/receipt``.
    ``POST /edit``     cancel the pending order, then 303 to ``/``.

Plus what every fixture app has (``/state``, ``/__reset``, ``/__events``): see ``_base``.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from http import HTTPStatus
from typing import Any, ClassVar
from urllib.parse import urlencode

from ._base import FixtureApp, Reply, form_button

__all__ = ["CHECKOUT_INITIAL_STATE", "CheckoutApp"]

CHECKOUT_INITIAL_STATE: Mapping[str, Any] = {
    "items": [
        {"name": "Trail shoes", "price_cents": 8900, "qty": 1},
        {"name": "Wool socks", "price_cents": 1200, "qty": 1},
    ],
    "orders": [],
    "payments": 0,
    "charged_cents": 0,
}
"""The state a fresh checkout starts in; ``CheckoutApp(initial=...)`` overrides keys.

``orders`` entries: ``id``, ``name``, ``street``, ``city``, ``postal_code``, ``country``,
``card_last4``, ``total_cents``, ``status`` (``pending``, ``paid``, ``cancelled``).
"""

COUNTRIES = ("France", "Germany", "United Kingdom")

# form field -> label; every one is required.
_FIELDS: Mapping[str, str] = {
    "name": "Full name",
    "street": "Street address",
    "city": "City",
    "postal_code": "Postal code",
    "card": "Card number",
}
_FIRST_ORDER_ID = 1001


def dollars(cents: int) -> str:
    """``10100`` -> ``"$101.00"``."""
    return f"${cents // 100}.{cents % 100:02d}"


class CheckoutApp(FixtureApp):
    """The checkout fixture app on ``127.0.0.1`` and a free port.

    Args:
        initial: fields of ``CHECKOUT_INITIAL_STATE`` to start from instead.
        port: the port to listen on; 0 picks a free one.
    """

    name: ClassVar[str] = "checkout"
    initial_state: ClassVar[Mapping[str, Any]] = CHECKOUT_INITIAL_STATE
    template: ClassVar[str] = "checkout.html"

    def _total(self) -> int:
        return sum(int(i["price_cents"]) * int(i.get("qty", 1)) for i in self._state["items"])

    def _pending(self) -> dict[str, Any] | None:
        orders: list[dict[str, Any]] = self._state["orders"]
        return next((o for o in reversed(orders) if o["status"] == "pending"), None)

    # -- routes --------------------------------------------------------------------

    def _get_page(self, path: str) -> Reply | None:
        with self._lock:
            if path == "/":
                pending = self._pending()
                if pending is not None:
                    return Reply.page(self._confirm_page(pending))
                return Reply.page(self._cart_page())
            if path == "/receipt":
                return Reply.page(self._receipt_page())
        return None

    def _post(self, path: str, form: Mapping[str, str]) -> Reply | None:
        with self._lock:
            if path == "/order":
                return self._order(form)
            if path == "/pay":
                return self._pay(form)
            if path == "/edit":
                self._record_action("edit")
                pending = self._pending()
                if pending is not None:
                    pending["status"] = "cancelled"
                return Reply.redirect("/")
        return None

    def _order(self, form: Mapping[str, str]) -> Reply:
        self._record_action("order")
        missing = [key for key in _FIELDS if not form.get(key, "").strip()]
        if form.get("country", "") not in COUNTRIES:
            missing.append("country")
        if missing:
            return Reply.redirect("/?" + urlencode({"missing": ",".join(missing)}))
        if self._pending() is not None:
            return Reply.error(HTTPStatus.CONFLICT, "an order is already waiting for payment")
        orders: list[dict[str, Any]] = self._state["orders"]
        card = "".join(ch for ch in form["card"] if ch.isdigit())
        orders.append(
            {
                "id": _FIRST_ORDER_ID + len(orders),
                "name": form["name"].strip(),
                "street": form["street"].strip(),
                "city": form["city"].strip(),
                "postal_code": form["postal_code"].strip(),
                "country": form["country"],
                "card_last4": card[-4:],
                "total_cents": self._total(),
                "status": "pending",
            }
        )
        return Reply.redirect("/")

    def _pay(self, form: Mapping[str, str]) -> Reply:
        self._record_action("pay")
        orders: list[dict[str, Any]] = self._state["orders"]
        order = next((o for o in orders if str(o["id"]) == form.get("order", "")), None)
        if order is None or order["status"] == "cancelled":
            return Reply.error(HTTPStatus.CONFLICT, "no such order to pay")
        # A naive merchant: every POST that reaches it charges the card.
        order["status"] = "paid"
        self._state["payments"] += 1
        self._state["charged_cents"] += int(order["total_cents"])
        return Reply.redirect("/receipt")

    # -- pages ---------------------------------------------------------------------

    def _cart_page(self) -> str:
        esc = html.escape
        rows = "\n".join(
            f"<li>{esc(str(i['name']))} x {int(i.get('qty', 1))}: "
            f"{dollars(int(i['price_cents']) * int(i.get('qty', 1)))}</li>"
            for i in self._state["items"]
        )
        paid = [o for o in self._state["orders"] if o["status"] == "paid"]
        parts = [f'<ul id="items">\n{rows}\n</ul>', f"<p>Total: {dollars(self._total())}</p>"]
        if paid:
            parts.append(f'<p id="last-order">Order #{paid[-1]["id"]} is paid.</p>')
        fields = []
        for key, label in _FIELDS.items():
            extra = ' autocomplete="cc-number" inputmode="numeric" data-secret' if key == "card" else ""
            fields.append(
                f'<label>{esc(label)} <input type="text" name="{key}" aria-label="{esc(label)}"{extra}></label>'
            )
        options = "".join(f"<option>{esc(c)}</option>" for c in COUNTRIES)
        fields.insert(
            4,
            f'<label>Country <select name="country" aria-label="Country">'
            f'<option value="">Choose…</option>{options}</select></label>',
        )
        parts.append(
            '<form id="checkout" method="post" action="/order" data-rerender>\n'
            + "\n".join(fields)
            + '\n<button type="submit">Place order</button>\n</form>'
        )
        return self._page(title="Checkout", body="\n".join(parts))

    def _confirm_page(self, order: Mapping[str, Any]) -> str:
        esc = html.escape
        total = dollars(int(order["total_cents"]))
        body = (
            f'<p id="ship-to">Ship to {esc(order["name"])}, {esc(order["street"])}, '
            f"{esc(order['postal_code'])} {esc(order['city'])}, {esc(order['country'])}</p>\n"
            f"<p>Card ending {esc(order['card_last4'])}</p>\n"
            '<div id="confirm" data-rerender>\n'
            + form_button("/pay", f"Confirm payment of {total}", hidden={"order": str(order["id"])})
            + "\n"
            + form_button("/edit", "Edit order")
            + "\n</div>"
        )
        return self._page(title="Confirm your order", body=body)

    def _receipt_page(self) -> str:
        paid = [o for o in self._state["orders"] if o["status"] == "paid"]
        if not paid:
            body = '<p id="receipt">No payment yet.</p>'
        else:
            order = paid[-1]
            body = (
                f'<p id="receipt">Payment received for order #{order["id"]}: {dollars(int(order["total_cents"]))}.</p>'
            )
        return self._page(title="Receipt", body=body)
