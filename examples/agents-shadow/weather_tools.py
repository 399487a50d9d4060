"""The one tool of the weather agent: what the weather is in a city (a table, offline)."""

WEATHER = {
    "paris": "rain",
    "rome": "sun",
    "oslo": "snow",
    "cairo": "heat",
    "lima": "fog",
    "kyiv": "wind",
    "doha": "dust",
    "bern": "hail",
    "riga": "sleet",
    "rabat": "breeze",
    "quito": "drizzle",
    "hanoi": "monsoon",
}


def lookup(city: str) -> str:
    """The weather in a city, as "city: weather"."""
    key = city.strip().lower()
    return f"{key}: {WEATHER.get(key, 'unknown')}"
