"""EvalRun spec loading: a valid spec becomes the expected RunSpec; every kind of bad input is one
SpecError that names the file, the line, the YAML path and what was expected."""

from __future__ import annotations

import re
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evalsi.core import SpecError, UserError, expand_home
from evalsi.specs import (
    BudgetSpec,
    DatasetSpec,
    EvaluatorEntry,
    RunSpec,
    TargetSpec,
    load_run_spec,
    parse_duration,
    run_spec_from_dict,
    run_spec_from_yaml,
)

ROOT = Path(__file__).resolve().parents[3]

FULL = """\
apiVersion: evals.si/v1alpha1
kind: EvalRun
metadata:
  name: support-nightly
  labels:
    evals.si/project: support
    since: 2024-01-01
spec:
  target:
    model:
      connector: openai-compatible
      baseUrl: http://127.0.0.1:8000/v1
      model: small-model
      params: {temperature: 0.2, max_tokens: 128}
      secretRef: env:OPENAI_API_KEY
    template: "Question: {{ input }}"
    system: Be brief.
    timeoutSeconds: 30
    requestsPerMinute: 600
    tokensPerMinute: 90000
  dataset:
    path: data/qa.jsonl
    fields: {input: question, reference: answer, output: ""}
    limit: 50
  trials: 3
  maxConcurrency: 32
  evaluators:
    - ref: exact-match
      params: {ignore_case: true}
    - ref: fuzzy-match
      name: fuzzy
  gates:
    - "metric('exact-match').mean >= 0.8"
  minCompletionRate: 0.9
  maxEvaluatorErrorRate: 0
  budget: {tokens: 200000, usd: 1.5, wallClock: 1h30m}
  seed: "12345678901"
"""


def write(directory: Path, text: str, name: str = "run.yaml") -> Path:
    path = directory / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


@pytest.fixture
def spec_dir(tmp_path: Path) -> Path:
    """A spec directory with its dataset beside it (data/qa.jsonl)."""
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "qa.jsonl").write_text('{"question": "q", "answer": "a"}\n')
    return tmp_path


def minimal(**spec_extra: object) -> dict[str, object]:
    spec: dict[str, object] = {
        "target": {"python": "os.path:basename"},
        "dataset": {"path": "data/qa.jsonl"},
        "evaluators": [{"ref": "exact-match"}],
    }
    spec.update(spec_extra)
    return {
        "apiVersion": "evals.si/v1alpha1",
        "kind": "EvalRun",
        "metadata": {"name": "m"},
        "spec": spec,
    }


def error_of(path: Path) -> str:
    with pytest.raises(SpecError) as info:
        load_run_spec(path)
    return str(info.value)


def replaced(old: str, new: str) -> str:
    assert old in FULL
    return FULL.replace(old, new, 1)


# --- a valid spec --------------------------------------------------------------------------


