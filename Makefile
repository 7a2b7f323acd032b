PY ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export SUBLAYER_DATA_DIR ?= $(abspath ../shared/data)
export MLFLOW_DISABLE_TELEMETRY ?= true
export RAY_AUTH_MODE ?= disabled

.PHONY: install test lint run clean

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

test: install
	$(BIN)/python -m pytest -q

lint: install
	$(BIN)/ruff check .
	$(BIN)/mypy

run: install
	$(BIN)/sublayer train --order 'interleaved(2)' --data tinyshakespeare --config configs/debug_train.yaml

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache .ruff_cache .mypy_cache
