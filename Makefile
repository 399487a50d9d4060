# One command sets up and runs the checks, one the tests. Both create .venv when needed.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: setup demo test check lint typecheck layers proto bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e ".[dev]"
	touch $(STAMP)

setup: $(STAMP)

## demo: grade the example dataset on the embedded default (SQLite in .evalsi/)
demo: setup
	$(BIN)/evalsi eval --data examples/qa.jsonl --evaluators exact-match,contains,json-valid

## test: the whole test suite (unit, integration, e2e)
test: setup
	$(BIN)/pytest -q -p no:cacheprovider

## check: lint, format, strict types, layering, generated code freshness
check: lint typecheck layers
	$(BIN)/python scripts/gen_proto.py --check
	$(BIN)/python scripts/gen_schema.py --check

lint: setup
	$(BIN)/ruff check src tests bench scripts
	$(BIN)/ruff format --check src tests bench scripts

typecheck: setup
	$(BIN)/mypy

layers: setup
	$(BIN)/lint-imports

proto: setup
	$(BIN)/python scripts/gen_proto.py

bench: setup
	$(BIN)/python bench/score_throughput.py

clean:
	rm -rf $(VENV) .evalsi .mypy_cache .ruff_cache .pytest_cache
