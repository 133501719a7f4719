# Two commands do all set-up on a fresh machine with Python 3.11+:
#   make demo   -- create .venv, install, run the agent chat workflow on local disk (offline)
#   make test   -- create .venv, install with every extra, lint, run the whole suite
#   make test-slow -- the long fault walks and multi-process runs (CI runs both)
#   make test-upsonic -- the Upsonic adapter driven by the real upsonic, in .venv-upsonic (test-slow runs it too)
#   make lint   -- ruff on src/, tests/, workflows/ and benchmarks/, pyright on src/ (the tools come with the test extra)
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test test-slow test-upsonic upsonic-venv lint stress bench clean

$(BIN)/python:
	$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "Python 3.11+ is required"'
	$(PYTHON) -m venv $(VENV)

demo: $(BIN)/python
	$(BIN)/python -m pip install -q -e .
	$(BIN)/python workflows/02_agent_chat.py

test: lint
	$(BIN)/python -m pytest -m "not slow"

# The long walks (a fault at every storage call), multi-process and load runs; .ci/run runs these too.
test-slow: $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[s3,gcs,test]'
	$(BIN)/python -m pytest -m slow

lint: $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[s3,gcs,test]'
	$(BIN)/ruff check src tests workflows benchmarks
	$(BIN)/ruff format --check src tests workflows benchmarks
	$(BIN)/pyright --pythonpath $(BIN)/python

# Upsonic pins protobuf<6 and flyte needs protobuf>=6.30, so no resolver installs both: the real-Upsonic
# test runs in .venv-upsonic, made once from this package with the upsonic-runtime extra (Upsonic's other
# requirements), then upsonic itself without its dependencies. tests/adapters/test_adapter_upsonic.py calls this.
UPSONIC := upsonic>=0.77,<0.78
UPSONIC_VENV := .venv-upsonic

upsonic-venv: $(UPSONIC_VENV)/.ready

$(UPSONIC_VENV)/.ready: pyproject.toml
	$(PYTHON) -m venv --clear $(UPSONIC_VENV)
	$(UPSONIC_VENV)/bin/python -m pip install -q -e '.[s3,upsonic-runtime]'
	$(UPSONIC_VENV)/bin/python -m pip install -q --no-deps '$(UPSONIC)'
	$(UPSONIC_VENV)/bin/python -c 'import upsonic.storage.base, flyteplugins_memory.adapters.upsonic'
	touch $@

test-upsonic: upsonic-venv $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[s3,gcs,test]'
	$(BIN)/python -m pytest tests/adapters/test_adapter_upsonic.py

# The reliability suite at the large budgets of docs/reliability.md; figures land in reports/.
stress: $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[s3,gcs,test]'
	FLYTEPLUGINS_MEMORY_STRESS=1 FLYTEPLUGINS_MEMORY_REPORT_DIR=reports $(BIN)/python -m pytest -q \
		tests/reliability/test_model.py tests/reliability/test_faults.py tests/reliability/test_multiprocess.py \
		tests/reliability/test_hostile.py tests/reliability/test_load.py

bench: $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[s3,gcs,test]'
	$(BIN)/python benchmarks/sync_bench.py
	$(BIN)/python benchmarks/maintenance_bench.py
	$(BIN)/python benchmarks/history_bench.py
	$(BIN)/python benchmarks/costs_bench.py

clean:
	rm -rf $(VENV) $(UPSONIC_VENV) build src/*.egg-info .pytest_cache
