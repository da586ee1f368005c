# Every target works on a fresh machine: the venv is created and filled on first use.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)

.PHONY: run test check typecheck install clean bench docs agents-setup test-agents clean-agents screenshots

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(BIN)/python -m gateway serve

test: $(STAMP)
	$(BIN)/python -m pytest -q -p no:cacheprovider

# ruff format --check and ruff (pyproject.toml [tool.ruff]) over the code and its tests, then mypy --strict over gateway/,
# then the docs site built strictly (a broken link or a nav entry without its page fails); .ci/run calls it before `make test`
check: $(STAMP)
	$(BIN)/ruff format --check gateway tests bench docs
	$(BIN)/ruff check gateway tests bench docs
	$(BIN)/mypy
	$(BIN)/mkdocs build --strict --quiet

# The docs site (mkdocs.yml, docs/) served with live reload on 127.0.0.1:8000. The generated parts
# (the configuration reference, the codec docstring in architecture.md): $(BIN)/python docs/generate.py
docs: $(STAMP)
	$(BIN)/mkdocs serve -a 127.0.0.1:8000

# mypy --strict over gateway/ (the settings are [tool.mypy] in pyproject.toml)
typecheck: $(STAMP)
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/python bench/run.py

# The console's pages photographed in the system's headless Chromium (apt-get install chromium).
screenshots: $(STAMP)
	$(BIN)/python docs/screenshots.py

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis

# Coding agents (tests/agents/): Claude Code, Codex CLI and Gemini CLI, pinned, installed with npm
# into .agents/ (git-ignored). Both targets succeed with a message where node/npm (>= 20) are missing.
agents-setup:
	bash agents/setup.sh

test-agents: $(STAMP) agents-setup
	RUN_AGENT_TESTS=1 $(BIN)/python -m pytest -q -p no:cacheprovider tests/agents -m agents

clean-agents:
	rm -rf .agents
