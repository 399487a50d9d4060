"""The functions the example's executable questions call (BFCL's exec categories run the
model's calls and compare the results with the ground truth's)."""

import math


def gcd(a: int, b: int) -> int:
    return math.gcd(a, b)


def fahrenheit_to_celsius(f: float) -> float:
    return (f - 32) * 5 / 9


def word_stats(text: str) -> dict[str, int]:
    return {"words": len(text.split()), "letters": sum(c.isalpha() for c in text)}
