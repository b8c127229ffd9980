#!/usr/bin/env bash
# Same bytes on every machine (docs/explanation/reproducibility.md): the fast tests pass, and the tiny
# config's DAG and a real pair's trace DAG write byte-identical tables, with numpy's dispatched SIMD kernels switched off
# (NPY_DISABLE_CPU_FEATURES naming every dispatch target this CPU has), OpenBLAS on one thread
# and on its most basic x86 kernels (OPENBLAS_CORETYPE=Prescott) -- the last bits of exp, log,
# power and of every BLAS product then differ from the default run's, as on another CPU.
# Usage: bash tests/portability.sh [PYTHON]   (make test-portability)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${1:-.venv/bin/python}
SNAKEMAKE="$(dirname "$PY")/snakemake"
# Every dispatch target numpy was built with that this CPU supports (baseline features cannot
# be switched off; numpy refuses to name them).
features=$("$PY" -c "
from numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__
print(' '.join(f for f in __cpu_dispatch__ if __cpu_features__.get(f)))")
off=(env NPY_DISABLE_CPU_FEATURES="$features" OPENBLAS_NUM_THREADS=1)
if [ "$(uname -m)" = x86_64 ]; then off+=(OPENBLAS_CORETYPE=Prescott); fi
echo "portability: numpy dispatch targets on this CPU: ${features:-none}"
echo "portability: [1/3] fast tests with ${off[*]:1}"
"${off[@]}" "$PY" -m pytest -q -m "not slow" -p no:cacheprovider
work=$(mktemp -d "${TMPDIR:-/tmp}/specsim-portability.XXXXXX")
trap 'rm -rf "$work"' EXIT
# The tiny config (every analysis on tables), and a real pair's recorded trace through the
# trace analyses (tests/data/pair.yaml: the real-text stage at small budgets).
for config in tiny pair; do
  for run in default off; do
    echo "portability: [2/3] $config DAG, $run dispatch -> $work/$config-$run"
    mkdir -p "$work/$config-$run"
    cmd=("$SNAKEMAKE" -s Snakefile -d "$work/$config-$run" --configfile "tests/data/$config.yaml"
         --cores 2 -q)
    if [ "$run" = off ]; then cmd=("${off[@]}" "${cmd[@]}"); fi
    "${cmd[@]}" > "$work/$config-$run.log" 2>&1 || { tail -n 40 "$work/$config-$run.log"; exit 1; }
  done
done
echo "portability: [3/3] comparing the tables byte for byte"
for config in tiny pair; do
  "$PY" -m specsim.tablediff "$work/$config-default/results/tables" \
    "$work/$config-off/results/tables"
done
