"""Golden vectors for ``bfcl-ast``: BFCL's own AST checker's verdicts on the gold calls of a
BFCL data directory and on systematic mutations of them (a parameter dropped, a wrong value,
a wrong type, an int for a float, a string re-cased and re-spaced, an extra parameter, a wrong
name, a dotted name called with ``_``, a call too many or too few, parallel calls reversed).

bfcl-eval cannot be installed beside evalsi (it pins numpy 1.26.4 and pulls every model SDK),
so this runs its checker module from an unpacked wheel, with the one import that drags the SDKs
in (``constants.model_config``, read only for the underscore-to-dot setting) replaced:

    pip download --no-deps bfcl-eval==2026.3.23 -d /tmp/w && unzip /tmp/w/*.whl -d /tmp/bfcl
    python tests/support/bfcl_golden.py --bfcl /tmp/bfcl --data examples/benchmarks/bfcl \\
        -o tests/unit/packs/bench/golden_bfcl_ast.jsonl

``--data /tmp/bfcl/bfcl_eval/data`` runs it over BFCL's own questions instead.
"""

from __future__ import annotations

import argparse
import copy
import json
import re
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

CATEGORIES = ("simple_python", "multiple", "parallel", "parallel_multiple", "live_simple",
              "live_multiple", "live_parallel", "live_parallel_multiple")  # fmt: skip


def _bfcl_checker(root: Path) -> Any:
    sys.path.insert(0, str(root))

    class Config:
        def __init__(self, flag: bool) -> None:
            self.underscore_to_dot = flag

    stub = types.ModuleType("bfcl_eval.constants.model_config")
    stub.MODEL_CONFIG_MAPPING = {"fc/dots": Config(True), "plain": Config(False)}  # type: ignore[attr-defined]
    sys.modules["bfcl_eval.constants.model_config"] = stub
    from bfcl_eval.constants.enums import Language  # type: ignore[import-not-found]
    from bfcl_eval.eval_checker.ast_eval import ast_checker  # type: ignore[import-not-found]

    return ast_checker.ast_checker, Language.PYTHON


def _pick(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            k: _pick(vs[0]) if isinstance(vs, list) else vs
            for k, vs in value.items()
            if not isinstance(vs, list) or (vs and vs[0] != "")
        }
    if isinstance(value, list):
        return [_pick(v) if isinstance(v, dict) else v for v in value]
    return value


def _wrong(value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return value + 7
    if isinstance(value, str):
        return value + " zz"
    if isinstance(value, list):
        return [*value, value[0]] if value else [1]
    if isinstance(value, dict):
        return {**value, "zz": 1}
    return None


def _retyped(value: Any) -> Any:
    return "x" if not isinstance(value, str) else 123


def mutations(gold: list[dict[str, Any]], dots: bool) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    def named(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{(n.replace(".", "_") if dots else n): a for n, a in c.items()} for c in calls]

    yield "gold", named(gold)
    yield "no-calls", []
    yield "one-too-many", named(gold + gold[:1])
    if len(gold) > 1:
        yield "reversed", named(gold[::-1])
        yield "one-missing", named(gold[:-1])
    for i, call in enumerate(gold):
        name, args = next(iter(call.items()))
        yield f"{i}:wrong-name", named([*gold[:i], {name + "_x": args}, *gold[i + 1 :]])
        if "." in name:
            other = name if dots else name.replace(".", "_")
            yield f"{i}:other-dots", [*named(gold[:i]), {other: args}, *named(gold[i + 1 :])]
        extra = {**args, "unexpected_param": 1}
        yield f"{i}:extra-param", named([*gold[:i], {name: extra}, *gold[i + 1 :]])
        for p, v in args.items():
            for label, new in (
                ("drop", None), ("wrong", _wrong(v)), ("retype", _retyped(v)),
                ("int-for-float", int(v) if type(v) is float and v == int(v) else None),
                ("respell", v.upper().replace("", " ").strip() if isinstance(v, str) else None),
            ):  # fmt: skip
                if label != "drop" and new is None:
                    continue
                changed = copy.deepcopy(args)
                if label == "drop":
                    changed.pop(p)
                else:
                    changed[p] = new
                yield f"{i}:{p}:{label}", named([*gold[:i], {name: changed}, *gold[i + 1 :]])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bfcl", type=Path, required=True, help="an unpacked bfcl-eval wheel")
    parser.add_argument(
        "--data", type=Path, required=True, help="BFCL_v4_*.json + possible_answer/"
    )
    parser.add_argument("-o", "--out", type=Path, required=True)
    parser.add_argument("--limit", type=int, default=0, help="questions per category (0: all)")
    args = parser.parse_args()
    checker, python = _bfcl_checker(args.bfcl)
    out = []
    for category in CATEGORIES:
        files = args.data.glob(f"BFCL_v*_{category}.json")
        for qfile in sorted(
            f for f in files if re.fullmatch(rf"BFCL_v\d+_{category}\.json", f.name)
        ):
            answers = {
                (a := json.loads(line))["id"]: a["ground_truth"]
                for line in (qfile.parent / "possible_answer" / qfile.name).read_text().splitlines()
                if line.strip()
            }
            questions = [json.loads(x) for x in qfile.read_text().splitlines() if x.strip()]
            for q in questions[: args.limit or None]:
                truth = answers[q["id"]]
                gold = [{n: _pick(a)} for call in truth for n, a in call.items()]
                for model, dots in (("fc/dots", True), ("plain", False)):
                    for label, calls in mutations(gold, dots):
                        try:
                            got = checker(q["function"], copy.deepcopy(calls), truth, python,
                                          category, model.replace("/", "_"))  # fmt: skip
                        except Exception as e:  # noqa: BLE001 - the reference crashed: recorded
                            got = {"valid": False, "error_type": f"crash:{type(e).__name__}"}
                        out.append({
                            "id": q["id"], "category": category, "case": label,
                            "underscore_to_dot": dots, "functions": q["function"],
                            "calls": calls,
                            "possible_answer": truth, "valid": got["valid"],
                            "error_type": "" if got["valid"] else got.get("error_type", ""),
                        })  # fmt: skip
    with args.out.open("w") as f:
        for row in out:
            f.write(json.dumps(row, default=list) + "\n")
    print(f"{len(out)} vectors, {sum(r['valid'] for r in out)} valid", file=sys.stderr)


if __name__ == "__main__":
    main()
