# The README's two commands: `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# make test's processes: each runs its own local stack (about 1 GB); the tests wait on I/O more than on the CPU
TEST_PROCESSES ?= 3
STAMP  := $(VENV)/.installed

.PHONY: install lock demo test docs lint typecheck unit stack-up stack-down clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# Dependencies come from the lock (every version and file hash pinned: deploy/locks/), then the project
# itself without resolving anything again. `make lock` re-resolves after pyproject.toml's dependencies change.
LOCKS  := deploy/locks
LOCK   := .lock-venv/bin/uv pip compile pyproject.toml --universal --python-version 3.11 --generate-hashes --quiet \
          --custom-compile-command "make lock"

$(STAMP): $(BIN)/python pyproject.toml $(LOCKS)/dev.txt
	$(BIN)/pip install --quiet --require-hashes -r $(LOCKS)/dev.txt
	$(BIN)/pip install --quiet --no-deps -e .
	touch $(STAMP)

lock:
	test -x .lock-venv/bin/uv || ($(PYTHON) -m venv .lock-venv && .lock-venv/bin/pip install --quiet uv)
	$(LOCK) -o $(LOCKS)/runtime.txt
	$(LOCK) --extra dev -o $(LOCKS)/dev.txt

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/erasure demo

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache --no-logo
	$(BIN)/pytest -q -p no:cacheprovider -n $(TEST_PROCESSES) --dist loadfile

# Regenerates the generated parts of docs/: the settings table (docs/configuration.md, checked by the tests)
# and the benchmark's results table (docs/benchmark.md, from bench/results-history.jsonl).
docs: $(STAMP)
	$(BIN)/python -m workers.settings_doc
	$(BIN)/python -m bench --write-docs

unit: $(STAMP)
	$(BIN)/pytest -q tests/unit

stack-up: $(STAMP)
	$(BIN)/erasure stack up

stack-down: $(STAMP)
	$(BIN)/erasure stack down

clean:
	rm -rf $(VENV) .lock-venv .mypy_cache .ruff_cache .pytest_cache
