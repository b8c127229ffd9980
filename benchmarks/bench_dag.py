"""DAG benchmark: what a newcomer waits for, beside the previous commit's figure.

1. The default DAG (``config.yaml``) from clean results, on ``--cores`` (default: the machine's),
   in this checkout and in a reference checkout (``--ref``, default ``HEAD~``: a ``git worktree``
   with its own ``make setup``), interleaved (the order alternates from round to round),
   ``--repeats`` runs each: medians of wall-clock and CPU seconds (user + system of everything
   the run waited for), their ratio this / reference, and the ten slowest jobs of this
   checkout's median run (job wall times from Snakemake's log, medians over the runs).
2. ``make test`` in both checkouts, interleaved the same way (``--test-repeats``; 0 skips it).
3. ``snakemake -n`` on a 10^5-point grid (:func:`scale_config`: 4 models x 50 alpha x 50 gamma
   x 10 temperatures), this checkout only.

On a shared machine wall-clock times move with the neighbours' load; CPU times move less, and
a ratio of interleaved medians least: a regression shows as a ratio above 1. ``--quick``
(``make bench-smoke``, CI): the default DAG and a 100-point scale grid built by ``snakemake -n``
in this checkout only, no timing claims. The last line is machine-readable:
    dag_wall_s=<s> dag_cpu_s=<s> dag_wall_ratio=<x> dag_cpu_ratio=<x> test_wall_s=<s>
    test_cpu_s=<s> test_wall_ratio=<x> scale_dry_run_s=<s>
"""

from __future__ import annotations

import argparse
import copy
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
Times = tuple[float, float]  # wall-clock and CPU seconds of one run
STAMP = re.compile(r"^\[(\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4})\]$")
STARTED = re.compile(r"^(?:local)?(?:checkpoint|rule) (\w+):$")
FINISHED = re.compile(r"^Finished jobid: (\d+)")


def cpu_of_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)  # every descendant waited for
    return usage.ru_utime + usage.ru_stime


def timed(cmd: list[str], cwd: Path, log: Path) -> Times:
    """Wall-clock and CPU seconds of ``cmd`` run in ``cwd``, its output in ``log``; a failed
    run stops the benchmark naming the log."""
    cpu, wall = cpu_of_children(), time.perf_counter()
    with log.open("w") as out:
        res = subprocess.run(cmd, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, check=False)
    times = time.perf_counter() - wall, cpu_of_children() - cpu
    if res.returncode != 0:
        sys.exit(f"bench_dag: {' '.join(cmd)} failed in {cwd} (exit {res.returncode}); see {log}")
    return times


def job_times(log: Path) -> dict[str, float]:
    """Wall seconds of each job of a Snakemake run, from its log (the bracketed time stamps
    before a job's start and its ``Finished jobid``), by rule and wildcards."""
    stamp: datetime | None = None
    started: dict[str, tuple[datetime, str]] = {}
    rule, job = "", ""  # the job being announced
    out: dict[str, float] = {}
    for line in log.read_text(errors="replace").splitlines():
        text = line.strip()
        if m := STAMP.match(line):
            stamp = datetime.strptime(" ".join(m.group(1).split()), "%a %b %d %H:%M:%S %Y")
        elif m := STARTED.match(line):
            rule, job = m.group(1), ""
        elif rule and text.startswith("jobid:") and stamp is not None:
            job = text.removeprefix("jobid:").strip()
            started[job] = (stamp, rule)
        elif job in started and text.startswith("wildcards:"):
            begun, name = started[job]
            started[job] = (begun, f"{name} {text.removeprefix('wildcards:').strip()}")
        elif (m := FINISHED.match(line)) and stamp is not None and m.group(1) in started:
            begun, name = started.pop(m.group(1))
            out[name] = (stamp - begun).total_seconds()
            rule, job = "", ""
    return out


def clean(tree: Path) -> None:
    for name in ("results", "logs", ".snakemake", "benchmarks/out"):
        path = tree / name
        if name == "results" and path.exists():  # keep the committed README
            for child in path.iterdir():
                if child.name != "README.md":
                    shutil.rmtree(child) if child.is_dir() else child.unlink()
        else:
            shutil.rmtree(path, ignore_errors=True)


def reference(ref: str, scratch: Path) -> Path:
    """A worktree of ``ref`` under ``scratch`` with its own pinned venv (``make setup``)."""
    tree = scratch / "reference"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), ref],
                   check=True, capture_output=True)
    timed(["make", "setup"], tree, scratch / "reference-setup.log")
    return tree


def scale_config(models: int = 4, alphas: int = 50, gammas: int = 50,
                 temperatures: int = 10) -> dict[str, Any]:
    """benchmarks/scale_config.yaml grown to ``models`` calibrated models (targets of other
    seeds) x ``alphas`` x ``gammas`` x ``temperatures``: 10^5 points by default."""
    cfg = yaml.safe_load((ROOT / "benchmarks" / "scale_config.yaml").read_text())
    base = cfg["models"]["calibrated"]
    cfg["models"] = {f"calibrated{i}": copy.deepcopy(base) | {
        "target": base["target"] | {"seed": 1 + i}} for i in range(models)}
    study = cfg["studies"]["sweep"]
    study["models"] = list(cfg["models"])
    study["alpha"] = [round(0.5 + 0.49 * i / max(alphas - 1, 1), 4) for i in range(alphas)]
    study["gamma"] = list(range(1, gammas + 1))
    study["temperature"] = [round(0.25 * (i + 1), 2) for i in range(temperatures)]
    cfg["max_points"] = models * alphas * gammas * temperatures
    cfg["max_work"] = 1e15  # a dry run: the work ceiling would refuse the grid
    return cfg


