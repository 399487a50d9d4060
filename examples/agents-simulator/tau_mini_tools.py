"""The tools of the τ-style ``tau-mini`` retail domain: functions over the task's ``db.json``
(``evalsi.benchmarks.tau_database``). A tool that raises changes nothing; its message is what
the agent reads."""

from __future__ import annotations

from typing import Any

from evalsi.benchmarks import tau_database


def get_user_details(user_id: str) -> dict[str, Any]:
    """The user's profile: name, address and order ids."""
    with tau_database() as db:
        if user_id not in db["users"]:
            raise ValueError(f"user {user_id} not found")
        return dict(db["users"][user_id])


def get_order_details(order_id: str) -> dict[str, Any]:
    """An order: its status, items and user."""
    with tau_database() as db:
        if order_id not in db["orders"]:
            raise ValueError(f"order {order_id} not found")
        return dict(db["orders"][order_id])


def cancel_pending_order(order_id: str, reason: str) -> dict[str, Any]:
    """Cancel a pending order; reason is 'no longer needed' or 'ordered by mistake'."""
    with tau_database() as db:
        order = db["orders"].get(order_id)
        if order is None:
            raise ValueError(f"order {order_id} not found")
        if order["status"] != "pending":
            raise ValueError(f"order {order_id} is {order['status']}, not pending")
        if reason not in ("no longer needed", "ordered by mistake"):
            raise ValueError("reason must be 'no longer needed' or 'ordered by mistake'")
        order["status"] = "cancelled"
        order["cancel_reason"] = reason
        return dict(order)


def modify_user_address(user_id: str, city: str, zip: str) -> dict[str, Any]:
    """Change the user's default address."""
    with tau_database() as db:
        user = db["users"].get(user_id)
        if user is None:
            raise ValueError(f"user {user_id} not found")
        user["address"] = {"city": city, "zip": zip}
        return dict(user)


TOOLS = ["get_user_details", "get_order_details", "cancel_pending_order", "modify_user_address"]
WRITES = frozenset({"cancel_pending_order", "modify_user_address"})
