# Quickstart targets. Each one creates .venv (CPU torch first) when it is missing or stale.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup demo test lint typecheck docs unit bench llama-server clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet torch==2.13.0
	$(BIN)/python -m pip install --quiet -e ".[test]"
	touch $(STAMP)

setup: $(STAMP)

demo: $(STAMP)
	$(BIN)/adaptive-rag demo

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy

docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

unit: $(STAMP)
	$(BIN)/python -m pytest tests/unit_tests -q

# llama.cpp's own llama-server for the served tool-agent tests: built once per machine from
# the installed llama-cpp-python's sources (about 15 minutes on 2 cores), then cached
llama-server: $(STAMP)
	$(BIN)/python -m tests.helpers.llama_server

test: lint typecheck docs llama-server
	$(BIN)/python -m pytest -q --durations=25

bench: $(STAMP)
	$(BIN)/python benchmarks/signal_overhead.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache site
