PY ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export SUBLAYER_DATA_DIR ?= $(abspath ../shared/data)
export MLFLOW_DISABLE_TELEMETRY ?= true
# Ray: a local sweep binds 127.0.0.1 and keeps token auth on (token in ~/.ray/auth_token);
# RAY_AUTH_MODE is left to the user (search/local_ray.py).

.PHONY: install test lint run train ui clean

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
	mkdir -p .mypy_path/sublayer_search
	for p in spaces models search analysis; do ln -sfn ../../$$p .mypy_path/sublayer_search/$$p; done
	$(BIN)/mypy

# The quickstart sweep: 10 tiny trials on Ray Tune, tracked in ./mlflow.db (~3-5 min).
run: install
	$(BIN)/sublayer sweep configs/quickstart.yaml

# A single short training run, no Ray, no MLflow.
train: install
	$(BIN)/sublayer train --order 'sandwich(4,2)' --data tinyshakespeare --config configs/debug_train.yaml

# The MLflow UI on ./mlflow.db at http://127.0.0.1:5000
ui: install
	$(BIN)/sublayer ui --tracking-uri sqlite:///mlflow.db

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache .ruff_cache .mypy_cache
