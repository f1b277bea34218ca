# One virtual environment, made on first use; every target installs what it needs.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
CODE := pimem_core pimem_plugins tests bench reliability
# Where the offline embedding model (and the torch environment that builds it) lives.
PIMEM_HOME ?= $(CURDIR)/.pimem-home
# `make bench BENCH_ARGS=--quick`: the smallest store of each part, in under five minutes;
# `BENCH_ARGS="--only scaling --workdir DIR"`: one part, on stores kept in DIR.
BENCH_ARGS ?=
BENCH_STAMP := $(VENV)/.installed-bench

# The pi adapter's Node packages: its dev tools (TypeScript, Node 22, pi 0.73) and pi 1.x.
ADAPTER := adapters/pi
NODE_STAMP := $(ADAPTER)/node_modules/.installed

.PHONY: venv node demo demo-cli test lint typecheck adapter model unit bench reliability clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[dev]'
	touch $@

venv: $(STAMP)

$(NODE_STAMP): $(ADAPTER)/package-lock.json $(ADAPTER)/e2e/pi-1/package-lock.json
	cd $(ADAPTER) && npm ci --no-audit --no-fund --loglevel=error
	cd $(ADAPTER)/e2e/pi-1 && npm ci --no-audit --no-fund --loglevel=error
	touch $@

node: $(NODE_STAMP)

demo: $(STAMP) model node  ## the real pi with pimem, two sessions, against a scripted local model
	PIMEM_HOME="$(PIMEM_HOME)" $(BIN)/python scripts/pi_demo.py

demo-cli: $(STAMP) model  ## a CLI walk-through on a temporary project
	PATH="$(CURDIR)/$(BIN):$$PATH" PIMEM_HOME="$(PIMEM_HOME)" bash scripts/demo.sh

lint: $(STAMP)
	$(BIN)/ruff check $(CODE)
	$(BIN)/ruff format --check $(CODE)

typecheck: $(STAMP)
	$(BIN)/mypy

adapter: $(NODE_STAMP)  ## type-check the pi adapter and run its unit tests (Node 22)
	cd $(ADAPTER) && npm run --silent check && npm test --silent

model: $(STAMP)  ## the offline embedding model; built once (about 1.5 min), then a no-op
	PIMEM_HOME="$(PIMEM_HOME)" $(BIN)/python -m pimem_core.offline_model

unit: $(STAMP) model node  ## the Python test suite, end-to-end tests with real pi included
	PIMEM_HOME="$(PIMEM_HOME)" $(BIN)/pytest

test: lint typecheck adapter unit  ## everything CI runs

$(BENCH_STAMP): $(STAMP)
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[dev,bench]'
	touch $@

bench: $(BENCH_STAMP) model node  ## the whole suite (latency, retrieval quality, cost against store size) into docs/benchmarks.md
	PIMEM_HOME="$(PIMEM_HOME)" $(BIN)/python -m bench $(BENCH_ARGS)

# `make reliability RELIABILITY_ARGS=--quick`: the reduced budgets CI runs, in about 2 minutes.
RELIABILITY_ARGS ?=
reliability: $(STAMP) model  ## concurrency, faults, fuzzing (>= 100,000 inputs) and safety, into docs/reliability.md (~25 min)
	PIMEM_HOME="$(PIMEM_HOME)" $(BIN)/python -m reliability $(RELIABILITY_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis $(ADAPTER)/node_modules $(ADAPTER)/e2e/pi-1/node_modules
