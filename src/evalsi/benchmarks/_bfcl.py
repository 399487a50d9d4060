"""BFCL (the Berkeley Function Calling Leaderboard) questions as evalsi rows, graded by the
bench pack's ``bfcl-ast`` and ``bfcl-exec``.

BFCL keeps each category in two JSON-lines files of one name: ``BFCL_v4_<category>.json``
(``id``, ``question``: a list of turns, each a list of ``{role, content}`` messages,
``function``: the functions offered) and ``possible_answer/BFCL_v4_<category>.json`` (``id``,
``ground_truth``: for the AST categories a list of ``{name: {param: [allowed values]}}``, for
the executable ones a list of Python call strings with ``execution_result_type``). Older
releases name the files ``BFCL_v3_…``; both are read.

The single-turn Python categories are imported: ``simple`` (``simple_python``), ``multiple``,
``parallel``, ``parallel_multiple``, their ``live_`` variants, and ``exec_simple``,
``exec_multiple``, ``exec_parallel``, ``exec_parallel_multiple``. Multi-turn, irrelevance,
Java and JavaScript categories are not (their checkers need a state machine or a Java/JS type
parser).

Each row: ``input`` is the question's user text, ``metadata.functions`` BFCL's function
documents, ``metadata.tools`` the same as JSON-schema tools (dots in names as ``_``, as an
OpenAI-style API needs), ``metadata.category`` the family (``simple``, ``multiple``,
``parallel``, ``parallel_multiple``) for per-category figures, ``reference`` the possible
answer or ground truth, and ``metadata.known.gold`` a trajectory of the first allowed answer,
for the scripted model. ``with_gold=True`` also gives each row that trajectory as its own, so
``evalsi eval`` can prove the scorer on the answer key.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from evalsi.benchmarks._imported import (
    Imported,
    field_of,
    read_json_lines,
    unique_ids,
    write_rows,
)
from evalsi.core import UserError

AST_CATEGORIES = (
    "simple_python",
    "simple",
    "multiple",
    "parallel",
    "parallel_multiple",
    "live_simple",
    "live_multiple",
    "live_parallel",
    "live_parallel_multiple",
)
EXEC_CATEGORIES = ("exec_simple", "exec_multiple", "exec_parallel", "exec_parallel_multiple")
CATEGORIES = AST_CATEGORIES + EXEC_CATEGORIES
_FILE = re.compile(r"BFCL_v\d+_(?P<category>[a-z_]+)\.json")
_SCHEMA_TYPES = {"dict": "object", "float": "number", "tuple": "array", "any": "string"}


def import_bfcl(
    src: Path,
    out_dir: Path,
    *,
    categories: Sequence[str] | None = None,
    with_gold: bool = False,
) -> Imported:
    """Read BFCL's question and possible-answer files into ``out_dir/bfcl.jsonl``.

    Args:
        src: BFCL's data directory (``BFCL_v4_<category>.json`` files and ``possible_answer/``),
            or one question file (its answers in ``possible_answer/`` beside it).
        out_dir: where the dataset goes (created).
        categories: the categories to read (default: every supported one found).
        with_gold: give each row the gold calls as its trajectory (a check of the scorer).

    Raises:
        UserError: no question file, an unsupported category, a malformed line, a question
            without an answer, or two rows with one id (each names the file and the field).
    """
    files = _question_files(src, categories)
    rows: list[dict[str, Any]] = []
    for category, path in files:
        rows.extend(_rows(category, path, with_gold))
    unique_ids((r["id"] for r in rows), f"{src}: BFCL questions")
    dataset = out_dir / "bfcl.jsonl"
    return Imported(dataset, None, write_rows(dataset, rows))


def _question_files(src: Path, wanted: Sequence[str] | None) -> list[tuple[str, Path]]:
    for c in wanted or ():
        if c not in CATEGORIES:
            raise UserError(
                f"BFCL category {c!r} is not supported",
                hint=f"supported: {', '.join(CATEGORIES)}",
            )
    if src.is_file():
        match = _FILE.fullmatch(src.name)
        if match is None or match["category"] not in CATEGORIES:
            raise UserError(
                f"{src}: not a supported BFCL question file",
                hint=f"expected BFCL_v4_<category>.json, category one of {', '.join(CATEGORIES)}",
            )
        return [(match["category"], src)]
    if not src.is_dir():
        raise UserError(f"{src}: no such BFCL data directory or question file")
    found: list[tuple[str, Path]] = []
    for path in sorted(src.glob("BFCL_v*_*.json")):
        match = _FILE.fullmatch(path.name)
        if (
            match
            and match["category"] in CATEGORIES
            and (not wanted or match["category"] in wanted)
        ):
            found.append((match["category"], path))
    if not found:
        raise UserError(
            f"{src}: no BFCL question file of a supported category",
            hint=f"expected BFCL_v4_<category>.json for one of {', '.join(wanted or CATEGORIES)}",
        )
    return found


def _rows(category: str, path: Path, with_gold: bool) -> Iterable[dict[str, Any]]:
    answers_path = path.parent / "possible_answer" / path.name
    questions = read_json_lines(path, "BFCL question file")
    answers = {
        str(field_of(a, "id", str, f"{answers_path}: an answer")): a
        for a in read_json_lines(answers_path, "BFCL possible-answer file")
    }
    for n, q in enumerate(questions, 1):
        where = f"{path}: line {n}"
        qid = field_of(q, "id", str, where)
        where = f"{path}: question {qid!r}"
        functions = field_of(q, "function", list, where)
        for i, fn in enumerate(functions):
            _check_function(fn, f"{where}: function[{i}]")
        text = _question_text(field_of(q, "question", list, where), where)
        if qid not in answers:
            raise UserError(f"{answers_path}: no answer with id {qid!r} (asked in {path.name})")
        answer = answers[qid]
        truth = field_of(answer, "ground_truth", list, f"{answers_path}: answer {qid!r}")
        meta: dict[str, Any] = {
            "category": _family(category),
            "bfcl_category": category,
            "functions": functions,
            "tools": [_tool(fn) for fn in functions],
        }
        if category in EXEC_CATEGORIES:
            kinds = field_of(
                answer, "execution_result_type", list, f"{answers_path}: answer {qid!r}"
            )
            reference: dict[str, Any] = {"ground_truth": truth, "execution_result_type": kinds}
            gold = [_parse_truth(t, f"{answers_path}: answer {qid!r}") for t in truth]
        else:
            _check_answers(truth, f"{answers_path}: answer {qid!r}: ground_truth")
            reference = {"possible_answer": truth}
            gold = _gold_calls(truth)
        trajectory = _trajectory(gold)
        meta["known"] = {"gold": trajectory, "empty": {"steps": []}}
        row: dict[str, Any] = {"id": qid, "input": text, "reference": reference, "metadata": meta}
        if with_gold:
            row["trajectory"] = trajectory
        yield row


def _family(category: str) -> str:
    name = category.removeprefix("live_").removeprefix("exec_")
    return "simple" if name.startswith("simple") else name


def _question_text(turns: list[Any], where: str) -> str:
    if not turns or not isinstance(turns[0], list):
        raise UserError(
            f"{where}: the field 'question' must be a list of turns (lists of messages)"
        )
    if len(turns) > 1:
        raise UserError(f"{where}: {len(turns)} turns; only single-turn categories are imported")
    said = [
        m["content"]
        for m in turns[0]
        if isinstance(m, dict) and m.get("role") == "user" and isinstance(m.get("content"), str)
    ]
    if not said:
        raise UserError(f"{where}: the question has no user message")
    return "\n".join(said)


def _check_function(fn: Any, where: str) -> None:
    if not isinstance(fn, dict):
        raise UserError(f"{where}: expected an object, got {type(fn).__name__}")
    field_of(fn, "name", str, where)
    params = field_of(fn, "parameters", dict, where)
    props = field_of(params, "properties", dict, f"{where}.parameters")
    for name, prop in props.items():
        if not isinstance(prop, dict) or not isinstance(prop.get("type"), str):
            raise UserError(f"{where}.parameters.properties.{name}: needs a 'type'")


def _check_answers(truth: list[Any], where: str) -> None:
    for i, call in enumerate(truth):
        if not (isinstance(call, dict) and len(call) == 1):
            raise UserError(f"{where}[{i}]: expected {{function: {{param: [allowed values]}}}}")
        allowed = next(iter(call.values()))
        if not isinstance(allowed, dict) or not all(isinstance(v, list) for v in allowed.values()):
            raise UserError(f"{where}[{i}]: each parameter's allowed values must be a list")


def _gold_calls(truth: list[Mapping[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    calls = []
    for answer in truth:
        name, allowed = next(iter(answer.items()))
        calls.append((name, _pick(allowed)))
    return calls


def _pick(value: Any) -> Any:
    """The first allowed value, all the way down: a dict in an answer maps each key to its
    allowed values (an optional one left out when ``""`` comes first)."""
    if isinstance(value, dict):
        return {
            k: _pick(vs[0]) if isinstance(vs, list) else vs
            for k, vs in value.items()
            if not isinstance(vs, list) or (vs and vs[0] != "")
        }
    if isinstance(value, list):
        return [_pick(v) if isinstance(v, dict) else v for v in value]
    return value


def _parse_truth(text: Any, where: str) -> tuple[str, dict[str, Any]]:
    from evalsi.packs.bench import parse_call

    if not isinstance(text, str):
        raise UserError(f"{where}: each ground_truth entry must be a call as text")
    try:
        return parse_call(text)
    except ValueError as e:
        raise UserError(f"{where}: {e}") from None


def _trajectory(calls: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    steps = []
    for name, args in calls:
        tool = name.replace(".", "_")
        steps.append(
            {"kind": "tool_call", "name": tool, "tool_call": {"name": tool, "arguments": args}}
        )
    return {"steps": steps}


def _tool(fn: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "name": str(fn["name"]).replace(".", "_"),
        "description": fn.get("description", ""),
        "parameters": _schema(fn["parameters"]),
    }


def _schema(value: Any) -> Any:
    """BFCL's parameter types in JSON Schema's words (``dict`` → ``object``, ``float`` →
    ``number``, ``tuple`` → ``array``, ``any`` → ``string``)."""
    if isinstance(value, dict):
        out = {k: _schema(v) for k, v in value.items()}
        if isinstance(out.get("type"), str):
            out["type"] = _SCHEMA_TYPES.get(out["type"], out["type"])
        return out
    if isinstance(value, list):
        return [_schema(v) for v in value]
    return value
