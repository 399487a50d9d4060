# One command sets up and runs the checks, one the tests. Both create .venv when needed.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# The demo needs only the core install: no extras, no dev tools, no pip in the venv (a
# fraction of the time and disk), and no bytecode compiled ahead for modules it never imports:
# its first run writes the bytecode of what it imports, even where the environment sets
# PYTHONDONTWRITEBYTECODE (later runs then start several times faster). The dev install
# includes the core one, so it stamps both.
DEMO_STAMP := $(VENV)/.installed-core

.PHONY: setup demo test test-slow check lint typecheck layers proto bench clean

$(BIN)/python:
	$(PYTHON) -m venv --without-pip $(VENV)

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip --version >/dev/null 2>&1 || $(BIN)/python -m ensurepip >/dev/null
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/pip install -q -e ".[dev]"
	touch $(STAMP) $(DEMO_STAMP)

# uv installs the same packages from the same index several times faster than pip
# (docs/decisions/0009); it lives in .tools/, beside the venv, and pip does the work if uv
# cannot be had.
UV_VERSION := 0.13.9
UV := .tools/uv-$(UV_VERSION)/bin/uv

$(DEMO_STAMP): pyproject.toml | $(BIN)/python
	@[ -x $(UV) ] || $(PYTHON) -m pip install -q --disable-pip-version-check \
	  --target .tools/uv-$(UV_VERSION) uv==$(UV_VERSION) >/dev/null 2>&1 || true
	if [ -x $(UV) ]; then $(UV) pip install -q --python $(BIN)/python -e .; \
	else $(BIN)/python -m ensurepip >/dev/null && $(BIN)/pip install -q --no-compile -e .; fi
	touch $(DEMO_STAMP)

setup: $(STAMP)

## demo: grade the example dataset on the embedded default (SQLite in .evalsi/)
demo: $(DEMO_STAMP)
	PYTHONDONTWRITEBYTECODE= $(BIN)/evalsi eval --data examples/qa.jsonl --evaluators exact-match,contains,json-valid

## test: the whole test suite (unit, integration, e2e)
test: setup
	$(BIN)/python -m compileall -q src  # the CLI processes the tests start read it, not write it
	$(BIN)/pytest -q -p no:cacheprovider

## test-slow: the real small model lane (tests/slow): SmolLM2-135M on llama.cpp's server. The
## first run builds llama-cpp-python from source (about 15 min on 2 cores) into ~/.cache/evalsi/wheels.
test-slow: setup
	PYTHON=$(BIN)/python scripts/small_model.sh
	$(BIN)/pytest -q -p no:cacheprovider -m small_model tests/slow

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
	rm -rf $(VENV) .tools .evalsi .mypy_cache .ruff_cache .pytest_cache
