"""The tool of the moving-customer example: sets the city in the task's profile.json."""

from __future__ import annotations

import json

from evalsi.agents import workspace


def set_city(city: str) -> str:
    """Set the customer's city."""
    (workspace() / "profile.json").write_text(json.dumps({"city": city}))
    return f"city set to {city}"
