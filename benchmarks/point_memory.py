"""Estimated vs measured peak memory (and time) of point jobs: the calibration of
:mod:`specsim.resources` and of every family's, measure's and scheme's footprint.

Each case is a one-study config; every point of it runs alone in a fresh interpreter
(:func:`specsim.resources.measure_job`), whose peak resident set (``ru_maxrss``) and CPU time
are printed beside :func:`specsim.work.footprint`:

    nice .venv/bin/python benchmarks/point_memory.py [--quick] [case ...]

``--quick`` (``make bench-smoke``): every case on a tiny budget, vocabulary (16) and cap (8),
no calibration claims.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from specsim.resources import measure_job

SCHEMA = str(Path(__file__).resolve().parents[1] / "workflow" / "schemas" / "config.schema.yaml")
BUDGET = {"chains": 4096, "rounds": 16, "burn_in": 4, "batches": 16,
          "equivalence_trials": 20000, "scheme_trials": 20000}
QUICK = {"chains": 64, "rounds": 2, "burn_in": 1, "batches": 2, "equivalence_trials": 500,
         "scheme_trials": 500}
MARKOV = {"family": "markov", "target": {"seed": 1, "sharpness": 2.5},
          "draft": {"kind": "blend", "weight": 0.55, "other": {"seed": 2, "sharpness": 2.5}}}


def study(vocab: int, **study: Any) -> dict[str, Any]:
    """A config of one study on one Markov model of ``vocab`` tokens."""
    model = MARKOV | {"vocab": vocab}
    st = {"models": ["m"], "gamma": [4]} | study
    # cost_batch's Sequoia trees are the tables job's, not a point job's: none here, so the
    # config check (which refuses trees whose law a large vocabulary would not fit) passes
    return {"seed": 1, "budget": BUDGET, "models": {"m": model}, "studies": {"s": st},
            "cost": {"tree_budget_max": 0}}


CASES: dict[str, dict[str, Any]] = {
    "long_run_v256": study(256, analysis="accept_curve"),
    "long_run_v1024": study(1024, analysis="accept_curve", gamma=[8]),
    "equivalence_v64": study(64, analysis="equivalence", rule=["correct", "continue"]),
    "tokenwise_v160": study(160, analysis="schemes", rule=["correct"]),
    "tokenwise_v320": study(320, analysis="schemes", rule=["correct"]),
    "block_v12_g4": study(12, analysis="schemes", rule=["block"]),
    "multi_draft_v256_k4": study(256, analysis="schemes", rule=["multi_draft"],
                                 knobs={"drafts": [4]}),
    "confidence_v160": study(160, analysis="schemes", rule=["correct"], policy=["confidence"],
                             knobs={"threshold": [0.4]}),
    "heuristic_v24_cap64": study(24, analysis="schemes", rule=["correct"],
                                 policy=["heuristic"], knobs={"cap": [64]}),
    "heuristic_v48_cap96": study(48, analysis="schemes", rule=["correct"],
                                 policy=["heuristic"], knobs={"cap": [96]}),
    # issue 36 (f): a flat tree's drafts, ~7 (n, N) arrays while drawn, and its (N, N)
    # children table (measured 4035 MB when 1916 MB was declared); traversal drafts the same
    # tree; many drafts of one token each
    "tree_v6_flat4096": study(6, analysis="schemes", rule=["tree"], gamma=[1],
                              knobs={"branches": ["4096"]}),
    "traversal_v6_flat4096": study(6, analysis="schemes", rule=["traversal"], gamma=[1],
                                   knobs={"branches": ["4096"]}),
    "multi_draft_v6_k64_g1": study(6, analysis="schemes", rule=["multi_draft"], gamma=[1],
                                   knobs={"drafts": [64]}),
    "iid_long_run": {"seed": 1, "budget": BUDGET | {"quadrature_pairs": 65536},
                     "models": {"m": {"family": "iid", "vocab": 64, "sigma": 1.0, "noise": 0.3,
                                      "share": "round", "seed": 7, "draft": {"kind": "noise"}}},
                     "studies": {"s": {"analysis": "accept_curve", "models": ["m"],
                                       "gamma": [4]}}},
}

def run(config: dict[str, Any]) -> list[tuple[str, float, float, float, float]]:
    """(point, estimated bytes, measured bytes, estimated s, measured CPU s) per point."""
    from specsim import job, work
    from specsim.config import load_grid

    grid = load_grid(config, SCHEMA)
    rows = []
    for point in grid.points:
        fp = work.footprint(grid, point)
        rss, cpu = measure_job(job.describe(grid, point))
        rows.append((point.path, fp.bytes, rss, fp.seconds, cpu))
    return rows


def main(names: list[str]) -> None:
    if "--quick" in names:
        names = [n for n in names if n != "--quick"]
        for case in CASES.values():  # tiny budgets, vocabularies and caps: seconds each
            case["budget"] = case["budget"] | QUICK
            model = case["models"]["m"]
            model["vocab"] = min(model["vocab"], 16)
            knobs = case["studies"]["s"].get("knobs", {})
            if "cap" in knobs:
                knobs["cap"] = [min(c, 8) for c in knobs["cap"]]
    print(f"{'case':<22} {'point':<40} {'est MB':>8} {'RSS MB':>8} {'ratio':>6} "
          f"{'est s':>7} {'cpu s':>7}")
    for name in names or list(CASES):
        for path, est, got, est_s, cpu in run(CASES[name]):
            short = "/".join(seg for seg in path.split("/") if not seg.startswith(
                ("draft~", "alpha~", "temperature~")))[:40]
            print(f"{name:<22} {short:<40} {est / 1e6:8.0f} {got / 1e6:8.0f} "
                  f"{est / got:6.2f} {est_s:7.2f} {cpu:7.2f}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
