"""DAG benchmark (issue 11): what one job per grid point costs, measured side by side in one run.

1. Start-up of a point job on a point whose simulation is negligible: ``specsim-point`` (what
   the rule runs: a client handing the job to a warm worker, :mod:`specsim.pointserver`) and
   ``specsim point`` in process, beside a bare ``python -c pass`` and ``import numpy`` (best of
   ``--repeats``).
2. The clean default DAG, per-point layout (this checkout, on the grid the baseline can run:
   config.yaml without its ``schemes`` studies) vs the sharded layout of commit ``BASELINE``
   (exported with ``git archive`` and run from its own sources), on the same cores,
   one after the other, both with the profile's scheduler (greedy) and nothing else; then the
   incremental edit "add 0.95 to studies.accept_curve.alpha" on the finished per-point run.
3. ``snakemake -n`` on a 10^4-point grid (benchmarks/scale_config.yaml).

The last line is machine-readable:
    point_startup_s=<s> dag_ratio_vs_sharded=<x> incremental_fraction=<y> scale_dry_run_s=<s>
"""

from __future__ import annotations

import argparse
import copy
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
BASELINE = "15a3093"  # the last commit with the sharded layout (results/shards/)
SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))


def best_of(cmd: list[str], repeats: int, **kw: object) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True, **kw)  # type: ignore[call-overload]
        times.append(time.perf_counter() - t)
    return min(times)


def startup(repeats: int, scratch: Path) -> dict[str, float]:
    from specsim.config import load_grid
    from specsim.families import TableFamily
    from specsim.job import describe, to_arg

    cfg = yaml.safe_load((ROOT / "tests" / "data" / "tiny.yaml").read_text())
    cfg["budget"] |= {"chains": 16, "rounds": 1, "burn_in": 0, "batches": 2}
    grid = load_grid(cfg, ROOT / "workflow" / "schemas" / "config.schema.yaml")
    point = next(p for p in grid.points  # a table model: its exact reference is a quick DP
                 if p.measure == "long_run" and isinstance(p.family, TableFamily))
    job = to_arg(describe(grid, point))
    py = sys.executable
    files = ["--sim", str(scratch / "s.parquet"), "--exact", str(scratch / "e.parquet")]
    client = [py, "-m", "specsim_point", "--job", job, *files]
    subprocess.run(client, check=True, capture_output=True, cwd=scratch)  # starts the worker
    return {
        "python -c pass": best_of([py, "-c", "pass"], repeats),
        "python -c 'import numpy'": best_of([py, "-c", "import numpy"], repeats),
        "specsim point (in process)": best_of(
            [py, "-m", "specsim.cli", "point", "--job", job, *files], repeats),
        "specsim-point (warm worker)": best_of(client, repeats, cwd=scratch),
    }


def run_dag(snakefile: Path, workdir: Path, config: Path, cores: int,
            env: dict[str, str] | None = None) -> float:
    t = time.perf_counter()
    res = subprocess.run([SNAKEMAKE, "-s", str(snakefile), "-d", str(workdir), "--configfile",
                          str(config), "--cores", str(cores), "--quiet", "--workflow-profile",
                          "none", "--scheduler", "greedy", "all"],
                         capture_output=True, text=True, env=env, check=False)
    if res.returncode != 0:
        sys.exit(f"DAG run in {workdir} failed:\n{res.stderr[-3000:]}")
    return time.perf_counter() - t


def dag(cores: int, scratch: Path) -> dict[str, float]:
    old = scratch / "baseline"
    old.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", BASELINE], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(old)], input=archive, check=True)
    env = dict(os.environ, PYTHONPATH=str(old / "src"))  # the baseline's own package
    # The same grid for both layouts: this checkout's config without the studies the baseline
    # cannot run (analysis: schemes, added since) -- the baseline's 114 points.
    cfg = yaml.safe_load((ROOT / "config.yaml").read_text())
    cfg["studies"] = {k: v for k, v in cfg["studies"].items() if v["analysis"] != "schemes"}
    config = scratch / "same_grid.yaml"
    config.write_text(yaml.safe_dump(cfg, sort_keys=False))
    out = {"sharded (baseline)": run_dag(old / "Snakefile", scratch / "run_old",
                                         old / "config.yaml", cores, env),
           "per point (this checkout)": run_dag(ROOT / "Snakefile", scratch / "run_new",
                                                config, cores)}
    edited = copy.deepcopy(cfg)
    edited["studies"]["accept_curve"]["alpha"].append(0.95)
    path = scratch / "edited.yaml"
    path.write_text(yaml.safe_dump(edited))
    out["incremental: accept_curve alpha += 0.95"] = run_dag(ROOT / "Snakefile",
                                                             scratch / "run_new", path, cores)
    return out


def scale_dry_run(scratch: Path) -> tuple[float, int]:
    t = time.perf_counter()
    res = subprocess.run([SNAKEMAKE, "-s", str(ROOT / "Snakefile"), "-d", str(scratch / "scale"),
                          "--configfile", str(ROOT / "benchmarks" / "scale_config.yaml"), "-n",
                          "--quiet", "rules"], capture_output=True, text=True, check=True)
    elapsed = time.perf_counter() - t
    points = next(int(line.split()[1]) for line in res.stdout.splitlines()
                  if line.startswith("point "))
    return elapsed, points


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--skip-dag", action="store_true", help="start-up and scale only (fast)")
    ap.add_argument("--keep", action="store_true",
                    help="keep the scratch directory (both runs' results/) and print its path")
    args = ap.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="specsim-bench-dag."))
    try:
        print("start-up, best of", args.repeats)
        s = startup(args.repeats, scratch)
        for k, v in s.items():
            print(f"  {k:<32} {v:6.3f} s")
        point_startup = s["specsim-point (warm worker)"]
        ratio = frac = float("nan")
        if not args.skip_dag:
            print(f"\nclean default DAG on {args.cores} cores (wall seconds)")
            d = dag(args.cores, scratch)
            for k, v in d.items():
                print(f"  {k:<42} {v:7.1f} s")
            ratio = d["per point (this checkout)"] / d["sharded (baseline)"]
            frac = d["incremental: accept_curve alpha += 0.95"] / d["per point (this checkout)"]
            print(f"  per point / sharded = {ratio:.3f}; incremental / clean = {frac:.3f}")
        elapsed, points = scale_dry_run(scratch)
        print(f"\nsnakemake -n on benchmarks/scale_config.yaml: {points} point jobs in "
              f"{elapsed:.1f} s")
        print(f"point_startup_s={point_startup:.3f} dag_ratio_vs_sharded={ratio:.3f} "
              f"incremental_fraction={frac:.3f} scale_dry_run_s={elapsed:.1f}")
    finally:
        if args.keep:
            print(f"kept: {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