def test_a_full_spec_loads_to_the_expected_run_spec(
    spec_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write(spec_dir, FULL)
    monkeypatch.chdir("/")  # relative paths start at the spec file, not the current directory
    spec = load_run_spec(path)
    assert spec == RunSpec(
        name="support-nightly",
        target=TargetSpec(
            kind="model",
            connector="openai-compatible",
            base_url="http://127.0.0.1:8000/v1",
            model="small-model",
            params={"temperature": 0.2, "max_tokens": 128},
            secret_ref="env:OPENAI_API_KEY",
            template="Question: {{ input }}",
            system="Be brief.",
            timeout_s=30.0,
            requests_per_minute=600.0,
            tokens_per_minute=90000.0,
        ),
        dataset=DatasetSpec(
            source=str((spec_dir / "data" / "qa.jsonl").resolve()),
            fields={"input": "question", "reference": "answer", "output": None},
            limit=50,
        ),
        evaluators=(
            EvaluatorEntry("exact-match", {"ignore_case": True}),
            EvaluatorEntry("fuzzy-match", {}, "fuzzy"),
        ),
        trials=3,
        max_concurrency=32,
        gates=("metric('exact-match').mean >= 0.8",),
        min_completion_rate=0.9,
        max_evaluator_error_rate=0.0,
        budget=BudgetSpec(tokens=200000, usd=1.5, wall_clock_s=5400.0),
        seed=12345678901,
        # YAML dates stay the strings that were written (proto3 JSON has no date type).
        labels={"evals.si/project": "support", "since": "2024-01-01"},
        source=str(path.resolve()),
        raw=spec.raw,
    )
    assert spec.raw["spec"]["seed"] == "12345678901"  # the document as written
    assert spec.raw["metadata"]["labels"]["since"] == "2024-01-01"
    assert spec.spec_hash == load_run_spec(path).spec_hash
    assert (
        spec.spec_hash
        != load_run_spec(write(spec_dir, replaced("trials: 3", "trials: 4"))).spec_hash
    )


def test_defaults_fill_what_a_minimal_spec_leaves_out(spec_dir: Path) -> None:
    spec = run_spec_from_dict(minimal(), base_dir=spec_dir)
    assert (spec.trials, spec.max_concurrency, spec.seed) == (1, 16, 0)
    assert (spec.min_completion_rate, spec.max_evaluator_error_rate) == (0.8, 0.1)
    assert spec.budget is None
    assert spec.gates == ()
    assert spec.target == TargetSpec(kind="python", python="os.path:basename")
    assert spec.target.timeout_s == 60.0
    assert spec.dataset == DatasetSpec(source=str((spec_dir / "data" / "qa.jsonl").resolve()))
    assert spec.raw == minimal()


def test_an_http_target_and_an_anthropic_model(spec_dir: Path) -> None:
    http = {
        "http": {
            "url": "http://127.0.0.1:9000/svc/answer",
            "body": {"question": "{{input}}", "n": 1},
            "output": "$.answer",
            "headers": {"x-team": "qa"},
        }
    }
    spec = run_spec_from_dict(minimal(target=http), base_dir=spec_dir)
    assert spec.target.kind == "http"
    assert spec.target.http == {
        "url": "http://127.0.0.1:9000/svc/answer",
        "method": "POST",
        "body": {"question": "{{input}}", "n": 1},
        "output": "$.answer",
        "headers": {"x-team": "qa"},
    }
    model = {"model": {"connector": "anthropic", "model": "claude-x", "secretRef": "file:key.txt"}}
    spec = run_spec_from_dict(minimal(target=model), base_dir=spec_dir)
    assert spec.target.base_url == "https://api.anthropic.com"
    assert spec.target.secret_ref == f"file:{spec_dir / 'key.txt'}"


def test_hf_datasets_are_not_looked_up_on_disk(tmp_path: Path) -> None:
    doc = minimal(dataset={"path": "hf://openai/gsm8k/main@test"})
    assert (
        run_spec_from_dict(doc, base_dir=tmp_path).dataset.source == "hf://openai/gsm8k/main@test"
    )


def test_from_dict_resolves_against_the_source_directory(spec_dir: Path) -> None:
    spec = run_spec_from_dict(minimal(), source=str(spec_dir / "run.yaml"))
    assert spec.dataset.source == str((spec_dir / "data" / "qa.jsonl").resolve())
    assert spec.source == str(spec_dir / "run.yaml")


@pytest.mark.parametrize("name", ["run-stub.yaml", "run-python.yaml"])
def test_the_example_specs_load(name: str) -> None:
    spec = load_run_spec(ROOT / "examples" / name)
    assert spec.dataset.source == str(ROOT / "examples" / "qa.jsonl")
    assert spec.evaluators
    assert spec.gates


def test_the_python_example_target_answers() -> None:
    from evalsi.connectors import load_callable

    import_path = str(ROOT / "examples")
    sys.path.insert(0, import_path)
    try:
        answer = load_callable(load_run_spec(ROOT / "examples" / "run-python.yaml").target.python)
    finally:
        sys.path.remove(import_path)
    assert answer("What is 2 + 2?") == "4"
    assert answer("Unknown?") == "Unknown?"


def test_durations() -> None:
    assert parse_duration("30m") == 1800.0
    assert parse_duration("1h30m") == 5400.0
    assert parse_duration("1.5s") == 1.5
    assert parse_duration("250ms") == 0.25
    assert parse_duration("7d") == 7 * 86400.0
    for bad in ("", "30", "m", "1w", "30 m", "-5s", "1h 30m"):
        assert parse_duration(bad) is None, bad


# --- one SpecError per bad spec, naming file:line, path and expectation ---------------------


def test_an_unknown_field_at_depth_names_its_line_and_the_closest_field(spec_dir: Path) -> None:
    path = write(spec_dir, replaced("      baseUrl:", "      baseURL:"))
    assert error_of(path) == (
        f"{path}:12: spec.target.model.baseURL: unknown field 'baseURL' (did you mean baseUrl?)"
    )
    path = write(spec_dir, replaced("  maxConcurrency: 32", "  maxConcurency: 32"))
    assert error_of(path) == (
        f"{path}:26: spec.maxConcurency: unknown field 'maxConcurency' "
        "(did you mean maxConcurrency?)"
    )
    path = write(spec_dir, replaced("  trials: 3", "  max_concurrency: 3"))
    assert "did you mean maxConcurrency?" in error_of(path)


def test_an_unknown_field_without_a_close_match_lists_the_known_ones(spec_dir: Path) -> None:
    path = write(spec_dir, replaced("  seed:", "  outbox: []\n  seed:"))
    message = error_of(path)
    assert message.startswith(f"{path}:37: spec.outbox: unknown field 'outbox' (expected one of: ")
    assert "maxConcurrency" in message
    assert "target" in message


def test_a_wrong_type_says_what_was_expected(spec_dir: Path) -> None:
    path = write(spec_dir, replaced("trials: 3", "trials: three"))
    assert error_of(path) == f"{path}:25: spec.trials: expected an integer, got 'three'"
    path = write(spec_dir, replaced("      model: small-model", "      model: 1.5"))
    assert error_of(path).startswith(
        f"{path}:13: spec.target.model.model: expected a string, got 1.5 (quote it"
    )
    path = write(spec_dir, replaced("  evaluators:", "  gates2: x\n  evaluators:"))
    assert "unknown field 'gates2'" in error_of(path)
    path = write(spec_dir, replaced('  seed: "12345678901"', "  seed: 12a"))
    assert error_of(path) == f"{path}:37: spec.seed: expected an integer, got '12a'"


def test_a_missing_target_is_named(spec_dir: Path) -> None:
    doc = minimal()
    del doc["spec"]["target"]  # type: ignore[attr-defined]
    with pytest.raises(SpecError, match=r"^<spec>: spec: missing required field 'target'$"):
        run_spec_from_dict(doc, base_dir=spec_dir)
    path = write(
        spec_dir,
        """\
        apiVersion: evals.si/v1alpha1
        kind: EvalRun
        metadata: {name: m}
        spec:
          target: {template: "{{input}}"}
          dataset: {path: data/qa.jsonl}
          evaluators: [{ref: exact-match}]
        """,
    )
    assert (
        error_of(path)
        == f"{path}:5: spec.target: set one of model, python, http, agent (the system under test)"
    )


def test_two_target_kinds_are_refused(spec_dir: Path) -> None:
    path = write(spec_dir, replaced("    template:", "    python: app:answer\n    template:"))
    assert error_of(path) == (
        f"{path}:9: spec.target: set only one of model, python, http, agent (found model, python)"
    )


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("0", "expected a value >= 1, got 0"),
        ("-2", "expected a value >= 1, got -2"),
        ("1.5", "expected an integer, got 1.5"),
        ("yes", "expected an integer, got true"),
        ("", "expected an integer, got an empty value (null)"),
    ],
)
def test_bad_trials(spec_dir: Path, value: str, expected: str) -> None:
    path = write(spec_dir, replaced("trials: 3", f"trials: {value}"))
    assert error_of(path) == f"{path}:25: spec.trials: {expected}"


