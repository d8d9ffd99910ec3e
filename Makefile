# Two commands a new user needs: `make run` and `make test`. Both build .venv/ from
# requirements.lock on first use (about 3 minutes), then reuse it.

SHELL := /bin/bash
# pyenv reads .python-version (3.10.13); fall back to any python3.10 on PATH.
PYTHON ?= $(shell command -v python3.10 2>/dev/null || echo python3.10)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export TF_USE_LEGACY_KERAS := 1
export TF_CPP_MIN_LOG_LEVEL := 2
export PYTHONDONTWRITEBYTECODE := 1

.PHONY: run test test-fast lint format bench lock clean

$(STAMP): requirements.lock pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade "pip>=24,<27"
	$(BIN)/python -m pip install --quiet --no-deps -r requirements.lock
	$(BIN)/python -m pip install --quiet --quiet --no-deps -e .
	@touch $(STAMP)

run: $(STAMP)
	$(BIN)/python pipeline/run_local.py $(ARGS)

# Two workers, each taking whole test files (module fixtures are shared within a file): the
# suite took 13 min this way against 22 min in one process on 2 cores (2026-11-24).
XDIST ?= -n 2 --dist loadfile

# One layer alone: make test TESTS=tests/unit (or component, kubeflow, cli, e2e).
TESTS ?=

# The 20 slowest tests close the output: where the next cut of the suite's time is.
test: $(STAMP)
	$(BIN)/python -m pytest $(XDIST) --durations=20 $(PYTEST_ARGS) $(TESTS)

# The fast layer, to run while working: tests/fast/ and the layout checks, the tests that need no
# TensorFlow, Beam or TFX. The tf_free plugin refuses those imports, in the session and in the
# processes its tests start, so a test that needs them fails here instead of slowing it down.
# Two workers that steal single tests from each other (its files differ in length a lot): 87 s
# on 2 cores, 101 s in one process (2026-12-02; docs/testing.md).
# One file of it: make test-fast TESTS=tests/fast/test_tasks.py; in one process: FAST_XDIST=
FAST_TESTS := tests/fast tests/unit/test_layout.py
FAST_XDIST ?= -n 2 --dist worksteal

test-fast: $(STAMP)
	$(BIN)/python -m pytest $(FAST_XDIST) -p tests.support.tf_free $(PYTEST_ARGS) $(or $(TESTS),$(FAST_TESTS))

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

bench: $(STAMP)
	$(BIN)/python bench/run_all.py $(ARGS)

# Re-resolve the lock from pyproject.toml (needs the package registry).
lock:
	rm -rf /tmp/tfxkit-lock-venv && $(PYTHON) -m venv /tmp/tfxkit-lock-venv
	/tmp/tfxkit-lock-venv/bin/pip install --quiet --upgrade "pip>=24,<27"
	/tmp/tfxkit-lock-venv/bin/pip install --quiet ".[test]"
	/tmp/tfxkit-lock-venv/bin/pip freeze --all --exclude-editable | grep -vE '^(tfx-pipeline-kit|pip)==' > requirements.lock

clean:
	rm -rf $(VENV) output
