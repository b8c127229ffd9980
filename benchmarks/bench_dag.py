"""DAG benchmark (issues 11 and 21): what one job per grid point costs, measured side by side.

1. Start-up of a point job (``specsim point``, what the rule runs) on a point whose simulation
   is negligible, as a ratio to ``python -c "import numpy"``: the two interleaved, ``--repeats``
   times each, medians (a bare ``python -c pass`` beside them).
2. The clean default DAG, per-point layout (this checkout, on the grid the baseline can run:
   config.yaml without its ``schemes`` studies) vs the sharded layout of commit ``BASELINE``
   (exported with ``git archive`` and run from its own sources), on the same cores, both with
   the greedy scheduler and no profile: ``--runs`` runs of each, interleaved (the order
   alternates from round to round), medians. After each per-point run, the incremental edit
   "add 0.95 to studies.accept_curve.alpha" on the finished run.
3. ``snakemake -n`` on a 10^4-point grid (benchmarks/scale_config.yaml).

``--quick`` (``make bench-smoke``, in CI): two start-up runs of each command, and the DAGs of
step 2 (both layouts, and the edited config) built by ``snakemake -n`` instead of run: every
config this benchmark writes is checked as a run would check it, in seconds; no timing claims.

Every measurement is wall-clock time, with the CPU time (user + system) of the process and
all it waited for beside it: on a shared machine the CPU times move less with the neighbours'
load. Targets (issue 21), on wall-clock medians, are printed as PASS/MISS lines beside the
measured values. The last line is machine-readable:
    point_startup_s=<s> numpy_import_s=<s> startup_ratio=<x> dag_ratio_vs_sharded=<x>
    incremental_fraction=<y> scale_dry_run_s=<s>
"""

from __future__ import annotations

import argparse
import copy
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
BASELINE = "15a3093"  # the last commit with the sharded layout (results/shards/)
SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))
TARGETS = {  # issue 21: what must hold
    "dag_ratio": 1.25,  # clean default DAG, per point / sharded
    "incremental": 0.5,  # incremental alpha edit / clean per-point run
    "scale_dry_run_s": 30.0,  # snakemake -n on the 10^4-point grid
}


Times = tuple[float, float]  # wall-clock and CPU seconds of one run


def cpu_of_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)  # every descendant waited for
    return usage.ru_utime + usage.ru_stime


def timed(cmd: list[str], env: dict[str, str] | None = None) -> Times:
    """Run ``cmd`` to its end; its wall-clock and CPU seconds. A failure ends the benchmark
    with the command's stderr."""
    t, cpu = time.perf_counter(), cpu_of_children()
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if res.returncode != 0:
        sys.exit(f"{' '.join(cmd[:6])} ... failed:\n{res.stderr[-3000:]}")
    return time.perf_counter() - t, cpu_of_children() - cpu


def interleaved(runs: dict[str, Callable[[int], Times]], repeats: int) -> dict[str, list[Times]]:
    """Each measurement ``repeats`` times, in rounds; the order within a round alternates, so
    a drift in the machine's load weighs on every measurement alike."""
    times: dict[str, list[Times]] = {name: [] for name in runs}
    for i in range(repeats):
        for name in (list(runs) if i % 2 == 0 else list(reversed(runs))):
            times[name].append(runs[name](i))
    return times


def point_job(scratch: Path) -> list[str]:
    """``specsim point`` on a table model's long-run point at a negligible budget: its exact
    reference is a quick DP, so what is timed is the job's start-up and its two writes."""
    from specsim.config import load_grid
    from specsim.families import TableFamily
    from specsim.job import describe, to_arg

    cfg = yaml.safe_load((ROOT / "tests" / "data" / "tiny.yaml").read_text())
    cfg["budget"] |= {"chains": 16, "rounds": 1, "burn_in": 0, "batches": 2}
    grid = load_grid(cfg, ROOT / "workflow" / "schemas" / "config.schema.yaml")
    point = next(p for p in grid.points
                 if p.measure == "long_run" and isinstance(p.family, TableFamily))
    return [sys.executable, "-m", "specsim.cli", "point", "--job", to_arg(describe(grid, point)),
            "--sim", str(scratch / "s.parquet"), "--exact", str(scratch / "e.parquet")]


