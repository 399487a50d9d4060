"""The helpdesk's function tools: a support desk for an online shop, over one state file.

Each task's workspace holds ``shop.json`` (its case's customers, orders, shipments, invoices and
tickets, plus the ``refunds`` ledger and the ``outbox`` of sent emails); the tools read and write
it through ``evalsi.agents.workspace()``, so every task starts from its own case and the end
state is what the agent left. A tool raises for a request the shop refuses (an unknown order, a
refund over what was paid): the agent gets the error and may recover.

What each tool may do is declared in the specs (``declare:``), not here: the policy decides from
the declaration, and an undeclared tool counts as irreversible.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from evalsi.agents import workspace

STATE = "shop.json"
TICKET_STATUSES = ("open", "escalated", "closed")
_lock = threading.Lock()  # one task's calls may run in parallel threads


def _read() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((workspace() / STATE).read_text())
    return data


@contextmanager
def _editing() -> Iterator[dict[str, Any]]:
    with _lock:
        shop = _read()
        yield shop
        (workspace() / STATE).write_text(json.dumps(shop, indent=2, sort_keys=True))


def _order(shop: dict[str, Any], order_id: str) -> dict[str, Any]:
    order = shop["orders"].get(order_id)
    if order is None:
        raise KeyError(f"no order {order_id}")
    return dict(order)


def find_customer(email: str) -> dict[str, Any]:
    """The customer with this email address, with the ids of their orders."""
    shop = _read()
    for cid, customer in shop["customers"].items():
        if customer["email"].lower() == email.strip().lower():
            orders = sorted(o for o, v in shop["orders"].items() if v["customer"] == cid)
            return {"id": cid, **customer, "orders": orders}
    raise KeyError(f"no customer with email {email}")


def get_order(order_id: str) -> dict[str, Any]:
    """An order: its customer, status (processing, shipped, delivered, cancelled), items,
    total, amount refunded so far and delivery address."""
    return {"id": order_id, **_order(_read(), order_id)}


def track_shipment(order_id: str) -> dict[str, Any]:
    """Where a shipped order is: carrier, status and expected delivery date."""
    shop = _read()
    tracking = _order(shop, order_id).get("tracking")
    if not tracking:
        raise ValueError(f"order {order_id} has not shipped yet")
    return {"order": order_id, "tracking": tracking, **shop["shipments"][tracking]}


def get_invoice(order_id: str) -> dict[str, Any]:
    """The invoice of an order: number, amount and the date it was issued."""
    shop = _read()
    _order(shop, order_id)
    invoice = shop.get("invoices", {}).get(order_id)
    if invoice is None:
        raise KeyError(f"no invoice for order {order_id}")
    return {"order": order_id, **invoice}


def read_ticket(ticket_id: str) -> dict[str, Any]:
    """A support ticket: the customer, the order it is about, its status and the message."""
    ticket = _read()["tickets"].get(ticket_id)
    if ticket is None:
        raise KeyError(f"no ticket {ticket_id}")
    return {"id": ticket_id, **ticket}


def update_address(order_id: str, address: str) -> dict[str, Any]:
    """Change the delivery address of an order that has not shipped yet."""
    with _editing() as shop:
        order = _order(shop, order_id)
        if order["status"] != "processing":
            raise ValueError(f"order {order_id} is {order['status']}: the address is fixed")
        shop["orders"][order_id]["address"] = address
        return {"id": order_id, "address": address}


def cancel_order(order_id: str, reason: str) -> dict[str, Any]:
    """Cancel an order that has not shipped yet (cannot be undone)."""
    with _editing() as shop:
        order = _order(shop, order_id)
        if order["status"] != "processing":
            raise ValueError(f"order {order_id} is {order['status']}: too late to cancel")
        shop["orders"][order_id]["status"] = "cancelled"
        shop["orders"][order_id]["cancel_reason"] = reason
        return {"id": order_id, "status": "cancelled"}


def issue_refund(order_id: str, amount: float, reason: str) -> dict[str, Any]:
    """Pay money back to the customer's card (cannot be undone)."""
    with _editing() as shop:
        order = _order(shop, order_id)
        left = round(order["total"] - order["refunded"], 2)
        if not 0 < amount <= left:
            raise ValueError(
                f"refund of {amount} refused: {left} of order {order_id} is refundable"
            )
        shop["orders"][order_id]["refunded"] = round(order["refunded"] + amount, 2)
        shop["refunds"].append({"order": order_id, "amount": amount, "reason": reason})
        return {"order": order_id, "refunded": amount}


def update_ticket(ticket_id: str, status: str, note: str) -> dict[str, Any]:
    """Set a ticket's status (open, escalated to a human, closed) with a note on why."""
    if status not in TICKET_STATUSES:
        raise ValueError(f"status must be one of {', '.join(TICKET_STATUSES)}, got {status!r}")
    with _editing() as shop:
        if ticket_id not in shop["tickets"]:
            raise KeyError(f"no ticket {ticket_id}")
        shop["tickets"][ticket_id]["status"] = status
        shop["tickets"][ticket_id]["note"] = note
        return {"id": ticket_id, "status": status}


def send_email(to: str, subject: str, body: str) -> dict[str, Any]:
    """Send an email (it leaves the shop: it cannot be recalled)."""
    with _editing() as shop:
        shop["outbox"].append({"to": to, "subject": subject, "body": body})
        return {"sent": True, "to": to, "subject": subject}


def delete_customer(customer_id: str) -> dict[str, Any]:
    """Erase a customer and their data."""
    with _editing() as shop:
        if shop["customers"].pop(customer_id, None) is None:
            raise KeyError(f"no customer {customer_id}")
        return {"deleted": customer_id}
