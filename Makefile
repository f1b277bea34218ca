# One virtual environment, made on first use; every target installs what it needs.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
CODE := pimem_core pimem_plugins tests bench reliability examples
# Example plugins and an agent that embeds pimem: real third-party-style distributions, each
# with its own tests.
EXAMPLES := examples/worktree-resolver examples/hello-command examples/embed-in-agent
# The offline embedding model lives in pimem's per-user data directory, shared with every
# pimem installed for this user; `make ... PIMEM_HOME=DIR` keeps it (and pimem's state) in DIR.
PIMEM_HOME ?=
export PIMEM_HOME
# `make bench BENCH_ARGS=--quick`: the smallest store of each part, in under five minutes;
# `BENCH_ARGS="--only scaling --workdir DIR"`: one part, on stores kept in DIR.
BENCH_ARGS ?=
BENCH_STAMP := $(VENV)/.installed-bench

# The pi adapter's Node packages: its dev tools (TypeScript, Node 22, pi 0.73) and pi 1.x.
ADAPTER := adapters/pi
NODE_STAMP := $(ADAPTER)/node_modules/.installed

.PHONY: venv node demo demo-cli test test-fast examples lint typecheck adapter model unit newcomer dist bench reliability clean

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
	$(BIN)/python scripts/pi_demo.py

demo-cli: $(STAMP) model  ## a CLI walk-through on a temporary project
	PATH="$(CURDIR)/$(BIN):$$PATH" bash scripts/demo.sh

lint: $(STAMP)
	$(BIN)/ruff check $(CODE)
	$(BIN)/ruff format --check $(CODE)

typecheck: $(STAMP)
	$(BIN)/mypy

adapter: $(NODE_STAMP)  ## type-check the pi adapter and run its unit tests (Node 22)
	cd $(ADAPTER) && npm run --silent check && npm test --silent

model: $(STAMP)  ## the offline embedding model; written once (a few seconds), then a no-op
	$(BIN)/python -m pimem_plugins.memsearch.offline_model

unit: $(STAMP) model node  ## the Python test suite, end-to-end tests with real pi included
	$(BIN)/pytest

# Two pytest-xdist workers a core (tests/conftest.py schedules them: most tests wait on child
# processes and sockets more than they compute), each `pimem` command of run_cli forked from a
# process that has imported numpy and co. already (tests/warm_cli.py).
TEST_WORKERS ?= $(shell echo $$(( 2 * $$(nproc 2>/dev/null || echo 1) )))
test-fast: $(STAMP) model  ## everything but the real-pi, memory-service and bench tests
	$(BIN)/pytest -q -m "not pi and not service and not bench" -n $(TEST_WORKERS) --warm-cli

# Part of `make unit`; alone: pimem's wheel in a fresh venv, a fresh HOME, `pimem setup pi`,
# then the real pi 0.73 and 1.x capture and recall (a few minutes, most of it the venv).
newcomer: $(STAMP) node  ## the newcomer walk: the wheel, `pimem setup pi`, the real pi
	$(BIN)/pytest tests/adapters/pi/test_pi_setup_walk.py

dist: $(STAMP)  ## pimem's wheel (the pi package inside) and sdist, into dist/
	$(BIN)/python -m hatchling build --directory dist

# Each example is installed from its directory (not editable) into the project's .venv, tested
# through its entry point, and uninstalled again: pimem's own suite expects only its plugins.
examples: $(STAMP)  ## install each example, run its own tests, uninstall it
	@for example in $(EXAMPLES); do \
		$(BIN)/pip install --quiet --disable-pip-version-check --no-deps --force-reinstall ./$$example || exit 1; \
		(cd $$example && $(CURDIR)/$(BIN)/pytest -q); status=$$?; \
		$(BIN)/pip uninstall --quiet --disable-pip-version-check --yes $$(sed -n 's/^name = "\(.*\)"/\1/p' $$example/pyproject.toml); \
		[ $$status -eq 0 ] || exit $$status; \
	done

test: lint typecheck adapter unit  ## everything CI runs
	$(MAKE) examples  # after the unit suite, which must not see an example installed

$(BENCH_STAMP): $(STAMP)
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[dev,bench]'
	touch $@

bench: $(BENCH_STAMP) model node  ## the whole suite (latency, retrieval quality, cost against store size) into docs/benchmarks.md
	$(BIN)/python -m bench $(BENCH_ARGS)

# `make reliability RELIABILITY_ARGS=--quick`: the reduced budgets CI runs, in about 2 minutes.
RELIABILITY_ARGS ?=
reliability: $(STAMP) model  ## concurrency, faults, fuzzing (>= 100,000 inputs) and safety, into docs/reliability.md (~25 min)
	$(BIN)/python -m reliability $(RELIABILITY_ARGS)

clean:
	rm -rf $(VENV) dist .pytest_cache .mypy_cache .ruff_cache .hypothesis $(ADAPTER)/node_modules $(ADAPTER)/e2e/pi-1/node_modules