def scale_dry_run(scratch: Path, quick: bool = False) -> Times:
    """``snakemake -n`` on :func:`scale_config`'s grid (``quick``: 2 x 5 x 5 x 2 points)."""
    work = scratch / "scale"
    work.mkdir(exist_ok=True)
    config = work / "scale.yaml"
    config.write_text(yaml.safe_dump(scale_config(2, 5, 5, 2) if quick else scale_config()))
    return timed([str(Path(sys.executable).with_name("snakemake")), "-s", str(ROOT / "Snakefile"),
                  "-d", str(work), "--configfile", str(config), "-n", "--quiet", "rules"],
                 ROOT, scratch / "scale.log")


def interleaved(trees: dict[str, Path], cmd: list[str], repeats: int, scratch: Path,
                what: str, fresh: bool) -> dict[str, list[tuple[Times, Path]]]:
    """``cmd`` in each tree, ``repeats`` rounds, the order alternating from round to round."""
    out: dict[str, list[tuple[Times, Path]]] = {name: [] for name in trees}
    names = list(trees)
    for i in range(repeats):
        for name in names if i % 2 == 0 else names[::-1]:
            if fresh:
                clean(trees[name])
            log = scratch / f"{what}-{name}-{i}.log"
            times = timed(cmd, trees[name], log)
            out[name].append((times, log))
            print(f"  {what} {name} run {i + 1}: {times[0]:.1f} s wall, {times[1]:.1f} s CPU",
                  flush=True)
    return out


def medians(runs: list[tuple[Times, Path]]) -> Times:
    return (statistics.median(t[0] for t, _ in runs), statistics.median(t[1] for t, _ in runs))


def report(what: str, runs: dict[str, list[tuple[Times, Path]]]) -> dict[str, float]:
    this = medians(runs["this"])
    out = {f"{what}_wall_s": this[0], f"{what}_cpu_s": this[1]}
    line = (f"{what}: this {this[0]:.1f} s wall, {this[1]:.1f} s CPU "
            f"(medians of {len(runs['this'])})")
    if "reference" in runs:
        ref = medians(runs["reference"])
        out |= {f"{what}_wall_ratio": this[0] / ref[0], f"{what}_cpu_ratio": this[1] / ref[1]}
        line += (f"; reference {ref[0]:.1f} s wall, {ref[1]:.1f} s CPU; ratio "
                 f"{this[0] / ref[0]:.2f} wall, {this[1] / ref[1]:.2f} CPU")
    print(line)
    return out


def top_jobs(runs: list[tuple[Times, Path]], n: int = 10) -> list[tuple[str, float]]:
    """The ``n`` slowest jobs by their median wall time over the runs."""
    per: dict[str, list[float]] = {}
    for _, log in runs:
        for name, secs in job_times(log).items():
            per.setdefault(name, []).append(secs)
    ranked = sorted(((k, statistics.median(v)) for k, v in per.items()), key=lambda kv: -kv[1])
    return ranked[:n]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ref", default="HEAD~", help="the commit to compare with (default HEAD~)")
    ap.add_argument("--repeats", type=int, default=3, help="default-DAG runs of each checkout")
    ap.add_argument("--test-repeats", type=int, default=1, help="make test runs of each (0: none)")
    ap.add_argument("--cores", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--no-ref", action="store_true", help="this checkout only")
    ap.add_argument("--quick", action="store_true",
                    help="dry runs only (CI): the default DAG and a 100-point scale grid")
    args = ap.parse_args(argv)
    scratch = Path(tempfile.mkdtemp(prefix="bench_dag."))
    snakemake = str(Path(sys.executable).with_name("snakemake"))
    figures: dict[str, float] = {}
    if args.quick:
        timed([snakemake, "-n", "--quiet", "rules", "--cores", "1"], ROOT, scratch / "dry.log")
        scale_dry_run(scratch, quick=True)
        print(f"bench_dag --quick: the default DAG and a 100-point scale grid build (logs in "
              f"{scratch})")
        return
    trees = {"this": ROOT}
    try:
        if not args.no_ref:
            trees["reference"] = reference(args.ref, scratch)
            print(f"reference: {args.ref} in {trees['reference']}")
        dag = [str(Path(".venv/bin/snakemake")), "--cores", str(args.cores)]
        runs = interleaved(trees, dag, args.repeats, scratch, "dag", fresh=True)
        figures |= report("dag", runs)
        print("ten slowest jobs of this checkout (median wall s over its runs):")
        for name, secs in top_jobs(runs["this"]):
            print(f"  {secs:7.1f}  {name}")
        if args.test_repeats:
            tests = interleaved(trees, ["make", "test"], args.test_repeats, scratch, "test",
                                fresh=False)
            figures |= report("test", tests)
    finally:
        if "reference" in trees:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force",
                            str(trees["reference"])], check=False, capture_output=True)
    wall, cpu = scale_dry_run(scratch)
    print(f"snakemake -n, 10^5 points: {wall:.1f} s wall, {cpu:.1f} s CPU")
    figures["scale_dry_run_s"] = wall
    print(" ".join(f"{k}={v:.3g}" for k, v in figures.items()))


if __name__ == "__main__":
    main()
