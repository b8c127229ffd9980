#!/usr/bin/env bash
# Same bytes on every machine (docs/explanation/reproducibility.md): the fast tests pass at every numpy
# dispatch level, and the tiny config's DAG and a real pair's trace DAG write byte-identical
# tables with numpy's dispatched SIMD kernels switched off (NPY_DISABLE_CPU_FEATURES naming
# every dispatch target this CPU has), OpenBLAS on one thread and on its most basic x86 kernels
# (OPENBLAS_CORETYPE=Prescott) -- the last bits of exp, log, power and of every BLAS product
# then differ from the default run's, as on another CPU.
#
# The levels, each switching off more: none (numpy's default dispatch); AVX512_SPR;
# AVX512_SPR AVX512_ICL; AVX512_SPR AVX512_ICL AVX512_SKX (numpy >= 2.4 calls that level
# X86_V4); everything this CPU dispatches. A name numpy does not know or this CPU lacks is left
# out (numpy refuses to switch it off: it is not in use), so on a CPU without AVX512_SPR the
# second level is the first; a level equal to the one before it is run once, and said so.
# The fast suite runs whole with everything off (at numpy's default it is `make test`, which
# .ci/run runs first: not repeated here unless SPECSIM_PORTABILITY_FULL=1); at the levels between,
# where only the last bits of the same kernels move, its `stochastic` tests (conftest.py: the
# Monte Carlo vs exact comparisons, whose random streams follow those bits).
# SPECSIM_PORTABILITY_FULL=1 runs the whole fast suite at every level; SPECSIM_PORTABILITY_ARGS
# adds pytest arguments (say, a test file while working on this script).
# Usage: bash tests/portability.sh [PYTHON]   (make test-portability)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${1:-.venv/bin/python}
SNAKEMAKE="$(dirname "$PY")/snakemake"
# One line per level: the dispatch targets to switch off on this CPU ("-" for none). Baseline
# features cannot be switched off and are never dispatch targets.
mapfile -t levels < <("$PY" -c "
from numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__
have = [f for f in __cpu_dispatch__ if __cpu_features__.get(f)]
alias = {'AVX512_SKX': 'X86_V4'}  # numpy >= 2.4 names the Skylake-X AVX-512 level X86_V4
def here(names):
    names = [n if n in __cpu_dispatch__ else alias.get(n, n) for n in names]
    return ' '.join(n for n in dict.fromkeys(names) if n in have) or '-'
for names in ([], ['AVX512_SPR'], ['AVX512_SPR', 'AVX512_ICL'],
              ['AVX512_SPR', 'AVX512_ICL', 'AVX512_SKX'], have):
    print(here(names))")
asked=("nothing: numpy's default" "AVX512_SPR" "AVX512_SPR AVX512_ICL"
       "AVX512_SPR AVX512_ICL AVX512_SKX" "everything this CPU dispatches")
features=${levels[4]}
[ "$features" != - ] || features=
off=(env NPY_DISABLE_CPU_FEATURES="$features" OPENBLAS_NUM_THREADS=1)
if [ "$(uname -m)" = x86_64 ]; then off+=(OPENBLAS_CORETYPE=Prescott); fi
echo "portability: numpy dispatch targets on this CPU: ${features:-none}"
last=
for i in "${!levels[@]}"; do
  level=${levels[$i]}
  n=$((i + 1))
  if [ "$i" -gt 0 ] && [ "$i" -lt 4 ] && [ "$level" = "$last" ]; then
    echo "portability: [1/3] level $n/5 (${asked[$i]} off): on this CPU the same as level $i" \
      "(${last/#-/nothing} off): run once, above"
    continue
  fi
  last=$level
  if [ "$i" -eq 0 ] && [ "${SPECSIM_PORTABILITY_FULL:-0}" != 1 ]; then
    echo "portability: [1/3] level 1/5 (numpy's default): the whole fast suite there is what" \
      "make test runs (.ci/run runs both); not run twice"
    continue
  fi
  env=(env NPY_DISABLE_CPU_FEATURES="${level/#-/}")
  selection=(-m "not slow")
  if [ "$i" -eq 4 ]; then env=("${off[@]}"); fi
  if [ "$i" -gt 0 ] && [ "$i" -lt 4 ] && [ "${SPECSIM_PORTABILITY_FULL:-0}" != 1 ]; then
    selection=(-m "stochastic and not slow")
  fi
  echo "portability: [1/3] level $n/5 (${asked[$i]} off: ${level/#-/nothing} on this CPU)," \
    "tests ${selection[1]}: ${env[*]:1}"
  start=$SECONDS
  read -ra extra <<< "${SPECSIM_PORTABILITY_ARGS:-}"
  "${env[@]}" "$PY" -m pytest -q "${selection[@]}" -p no:cacheprovider "${extra[@]}"
  echo "portability: level $n took $((SECONDS - start)) s"
done
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
