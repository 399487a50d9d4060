"""`evalsi catalog list|show`: every core evaluator, documented, runnable examples."""

from __future__ import annotations

CORE = {
    "contains",
    "cost",
    "exact-match",
    "fuzzy-match",
    "json-schema",
    "json-valid",
    "latency",
    "length",
    "one-of",
    "regex",
    "starts-with",
    "tokens",
}


def test_catalog_list_has_the_twelve_core_evaluators(cli, json_out):
    out = json_out(cli("catalog", "list", "--format", "json"))
    core = [e for e in out["evaluators"] if e["pack"] == "core"]
    assert {e["name"] for e in core} == CORE
    assert len(core) == 12
    for e in core:
        assert e["ref"] == f"builtin/{e['name']}@{e['version']}"
        assert e["description"], e
        assert e["outputs"], e
        assert e["scope"] == "record"
    only_core = json_out(cli("catalog", "list", "--pack", "core", "--format", "json"))
    assert {e["name"] for e in only_core["evaluators"]} == CORE
    table = cli("catalog", "list")
    assert table.returncode == 0, table.stderr
    for name in CORE:
        assert name in table.stdout


def test_catalog_show_prints_params_and_example(cli):
    proc = cli("catalog", "show", "exact-match")
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    assert "builtin/exact-match@1.0.0" in text
    assert "requires: output, reference" in text
    assert "params:" in text
    for param in ("ignore_case", "ignore_punctuation", "normalize_whitespace", "trim"):
        assert param in text
    assert "example:" in text
    assert "evalsi eval --data" in text.split("example:", 1)[1]


def test_catalog_show_json_and_required_params(cli, json_out):
    out = json_out(cli("catalog", "show", "builtin/regex@1.0.0", "--format", "json"))
    assert out["ref"] == "builtin/regex@1.0.0"
    assert out["params_schema"]["required"] == ["pattern"]
    assert out["example"].startswith("evalsi eval")
    text = cli("catalog", "show", "regex").stdout
    assert "pattern: string (required)" in text


def test_catalog_show_unknown_exits_2_with_a_suggestion(cli, user_error):
    user_error(cli("catalog", "show", "nope"), "unknown evaluator 'nope'", "evalsi catalog list")
    user_error(cli("catalog", "show", "exact-mach"), "did you mean exact-match")
    user_error(cli("catalog", "show", "exact-match@9.9.9"), "no version 9.9.9", "1.0.0")


def test_catalog_packs_lists_every_pack_with_the_project_opt_in(cli, json_out, tmp_path):
    out = json_out(cli("catalog", "packs", "--format", "json"))
    by_name = {p["name"]: p for p in out["packs"]}
    assert {"core", "judge", "ml-classic", "ml-monitoring", "text", "rag", "safety"} <= set(by_name)
    assert [n for n, p in by_name.items() if p["enabled"]] == ["core"]
    assert by_name["text"]["extra"] == "text"
    assert set(CORE) == set(by_name["core"]["evaluators"])
    config = tmp_path / "project.yaml"
    config.write_text("evaluators:\n  packs: [core, ml-classic]\n", encoding="utf-8")
    out = json_out(cli("catalog", "packs", "--config", str(config), "--format", "json"))
    assert {p["name"] for p in out["packs"] if p["enabled"]} == {"core", "ml-classic"}
    table = cli("catalog", "packs")
    assert table.returncode == 0, table.stderr
    assert "evalsi[text]" in table.stdout


def test_catalog_packs_bad_config_and_unknown_pack_are_user_errors(cli, user_error, tmp_path):
    config = tmp_path / "project.yaml"
    config.write_text("evaluators:\n  packs: [cor]\n", encoding="utf-8")
    err = user_error(cli("catalog", "packs", "--config", str(config)))
    assert 'evaluators.packs[0]: unknown pack "cor"' in err
    err = user_error(cli("catalog", "list", "--pack", "nope"))
    assert "--pack: unknown pack 'nope' (known: agent, bench, code, core" in err
