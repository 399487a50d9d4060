"""The app under test in the MCP example: `answer` (today's version) and `answer_terse`, the
change a coding agent wants to try, which drops the unit from every other answer."""

from __future__ import annotations

FACTS = {
    "boiling point of water at sea level": "100 °C",
    "freezing point of water": "0 °C",
    "speed of light": "299,792 km/s",
    "height of Mount Everest": "8,849 m",
    "length of a marathon": "42.195 km",
    "mass of a proton": "1.673e-27 kg",
    "distance from the Earth to the Moon": "384,400 km",
    "speed of sound in air": "343 m/s",
}


def answer(question: str) -> str:
    return FACTS.get(question, "I don't know")


def answer_terse(question: str) -> str:
    full = answer(question)
    keys = list(FACTS)
    if question in keys and keys.index(question) % 2 == 0:
        return full.split(" ")[0]  # the number alone: no longer the reference
    return full