def startup(repeats: int, scratch: Path) -> dict[str, list[Times]]:
    py, point = sys.executable, point_job(scratch)
    timed(point)  # one untimed run first: the files it reads are in the page cache after it
    return interleaved({"python -c pass": lambda _: timed([py, "-c", "pass"]),
                        "python -c 'import numpy'": lambda _: timed([py, "-c", "import numpy"]),
                        "specsim point (one job)": lambda _: timed(point)}, repeats)


def run_dag(snakefile: Path, workdir: Path, config: Path, cores: int,
            env: dict[str, str] | None = None, dry: bool = False) -> Times:
    return timed([SNAKEMAKE, "-s", str(snakefile), "-d", str(workdir), "--configfile",
                  str(config), "--cores", str(cores), "--quiet", "--workflow-profile", "none",
                  "--scheduler", "greedy", *(["-n"] if dry else []), "all"], env)


def same_grid_configs() -> tuple[dict[str, Any], dict[str, Any]]:
    """This checkout's config.yaml on the grid the baseline can run, and the same with the
    incremental edit (``studies.accept_curve.alpha`` += 0.95): without the studies the
    baseline cannot run (analysis: schemes, added since), and without the ``cost`` section,
    whose models must run in a schemes study (the check refuses it otherwise)."""
    cfg = yaml.safe_load((ROOT / "config.yaml").read_text())
    cfg["studies"] = {k: v for k, v in cfg["studies"].items() if v["analysis"] != "schemes"}
    cfg.pop("cost", None)
    edited = copy.deepcopy(cfg)
    edited["studies"]["accept_curve"]["alpha"].append(0.95)
    return cfg, edited


def dag(runs: int, cores: int, scratch: Path, keep: bool,
        dry: bool = False) -> dict[str, list[Times]]:
    old = scratch / "baseline"
    old.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", BASELINE], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(old)], input=archive, check=True)
    env = dict(os.environ, PYTHONPATH=str(old / "src"))  # the baseline's own package
    # The same grid for both layouts (same_grid_configs)
    cfg, edited = same_grid_configs()
    config = scratch / "same_grid.yaml"
    config.write_text(yaml.safe_dump(cfg, sort_keys=False))
    edited_config = scratch / "edited.yaml"
    edited_config.write_text(yaml.safe_dump(edited, sort_keys=False))
    incremental: list[Times] = []

    def sharded(i: int) -> Times:
        workdir = scratch / f"sharded_{i}"
        t = run_dag(old / "Snakefile", workdir, old / "config.yaml", cores, env, dry)
        if not keep:
            shutil.rmtree(workdir)
        return t

    def per_point(i: int) -> Times:
        workdir = scratch / f"per_point_{i}"
        t = run_dag(ROOT / "Snakefile", workdir, config, cores, dry=dry)
        incremental.append(run_dag(ROOT / "Snakefile", workdir, edited_config, cores, dry=dry))
        if not keep:
            shutil.rmtree(workdir)
        return t

    times = interleaved({"sharded (baseline)": sharded, "per point (this checkout)": per_point},
                        runs)
    return {**times, "incremental: accept_curve alpha += 0.95": incremental}


def scale_dry_run(scratch: Path) -> tuple[float, int]:
    t = time.perf_counter()
    res = subprocess.run([SNAKEMAKE, "-s", str(ROOT / "Snakefile"), "-d", str(scratch / "scale"),
                          "--configfile", str(ROOT / "benchmarks" / "scale_config.yaml"), "-n",
                          "--quiet", "rules"], capture_output=True, text=True, check=True)
    elapsed = time.perf_counter() - t
    points = next(int(line.split()[1]) for line in res.stdout.splitlines()
                  if line.startswith("point "))
    return elapsed, points


