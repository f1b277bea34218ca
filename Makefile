# One virtual environment, made on first use; every target installs what it needs.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
CODE := pimem_core pimem_plugins tests bench
# Where the offline embedding model (and the torch environment that builds it) lives.
PIMEM_HOME ?= $(CURDIR)/.pimem-home
# `make bench BENCH_ARGS=--quick`: the 2,000-chunk store only, in a few minutes.
BENCH_ARGS ?=
BENCH_STAMP := $(VENV)/.installed-bench

.PHONY: venv demo test lint typecheck model unit bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[dev]'
	touch $@

venv: $(STAMP)

demo: $(STAMP) model  ## a CLI walk-through on a temporary project
	PATH="$(CURDIR)/$(BIN):$$PATH" PIMEM_HOME="$(PIMEM_HOME)" bash scripts/demo.sh

lint: $(STAMP)
	$(BIN)/ruff check $(CODE)
	$(BIN)/ruff format --check $(CODE)

typecheck: $(STAMP)
	$(BIN)/mypy

model: $(STAMP)  ## the offline embedding model; built once (about 1.5 min), then a no-op
	PIMEM_HOME="$(PIMEM_HOME)" $(BIN)/python -m pimem_core.offline_model

unit: $(STAMP) model  ## the test suite alone
	PIMEM_HOME="$(PIMEM_HOME)" $(BIN)/pytest

test: lint typecheck unit  ## everything CI runs

$(BENCH_STAMP): $(STAMP)
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[dev,bench]'
	touch $@

bench: $(BENCH_STAMP) model  ## latency against the memsearch CLI, into docs/benchmarks.md (~25 min on 2 CPUs)
	PIMEM_HOME="$(PIMEM_HOME)" $(BIN)/python -m bench $(BENCH_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
