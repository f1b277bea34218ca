# One virtual environment, made on first use; every target installs what it needs.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
CODE := pimem_core pimem_plugins tests

.PHONY: venv demo test lint typecheck unit clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[dev]'
	touch $@

venv: $(STAMP)

demo: $(STAMP)  ## a CLI walk-through on a temporary project
	PATH="$(CURDIR)/$(BIN):$$PATH" bash scripts/demo.sh

lint: $(STAMP)
	$(BIN)/ruff check $(CODE)
	$(BIN)/ruff format --check $(CODE)

typecheck: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP)  ## the test suite alone
	$(BIN)/pytest

test: lint typecheck unit  ## everything CI runs

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