def medians(runs: list[Times]) -> Times:
    return statistics.median(w for w, _ in runs), statistics.median(c for _, c in runs)


def show(times: dict[str, list[Times]], digits: int = 3) -> None:
    for name, runs in times.items():
        wall, cpu = medians(runs)
        each = ", ".join(f"{w:.{digits}f}" for w, _ in runs)
        print(f"  {name:<40} median {wall:7.{digits}f} s wall, {cpu:7.{digits}f} s CPU  "
              f"(wall: {each})")


def verdict(what: str, value: float, target: float) -> None:
    print(f"  {'PASS' if value <= target else 'MISS'}  {what}: {value:.3f} (target <= {target})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=10, help="start-up runs of each command")
    ap.add_argument("--runs", type=int, default=3, help="clean DAG runs of each layout")
    ap.add_argument("--skip-dag", action="store_true", help="start-up and scale only (fast)")
    ap.add_argument("--quick", action="store_true",
                    help="smoke run (CI): 2 start-up runs, the DAGs built by snakemake -n; "
                    "no targets judged")
    ap.add_argument("--keep", action="store_true",
                    help="keep the scratch directory (every run's results/) and print its path")
    args = ap.parse_args()
    if args.quick:
        args.repeats, args.runs = 2, 1
    out = ROOT / "benchmarks" / "out"  # git-ignored; not the shared temp directory
    out.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="bench_dag.", dir=out))
    try:
        print(f"start-up: {args.repeats} runs of each, interleaved")
        s = startup(args.repeats, scratch)
        show(s)
        point, point_cpu = medians(s["specsim point (one job)"])
        numpy, numpy_cpu = medians(s["python -c 'import numpy'"])
        print(f"  point job / import numpy = {point / numpy:.2f} wall, "
              f"{point_cpu / numpy_cpu:.2f} CPU (medians)")
        ratio = frac = float("nan")
        if not args.skip_dag:
            how = "built by snakemake -n (--quick)" if args.quick else "interleaved"
            print(f"\nclean default DAG on {args.cores} cores: {args.runs} runs of each layout, "
                  f"{how}")
            d = dag(args.runs, args.cores, scratch, args.keep, dry=args.quick)
            show(d, digits=1)
            (clean, clean_cpu), (old, old_cpu) = (medians(d["per point (this checkout)"]),
                                                  medians(d["sharded (baseline)"]))
            ratio = clean / old
            frac = medians(d["incremental: accept_curve alpha += 0.95"])[0] / clean
            print(f"  per point / sharded = {ratio:.3f} wall, {clean_cpu / old_cpu:.3f} CPU; "
                  f"incremental / clean = {frac:.3f} wall (medians)")
        elapsed, points = scale_dry_run(scratch)
        print(f"\nsnakemake -n on benchmarks/scale_config.yaml: {points} point jobs in "
              f"{elapsed:.1f} s")
        if args.quick:
            print("\n--quick: a smoke run, no targets judged")
            return
        print("\ntargets (issue 21)")
        if not args.skip_dag:
            verdict("clean default DAG, per point / sharded", ratio, TARGETS["dag_ratio"])
            verdict("incremental alpha edit / clean run", frac, TARGETS["incremental"])
        verdict("10^4-point dry run, seconds", elapsed, TARGETS["scale_dry_run_s"])
        print(f"point_startup_s={point:.3f} numpy_import_s={numpy:.3f} "
              f"startup_ratio={point / numpy:.2f} dag_ratio_vs_sharded={ratio:.3f} "
              f"incremental_fraction={frac:.3f} scale_dry_run_s={elapsed:.1f}")
    finally:
        if args.keep:
            print(f"kept: {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
