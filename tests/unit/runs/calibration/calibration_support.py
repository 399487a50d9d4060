"""Labelled data for the calibration tests, and the exact prompts the judge pack sends for it,
so that the stub LLM server can give each record the verdict a test chooses.

The stub answers by the exact text of the last user message; a prompt the script does not
know gets ``UNSCRIPTED``, which no judge evaluator accepts (the record ends as an ERROR), so a
drift between these prompts and the pack's makes the tests fail loudly.
"""

from __future__ import annotations

import json
from typing import Any

from evalsi.datasets import FieldMap, record_from_dict
from evalsi.packs.judge import LLM_JUDGE_TEMPLATE, PAIRWISE_TEMPLATE, REFERENCE_TEMPLATE
from evalsi.packs.judge._compare import _DEFAULT_PAIRWISE_CRITERIA
from evalsi.packs.judge._rubric import context_block

UNSCRIPTED = "I would rather not say."

# Questions with reference answers, a candidate answer, the human verdict and the judge's
# verdict (the judge errs on three: a wrong capital, a right answer phrased at length, and a
# partially right list).
QA: list[tuple[str, str, str, bool, bool]] = [
    ("What is the capital of Australia?", "Canberra", "Canberra", True, True),
    ("What is the capital of Australia?", "Canberra", "Sydney", False, True),
    ("How many legs does a spider have?", "8", "Eight.", True, True),
    ("How many legs does a spider have?", "8", "Six", False, False),
    ("Who wrote Pride and Prejudice?", "Jane Austen", "Jane Austen", True, True),
    ("Who wrote Pride and Prejudice?", "Jane Austen", "Charlotte Bronte", False, False),
    ("What is the boiling point of water at sea level in Celsius?", "100", "100 °C", True, True),
    (
        "What is the boiling point of water at sea level in Celsius?",
        "100",
        "At standard atmospheric pressure water boils at one hundred degrees Celsius.",
        True,
        False,
    ),
    ("What is 12 times 12?", "144", "144", True, True),
    ("What is 12 times 12?", "144", "124", False, False),
    ("Which planet is closest to the Sun?", "Mercury", "Mercury", True, True),
    ("Which planet is closest to the Sun?", "Mercury", "Venus", False, False),
    ("Name the primary colours of light.", "Red, green, blue", "Red, green and blue", True, True),
    ("Name the primary colours of light.", "Red, green, blue", "Red, yellow, blue", False, True),
    ("In which year did the Berlin Wall fall?", "1989", "1989", True, True),
    ("In which year did the Berlin Wall fall?", "1989", "1991", False, False),
]

RUBRIC = "Does the answer explain the concept correctly and clearly?"

# Explanations rated 1-5 by three people (None: not rated) and by the judge.
RATINGS: list[tuple[str, str, dict[str, int | None], int]] = [
    (
        "What is photosynthesis?",
        "Plants turn light, water and carbon dioxide into sugar and oxygen.",
        {"ann": 5, "bo": 4, "cy": 5},
        5,
    ),
    ("What is photosynthesis?", "It is when plants eat soil.", {"ann": 1, "bo": 1, "cy": 2}, 2),
    (
        "What is inflation?",
        "A general rise in prices that lowers what money can buy.",
        {"ann": 4, "bo": 5, "cy": None},
        4,
    ),
    (
        "What is inflation?",
        "Inflation is when balloons get bigger.",
        {"ann": 1, "bo": 2, "cy": 1},
        1,
    ),
    (
        "What is a prime number?",
        "A whole number above 1 divisible only by 1 and itself, like 2, 3, 5 or 7.",
        {"ann": 5, "bo": 5, "cy": 4},
        5,
    ),
    ("What is a prime number?", "An odd number.", {"ann": 2, "bo": 1, "cy": 2}, 3),
    (
        "What is gravity?",
        "The attraction between masses; it keeps us on the ground and the Moon in orbit around "
        "the Earth, and Newton and Einstein described it in different ways.",
        {"ann": 4, "bo": 4, "cy": 3},
        5,
    ),
    ("What is gravity?", "A force.", {"ann": 2, "bo": 3, "cy": None}, 2),
    (
        "What is DNA?",
        "The molecule that carries genetic instructions in living things.",
        {"ann": 4, "bo": 4, "cy": 5},
        4,
    ),
    ("What is DNA?", "A kind of protein found in muscles.", {"ann": 1, "bo": None, "cy": 1}, 2),
    (
        "What is an atom?",
        "The smallest unit of a chemical element, a nucleus with electrons around it.",
        {"ann": 5, "bo": 4, "cy": 4},
        4,
    ),
    ("What is an atom?", "Something very small.", {"ann": 2, "bo": 2, "cy": 3}, 3),
]

