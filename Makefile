# The interpreter for the virtualenv: the first of these that is Python >= 3.11
# (override: make install PY=/path/to/python3.12).
PY_CANDIDATES := python3.13 python3.12 python3.11 python3
PY ?= $(shell for p in $(PY_CANDIDATES); do $$p -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
        >/dev/null 2>&1 && { command -v $$p; break; }; done)
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Corpora: a folder of offline copies when one sits beside the project (../shared/data) or
# SUBLAYER_DATA_DIR names one; otherwise they are downloaded into ~/.cache/sublayer-search
# (SUBLAYER_CACHE_DIR) on first use.
ifneq ($(wildcard ../shared/data),)
export SUBLAYER_DATA_DIR ?= $(abspath ../shared/data)
endif
export MLFLOW_DISABLE_TELEMETRY ?= true
# Ray: a local sweep binds 127.0.0.1 and keeps token auth on (token in ~/.ray/auth_token);
# RAY_AUTH_MODE is left to the user (search/run/local_ray.py).

.PHONY: install test test-fast test-soak test-deps lint run train ui notebooks clean

# torch comes from pip's configured index (PyPI's default build, or a local wheel where pip
# is configured so); for the smaller CPU-only build:
#   make install TORCH_INDEX=https://download.pytorch.org/whl/cpu
TORCH_INDEX ?=

install: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || test -n "$(PY)" || { echo "make: no Python >= 3.11 found (tried \
	$(PY_CANDIDATES)); install one, or name it: make install PY=/path/to/python3.x" >&2; exit 1; }
	@echo "make install [1/4]: the virtualenv $(VENV)"
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	@echo "make install [2/4]: pip itself"
	$(BIN)/pip install -q --upgrade pip
	@echo "make install [3/4]: torch==2.13.0 (the largest download: minutes on a slow link)"
	$(BIN)/pip install --progress-bar on torch==2.13.0 $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))
	@echo "make install [4/4]: sublayer-search and its tools (Ray, MLflow, Optuna, Jupyter, pytest)"
	$(BIN)/pip install --progress-bar on -e '.[dev]'
	touch $(STAMP)
	@echo "make install: done; activate it with: source $(VENV)/bin/activate"

# The suite but its `soak` tests, in JOBS pytest-xdist workers (a test file stays on one worker, so its
# module fixtures run once; JOBS=0: one process). Its system tools (Chromium, PostgreSQL,
# docker-compose) are installed first when missing: .ci/test-deps.sh (apt-get, as root).
JOBS ?= 2
PYTEST := $(BIN)/python -m pytest -q $(if $(filter-out 0,$(JOBS)),-n $(JOBS) --dist loadfile --no-loadscope-reorder)
test: install test-deps
	$(PYTEST) -m "not soak"

# The longest failure-injection runs (MLflow outages, lost nodes and workers, killed drivers
# resumed: minutes each), kept out of `make test` so CI stays within its time; run them
# before a release.
test-soak: install test-deps
	$(PYTEST) -m soak

# Daily work: the suite without the end-to-end tests marked `slow` (Ray sweeps, MLflow
# servers, browsers).
test-fast: install test-deps
	$(PYTEST) -m "not slow"

test-deps:
	.ci/test-deps.sh

lint: install
	$(BIN)/ruff check .
	mkdir -p .mypy_path/sublayer_search
	for p in spaces models search analysis; do ln -sfn ../../$$p .mypy_path/sublayer_search/$$p; done
	$(BIN)/mypy

# The quickstart sweep: 10 tiny trials on Ray Tune, tracked in ./mlflow.db (3:05 on 2 idle
# cores, measured 2026-12-02: README).
# After Ctrl-C, `make run RESUME=1` continues it (the command the sweep prints: with the
# corpus folder this Makefile sets).
RESUME ?=
run: install
	SUBLAYER_RESUME_WITH='make $(if $(filter-out $(CURDIR),$(realpath $(PWD))),-C $(CURDIR) )run RESUME=1' \
	  $(BIN)/sublayer sweep configs/quickstart.yaml $(if $(filter-out 0,$(RESUME)),--resume)

# A single short training run, no Ray, no MLflow.
train: install
	$(BIN)/sublayer train --order 'sandwich(4,2)' --data tinyshakespeare --config configs/train/debug.yaml

# The MLflow UI on ./mlflow.db at http://127.0.0.1:5000 (another port: make ui PORT=5001)
PORT ?= 5000
ui: install
	$(BIN)/sublayer ui --tracking-uri sqlite:///mlflow.db $(if $(filter-out 5000,$(PORT)),--port $(PORT))

# The analysis notebooks, executed into reports/notebooks/ (the committed ones stay as
# they are) against EXPERIMENT in TRACKING_URI: by default the quickstart sweep of
# `make run` when ./mlflow.db exists, else the paper's data only.
EXPERIMENT ?= $(if $(wildcard mlflow.db),quickstart,)
TRACKING_URI ?= sqlite:///$(CURDIR)/mlflow.db
# Kernels talk over IPC sockets in a private (0700) temporary folder, named by an absolute
# path: the kernel starts in notebooks/, so a relative socket name would not meet the client.
notebooks: install
	mkdir -p reports/notebooks
	sockets=$$(mktemp -d) && trap 'rm -rf "$$sockets"' EXIT && \
	SUBLAYER_NOTEBOOK_EXPERIMENT='$(EXPERIMENT)' SUBLAYER_NOTEBOOK_TRACKING_URI='$(TRACKING_URI)' \
	  $(BIN)/jupyter nbconvert --to notebook --execute --ExecutePreprocessor.timeout=900 \
	  --KernelManager.transport=ipc --KernelManager.ip="$$sockets/kernel" \
	  --output-dir reports/notebooks notebooks/*.ipynb
	@echo "executed notebooks: reports/notebooks/ (experiment: $(or $(EXPERIMENT),none))"

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache .ruff_cache .mypy_cache