def test_max_concurrency_is_bounded(spec_dir: Path) -> None:
    path = write(spec_dir, replaced("maxConcurrency: 32", "maxConcurrency: 5000"))
    assert error_of(path) == f"{path}:26: spec.maxConcurrency: expected a value <= 4096, got 5000"


@pytest.mark.parametrize(
    "ref", ["sk-live-0123456789abcdef", "env:", "env:1BAD", "vault:kv/key", "file:"]
)
def test_a_bad_secret_ref_is_refused_without_echoing_it(spec_dir: Path, ref: str) -> None:
    path = write(spec_dir, replaced("env:OPENAI_API_KEY", f'"{ref}"'))
    message = error_of(path)
    assert message.startswith(
        f"{path}:15: spec.target.model.secretRef: expected env:NAME or file:PATH"
    )
    assert repr(ref) not in message
    assert "0123456789abcdef" not in message


def test_a_missing_dataset_is_resolved_relative_to_the_spec_directory(
    spec_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    nested = spec_dir / "specs"
    nested.mkdir()
    path = write(nested, FULL)  # data/qa.jsonl is not beside this one
    monkeypatch.chdir(spec_dir)  # ... though it is under the current directory
    expected_file = nested.resolve() / "data" / "qa.jsonl"
    assert error_of(path) == (
        f"{path}:22: spec.dataset.path: dataset not found: {expected_file} (a relative path "
        f"starts from the spec file's directory, {nested.resolve()})"
    )
    path = write(nested, replaced("path: data/qa.jsonl", "path: ../data/qa.jsonl"))
    assert load_run_spec(path).dataset.source == str((spec_dir / "data" / "qa.jsonl").resolve())


def test_other_dataset_schemes_are_refused(spec_dir: Path) -> None:
    path = write(spec_dir, replaced("path: data/qa.jsonl", "path: s3://bucket/qa.jsonl"))
    assert "spec.dataset.path: expected a file path or hf://OWNER/NAME" in error_of(path)


def test_an_unknown_record_part_in_fields(spec_dir: Path) -> None:
    path = write(spec_dir, replaced("{input: question,", "{inputs: question,"))
    assert error_of(path) == (
        f"{path}:23: spec.dataset.fields.inputs: unknown record part 'inputs' (did you mean input?)"
    )


@pytest.mark.parametrize(
    "text",
    [
        "apiVersion: [unclosed\n",
        "a: b\n  c: d\n",
        "key: 'unterminated\n",
        "\x1f\n",
        "a: 1\n---\nb: 2\n",
        "!!python/object:os.system x\n",
        "x: !!int notanumber\n",
    ],
)
def test_text_that_is_not_yaml(tmp_path: Path, text: str) -> None:
    path = write(tmp_path, text)
    assert re.match(rf"^{re.escape(str(path))}(:\d+)?: not valid YAML: ", error_of(path))


def test_yaml_errors_carry_the_line(tmp_path: Path) -> None:
    path = write(tmp_path, "apiVersion: evals.si/v1alpha1\nkind: EvalRun\nspec: [unclosed\n")
    assert error_of(path).startswith(f"{path}:4: not valid YAML: ")


def test_wrong_api_version_and_kind(spec_dir: Path) -> None:
    path = write(spec_dir, replaced("evals.si/v1alpha1", "evals.si/v1"))
    assert (
        error_of(path) == f"{path}:1: apiVersion: expected 'evals.si/v1alpha1', got 'evals.si/v1'"
    )
    path = write(spec_dir, replaced("kind: EvalRun", "kind: OnlineEvalPolicy"))
    assert error_of(path) == f"{path}:2: kind: expected 'EvalRun', got 'OnlineEvalPolicy'"


@pytest.mark.parametrize("text", ["", "\n\n", "# only a comment\n", "---\n", "~\n"])
def test_an_empty_file(tmp_path: Path, text: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(SpecError) as info:
        load_run_spec(path)
    assert str(info.value).startswith(f"{path}: the file is empty")
    assert "apiVersion: evals.si/v1alpha1" in str(info.value)


def test_a_document_that_is_not_a_mapping(tmp_path: Path) -> None:
    assert error_of(write(tmp_path, "- a\n- b\n")).endswith(": expected a mapping, got a list")
    assert (
        error_of(write(tmp_path, "hello\n"))
        == f"{tmp_path / 'run.yaml'}:1: expected a mapping, got 'hello'"
    )


def test_a_missing_or_unreadable_file(tmp_path: Path) -> None:
    assert (
        error_of(tmp_path / "nope.yaml")
        == f"{tmp_path / 'nope.yaml'}: cannot read the spec file (not found)"
    )
    assert "it is a directory" in error_of(tmp_path)
    (tmp_path / "bin.yaml").write_bytes(b"kind: \xff\xfe\n")
    assert "not UTF-8" in error_of(tmp_path / "bin.yaml")


def test_duplicate_keys_are_refused(spec_dir: Path) -> None:
    path = write(spec_dir, replaced("  seed:", "  trials: 5\n  seed:"))
    assert error_of(path) == f"{path}:37: spec.trials: duplicate key (first written on line 25)"


def test_every_problem_is_reported_in_one_error_sorted_by_line(spec_dir: Path) -> None:
    text = replaced("kind: EvalRun", "kind: Run")
    text = text.replace("trials: 3", "trials: 0").replace(
        "connector: openai-compatible", "connector: openai"
    )
    path = write(spec_dir, text)
    lines = error_of(path).splitlines()
    assert lines == [
        f"{path}:2: kind: expected 'EvalRun', got 'Run'",
        f"{path}:11: spec.target.model.connector: expected one of openai-compatible, "
        "anthropic, azure-openai, gemini, bedrock, scripted; got 'openai' "
        "(did you mean openai-compatible?)",
        f"{path}:25: spec.trials: expected a value >= 1, got 0",
    ]


_LABEL = 'metadata.labels["evals.si/project"]'
_SEMANTIC = [
    ("name: support-nightly", "name: Support_Nightly", "4: metadata.name: expected a DNS-1123"),
    ("http://127.0.0.1:8000/v1", "localhost:8000", "12: spec.target.model.baseUrl: expected an"),
    ("wallClock: 1h30m", "wallClock: 90 minutes", "36: spec.budget.wallClock: expected a positive"),
    ("wallClock: 1h30m", "wallClock: 0s", "36: spec.budget.wallClock: expected a positive"),
    ('"Question: {{ input }}"', '"{{ input "', "16: spec.target.template: not a valid Jinja2"),
    ("name: fuzzy", "name: exact-match", "30: spec.evaluators[1]: 'exact-match' is already"),
    ("limit: 50", "limit: '0'", "24: spec.dataset.limit: expected a value >= 1, got 0"),
    ("project: support", "project: yes", f"6: {_LABEL}: expected a string, got true (quote it"),
]


@pytest.mark.parametrize(("old", "new", "expected"), _SEMANTIC)
def test_semantic_checks(spec_dir: Path, old: str, new: str, expected: str) -> None:
    path = write(spec_dir, replaced(old, new))
    assert error_of(path).startswith(f"{path}:{expected}")


def test_python_refs_must_be_module_colon_function(spec_dir: Path) -> None:
    for ref in ("app.answer", "app:", ":f", "app:answer()", "my-app:f"):
        with pytest.raises(SpecError, match=r"spec\.target\.python: expected module:function"):
            run_spec_from_dict(minimal(target={"python": ref}), base_dir=spec_dir)


def test_http_target_checks(spec_dir: Path) -> None:
    def target(**http: object) -> dict[str, object]:
        return minimal(target={"http": {"url": "http://h/x", **http}})

    with pytest.raises(SpecError, match=r"spec\.target\.http\.body: a GET request carries no body"):
        run_spec_from_dict(target(method="get", body={"q": "{{input}}"}), base_dir=spec_dir)
    with pytest.raises(SpecError, match=r"spec\.target\.http\.output: output path 'answer' must"):
        run_spec_from_dict(target(output="answer"), base_dir=spec_dir)
    with pytest.raises(SpecError, match=r"spec\.target\.http\.method: expected one of GET"):
        run_spec_from_dict(target(method="FETCH"), base_dir=spec_dir)

    headers = {"authorization": "secret:file:token", "x-key": "secret:env:KEY", "x-team": "qa"}
    spec = run_spec_from_dict(target(headers=headers), base_dir=spec_dir)
    assert spec.target.http["headers"] == {
        "authorization": f"secret:file:{spec_dir / 'token'}",
        "x-key": "secret:env:KEY",
        "x-team": "qa",
    }
    with pytest.raises(SpecError) as info:
        run_spec_from_dict(target(headers={"x-key": "secret:sk-0123456789"}), base_dir=spec_dir)
    assert str(info.value).startswith(
        '<spec>: spec.target.http.headers["x-key"]: expected env:NAME or file:PATH'
    )
    assert "sk-0123456789" not in str(info.value)


def test_yaml_aliases_that_explode_or_recurse_are_refused(tmp_path: Path) -> None:
    bomb = ["a: &a [x, x, x, x, x, x, x, x, x, x]"]
    bomb += [
        f"{c}: &{c} [{', '.join(['*' + p] * 10)}]" for p, c in zip("abcdef", "bcdefg", strict=True)
    ]
    assert "more than 100000 values" in error_of(write(tmp_path, "\n".join(bomb) + "\n"))
    path = write(tmp_path, "a: &a [*a]\n")
    assert error_of(path) == f"{path}:1: a YAML alias refers to a value that contains it"


def test_values_json_cannot_hold_are_refused(spec_dir: Path) -> None:
    path = write(spec_dir, replaced("temperature: 0.2", "temperature: .nan"))
    assert error_of(path) == (
        f"{path}:14: spec.target.model.params.temperature: expected a finite number, "
        "got .nan or .inf"
    )
    path = write(spec_dir, replaced("max_tokens: 128", "max_tokens: 99999999999999999999999"))
    assert "integer is out of the 64-bit range" in error_of(path)
    path = write(spec_dir, replaced("{temperature: 0.2,", "{1: 0.2,"))
    assert "spec.target.model.params: the key 1 is not a string" in error_of(path)
    path = write(spec_dir, replaced("{temperature: 0.2,", "{blob: !!binary aGk=,"))
    assert "a bytes value is not allowed here" in error_of(path)


def test_anchors_and_merge_keys_work(spec_dir: Path) -> None:
    text = replaced("  evaluators:\n", "  x-common: &p {ignore_case: true}\n  evaluators:\n")
    assert "unknown field 'x-common'" in error_of(write(spec_dir, text))
    text = replaced("      params: {ignore_case: true}", "      params: &p {ignore_case: true}")
    text = text.replace(
        "      name: fuzzy", "      name: fuzzy\n      params: {<<: *p, threshold: 0.9}"
    )
    spec = load_run_spec(write(spec_dir, text))
    assert spec.evaluators[1].params == {"ignore_case": True, "threshold": 0.9}


# --- fuzz: any text is a RunSpec or a SpecError/UserError, never anything else ----------------

_YAMLISH = st.text(
    alphabet=st.sampled_from(list("abkindspecEvalRun:-{}[],'\"&*!|>#%@` \n\t0123.")), max_size=200
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_YAMLISH | st.text(max_size=200))
def test_arbitrary_text_never_raises_anything_but_user_errors(text: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "fuzz.yaml"
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        try:
            load_run_spec(path)
        except UserError as e:
            message = str(e)
        else:
            message = str(path)
        assert str(path) in message


_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)
_PATHS = [
    ("spec", "target"),
    ("spec", "target", "model"),
    ("spec", "dataset"),
    ("spec", "evaluators"),
    ("spec", "budget"),
    ("spec", "trials"),
    ("metadata",),
    ("spec",),
]


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(_PATHS), _VALUES)
def test_any_value_anywhere_in_a_valid_spec_is_a_spec_or_a_spec_error(
    where: tuple[str, ...], value: object
) -> None:
    doc = minimal(
        target={"model": {"connector": "anthropic", "model": "x"}}, dataset={"path": "qa.jsonl"}
    )
    node: dict[str, object] = doc
    for key in where[:-1]:
        node = node[key]  # type: ignore[assignment]
    node[where[-1]] = value
    try:
        run_spec_from_dict(doc, base_dir=ROOT / "examples")
    except SpecError as e:
        message = str(e)
    else:
        message = "<spec> loaded"
    assert message.startswith("<spec>")


def test_yaml_text_in_memory_names_its_source(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as info:
        run_spec_from_yaml("apiVersion: evals.si/v1alpha1\nkind: X\n", source="inline")
    assert str(info.value).splitlines() == [
        "inline:1: missing required field 'metadata'",
        "inline:1: missing required field 'spec'",
        "inline:2: kind: expected 'EvalRun', got 'X'",
    ]


NO_USER = "~no-such-user-evalsi"


def test_a_home_of_no_user_is_a_spec_error_at_its_field(tmp_path: Path) -> None:
    # pathlib raises a bare RuntimeError for ~user when there is no such user.
    with pytest.raises(SpecError) as e:
        run_spec_from_dict(minimal(dataset={"path": f"{NO_USER}/qa.jsonl"}), base_dir=tmp_path)
    assert f"spec.dataset.path: '{NO_USER}/qa.jsonl': {NO_USER} is not a home directory" in str(
        e.value
    )
    target = {"model": {"connector": "openai-compatible", "baseUrl": "http://127.0.0.1:1/v1",
                        "model": "m", "secretRef": f"file:{NO_USER}/key"}}  # fmt: skip
    with pytest.raises(SpecError, match=r"spec\.target\.model\.secretRef: .* is not a home"):
        run_spec_from_dict(minimal(target=target), base_dir=tmp_path)


def test_expand_home_expands_mine_and_names_an_unknown_user() -> None:
    assert expand_home("~/x") == Path.home() / "x"
    assert expand_home("a/~b") == Path("a/~b")
    with pytest.raises(UserError, match=f"{NO_USER} is not a home directory on this machine"):
        expand_home(f"{NO_USER}/data")