# Answer pairs (output, baseline), the human preference, and the judge's verdicts when the
# output is shown first (A = output) and when the baseline is (A = baseline).
PAIRS: list[tuple[str, str, str, str, str, str]] = [
    ("Why is the sky blue?", "Air scatters blue light more than red light.", "Because of the sea.",
     "output", "A", "B"),
    ("Why is the sky blue?", "It reflects space.",
     "Rayleigh scattering: short blue wavelengths scatter most in air.", "baseline", "B", "A"),
    ("What causes tides?", "The Moon's gravity pulls on the oceans.", "The wind.", "output", "A",
     "A"),
    ("What causes tides?", "Earthquakes.", "Mostly the Moon's gravity, and the Sun's a little.",
     "baseline", "A", "A"),
    ("What is a leap year?", "A year with 366 days, every fourth year or so.",
     "A year with 366 days.", "tie", "A", "A"),
    ("What is a leap year?", "A year of 365 days.", "A year with an extra day, 29 February.",
     "baseline", "B", "A"),
    ("What is a noun?", "A word naming a person, place or thing.", "A doing word.", "output", "A",
     "B"),
    ("What is a noun?", "A describing word.", "A word that names something.", "baseline", "B",
     "A"),
    ("What is erosion?", "Wearing away of rock and soil by water, wind or ice.", "Volcanoes.",
     "output", "A", "A"),
    ("What is erosion?", "The wearing away of land.", "The gradual wearing away of land.", "tie",
     "tie", "tie"),
]  # fmt: skip


def qa_rows() -> list[dict[str, Any]]:
    return [
        {"id": f"qa{i}", "input": q, "reference": ref, "output": out, "label": human}
        for i, (q, ref, out, human, _) in enumerate(QA)
    ]


def rating_rows() -> list[dict[str, Any]]:
    return [
        {"id": f"r{i}", "input": q, "output": out, "labels": labels}
        for i, (q, out, labels, _) in enumerate(RATINGS)
    ]


def pair_rows() -> list[dict[str, Any]]:
    return [
        {"id": f"p{i}", "input": q, "output": out, "baseline": base, "label": human}
        for i, (q, out, base, human, _, _) in enumerate(PAIRS)
    ]


def _record(row: dict[str, Any]) -> Any:
    return record_from_dict(row, FieldMap(), line=1, path="t.jsonl")


def reference_prompt(row: dict[str, Any]) -> str:
    record = _record(row)
    messages = REFERENCE_TEMPLATE.render(
        context=context_block(record, reference=False),
        reference=row["reference"],
        output=row["output"],
    )
    return messages[1].content


def llm_judge_prompt(row: dict[str, Any], rubric: str, scale: list[int] | None) -> str:
    low, high = (min(scale), max(scale)) if scale else (0, 1)
    meaning = "one of " + ", ".join(map(str, sorted(set(scale)))) if scale else ""
    messages = LLM_JUDGE_TEMPLATE.render(
        rubric=rubric,
        context=context_block(_record(row)),
        output=row["output"],
        low=str(low),
        high=str(high),
        meaning=meaning or "any number in between",
    )
    return messages[1].content


def pairwise_prompts(row: dict[str, Any]) -> tuple[str, str]:
    common = {
        "criteria": f"\n# Criteria\n{_DEFAULT_PAIRWISE_CRITERIA}\n",
        "context": context_block(_record(row), reference=False),
    }
    first = PAIRWISE_TEMPLATE.render(a=row["output"], b=row["baseline"], **common)
    second = PAIRWISE_TEMPLATE.render(a=row["baseline"], b=row["output"], **common)
    return first[1].content, second[1].content


def qa_answers(rows: list[dict[str, Any]] | None = None) -> dict[str, str]:
    rows = rows if rows is not None else qa_rows()
    return {
        reference_prompt(row): json.dumps({"correct": QA[i][4], "explanation": "checked"})
        for i, row in enumerate(rows)
    }


def rating_answers(scale: list[int]) -> dict[str, str]:
    return {
        llm_judge_prompt(row, RUBRIC, scale): json.dumps(
            {"score": RATINGS[i][3], "explanation": "."}
        )
        for i, row in enumerate(rating_rows())
    }


def pair_answers() -> dict[str, str]:
    out = {}
    for i, row in enumerate(pair_rows()):
        first, second = pairwise_prompts(row)
        out[first] = json.dumps({"preferred": PAIRS[i][4], "explanation": "."})
        out[second] = json.dumps({"preferred": PAIRS[i][5], "explanation": "."})
    return out


def judges_for(base_url: str, model: str = "judge-model") -> dict[str, Any]:
    return {
        "default": {
            "connector": "openai-compatible",
            "baseUrl": base_url,
            "model": model,
            "params": {"temperature": 0},
            "maxConcurrency": 4,
        }
    }


def write_jsonl(path: Any, rows: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
