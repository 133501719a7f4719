# Two commands do all set-up on a fresh machine with Python 3.11+:
#   make demo   -- create .venv, install, run the agent chat workflow on local disk (offline)
#   make test   -- create .venv, install with every extra, lint, run the whole suite
#   make test-slow -- the long fault walks and multi-process runs (CI runs both)
#   make test-upsonic -- the Upsonic adapter driven by the real upsonic, in .venv-upsonic (test-slow runs it too)
#   make test-agent-plugins -- Flyte's heavier agent plugins (Pydantic AI, Claude, Mistral, Google ADK, CrewAI, Hermes) in virtualenvs of their own (by hand: building them
#                         takes longer than CI's 30 minutes allow, docs/decisions/0099)
#   make lint   -- ruff on src/, tests/, workflows/ and benchmarks/, pyright on src/ (the tools come with the test extra)
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test test-slow test-upsonic upsonic-venv test-agent-plugins agent-plugin-venvs lint stress bench clean

$(BIN)/python:
	$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "Python 3.11+ is required"'
	$(PYTHON) -m venv $(VENV)

demo: $(BIN)/python
	$(BIN)/python -m pip install -q -e .
	$(BIN)/python workflows/02_agent_chat.py

# --durations: the slowest tests in every run's output, to keep the suite inside its 10 minutes
test: lint
	$(BIN)/python -m pytest -m "not slow" --durations=25

# The long walks (a fault at every storage call), multi-process and load runs; .ci/run runs these too.
test-slow: $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[s3,gcs,test]'
	$(BIN)/python -m pytest -m slow --durations=15

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

# Flyte's agent plugins that are not in the test extra (docs/frameworks.md): Pydantic AI (pydantic-ai with its
# exporters), Claude (a 385 MB wheel: the bundled Claude Code CLI) and Mistral in .venv-agents; Google ADK moves
# opentelemetry below what Pydantic AI's exporters take, so it has .venv-agents-google; CrewAI moves pydantic,
# openai and rich below what the suite has, so it has .venv-agents-crewai; Hermes (cryptography, openai,
# pydantic, rich) .venv-agents-hermes. Each runs its test file.
AGENT_PLUGINS := 'flyteplugins-agents-pydantic-ai>=2.12,<3' 'flyteplugins-agents-claude>=2.12,<3' \
	'flyteplugins-agents-mistral>=2.12,<3'
GOOGLE_PLUGIN := 'flyteplugins-agents-google>=2.12,<3'
CREWAI_PLUGIN := 'flyteplugins-agents-crewai>=2.12,<3'
HERMES_PLUGIN := 'flyteplugins-agents-hermes>=2.12,<3'

agent-plugin-venvs: .venv-agents/.ready .venv-agents-google/.ready .venv-agents-crewai/.ready .venv-agents-hermes/.ready

.venv-agents/.ready: pyproject.toml
	$(PYTHON) -m venv --clear .venv-agents
	.venv-agents/bin/python -m pip install -q -e '.[s3,test]' $(AGENT_PLUGINS)
	touch $@

.venv-agents-google/.ready: pyproject.toml
	$(PYTHON) -m venv --clear .venv-agents-google
	.venv-agents-google/bin/python -m pip install -q -e '.[s3,test]' $(GOOGLE_PLUGIN)
	touch $@

.venv-agents-crewai/.ready: pyproject.toml
	$(PYTHON) -m venv --clear .venv-agents-crewai
	.venv-agents-crewai/bin/python -m pip install -q -e '.[s3,test]' $(CREWAI_PLUGIN)
	touch $@

.venv-agents-hermes/.ready: pyproject.toml
	$(PYTHON) -m venv --clear .venv-agents-hermes
	.venv-agents-hermes/bin/python -m pip install -q -e '.[s3,test]' $(HERMES_PLUGIN)
	touch $@

test-agent-plugins: agent-plugin-venvs
	.venv-agents/bin/python -m pytest -n 0 tests/compat/test_flyte_agent_plugin_sdks.py
	.venv-agents/bin/python -m pytest -n 0 tests/compat/test_flyte_agent_plugin_mistral.py
	.venv-agents-google/bin/python -m pytest -n 0 tests/compat/test_flyte_agent_plugin_google.py
	.venv-agents-crewai/bin/python -m pytest -n 0 tests/compat/test_flyte_agent_plugin_crewai.py
	.venv-agents-hermes/bin/python -m pytest -n 0 tests/compat/test_flyte_agent_plugin_hermes.py

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
	$(BIN)/python benchmarks/latency_bench.py

clean:
	rm -rf $(VENV) $(UPSONIC_VENV) .venv-agents .venv-agents-google .venv-agents-crewai .venv-agents-hermes build src/*.egg-info .pytest_cache
