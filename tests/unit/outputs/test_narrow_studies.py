"""Valid configs that ask for little: every stage (points, collect, tables, figures, checks) runs.

A figure or table picks its rows from what the config's studies hold; a study narrowed to one
rule, one policy or one model family leaves some selections empty (a schemes study whose only
rule is multi_draft has no lossy rule for the frontier figure; one whose only policy is
confidence has no fixed draft length). Each such config must either run through or be refused
before any job -- never fail in a later stage. The configs are generated: every analysis with
each model family, every schemes rule alone and every policy alone. Stages run in-process on a
tiny budget (a few seconds per config).
"""

from __future__ import annotations

import copy
import io
import json
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import pytest
import yaml
from conftest import SCHEMA, TINY

from specsim.checks import run_checks
from specsim.collect import collect
from specsim.config import load_grid
from specsim.errors import ConfigError
from specsim.figures.style import STYLE
from specsim.job import describe
from specsim.job import run as run_job
from specsim.outputs import FIGURE_NEEDS, FIGURES, available_figures, available_tables
from specsim.tables import write_analyses

MODELS = yaml.safe_load(TINY.read_text())["models"]  # seed_good, calibrated (markov), stub (iid)
BUDGET = {"chains": 64, "rounds": 4, "burn_in": 2, "batches": 4, "equivalence_trials": 2000,
          "scheme_trials": 2000, "quadrature_pairs": 1000}
KNOBS = {"multi_draft": {"drafts": [2]}, "lenient": {"lenience": [0.5]},
         "confidence": {"threshold": [0.4]}, "heuristic": {"cap": [4]}}


def _study(analysis: str, model: str, **extra: Any) -> dict[str, Any]:
    study: dict[str, Any] = {"analysis": analysis, "models": [model], "gamma": [2], **extra}
    if model == "calibrated":
        study["alpha"] = [0.6]
    if analysis in ("optimal_k", "break_even"):
        study["c"] = [0.1]
    return study


def _narrow() -> dict[str, dict[str, Any]]:
    out = {}
    for analysis in ("equivalence", "accept_curve", "temperature", "optimal_k", "break_even",
                     "schemes"):
        for model in MODELS:
            out[f"{analysis}-{model}"] = _study(analysis, model)
    for rule in ("correct", "greedy", "no_resample", "continue"):
        out[f"equivalence-only-{rule}"] = _study("equivalence", "stub", rule=[rule])
    for rule in ("correct", "block", "multi_draft", "lenient", "typical"):
        knobs = {"knobs": KNOBS[rule]} if rule in KNOBS else {}
        out[f"schemes-only-{rule}"] = _study("schemes", "seed_good", rule=[rule], **knobs)
    for policy in ("confidence", "heuristic"):
        out[f"schemes-only-{policy}"] = _study("schemes", "seed_good", policy=[policy],
                                               knobs=KNOBS[policy])
    return out


NARROW = _narrow()
REPORTED = ("schemes-only-multi_draft", "schemes-only-confidence")  # fast: always run


@pytest.mark.parametrize("name", [pytest.param(n, marks=() if n in REPORTED else pytest.mark.slow)
                                  for n in sorted(NARROW)])
def test_a_narrow_study_runs_every_stage_or_is_refused(name: str, tmp_path: Path) -> None:
    config = {"seed": 3, "budget": BUDGET, "models": copy.deepcopy(MODELS),
              "studies": {"s": NARROW[name]}}
    try:
        grid = load_grid(config, SCHEMA)
    except ConfigError as err:  # refused before any job: allowed, in one line
        assert "\n" not in str(err)
        return
    for point in grid.points:
        desc = json.loads(json.dumps(describe(grid, point)))
        sim, exact = (tmp_path / kind / f"{point.path}.parquet" for kind in ("sim", "exact"))
        sim.parent.mkdir(parents=True, exist_ok=True)
        exact.parent.mkdir(parents=True, exist_ok=True)
        run_job(desc, str(sim), str(exact), io.StringIO())
    collect(grid, tmp_path, str(tmp_path / "points.parquet"))
    tables = tmp_path / "tables"
    tables.mkdir()
    write_analyses(grid, str(tmp_path / "points.parquet"), available_tables(grid), str(tables))
    # the figures that need no study (FIGURE_NEEDS None) read no study's table but
    # optimal_k's (the heatmap's overlay): drawn in the optimal_k cases, not 29 times over
    study_free = NARROW[name]["analysis"] == "optimal_k"
    # each builder draws its narrow tables through Agg (every artist laid out and rendered);
    # the PDF twin (font subsetting, half a figure's time) does not depend on the config: the
    # tiny run writes it (make_figure)
    for figure in (f for f in available_figures(grid) if study_free or FIGURE_NEEDS[f]):
        with plt.rc_context(STYLE):
            fig = FIGURES[figure].build()(grid, str(tables))
            if fig.get_layout_engine() is None:  # as style.save lays it out
                fig.tight_layout()
            fig.savefig(tmp_path / f"{figure}.png")
        assert (tmp_path / f"{figure}.png").stat().st_size > 0
    plt.close("all")
    run_checks(grid, str(tables), str(tmp_path / "checks.csv"))
