"""What a config asks the machine to do, judged before any job runs.

* The **work estimate**: simulated rounds summed over the grid (chains x (rounds + burn-in) per
  long-run point, trials per equivalence point, both for a schemes point -- each a round of γ
  drafts and one target call), plus the exact stage's arithmetic counted as the rounds it
  would take the same time (a point's :meth:`specsim.measures.Measure.footprint`).
  A config above ``max_work`` is refused with the estimate and the time it would take; raising
  ``max_work`` is the deliberate way to confirm a large run.
* **Each point job's memory**: its estimated peak (:meth:`~specsim.measures.Measure.footprint`:
  every family, measure, rule, scheme and policy states what it allocates) is what the job
  declares to Snakemake (``mem_mb``, at least :data:`POINT_MB`; its ``runtime`` follows the
  work estimate the same way, :func:`declared_minutes`); a point needing more than
  :data:`MAX_POINT_MB` is refused naming its study, model, rule, policy, knobs and estimate.
* **What a point job would refuse at run time**: an exact law over its module's size limit
  (:meth:`specsim.measures.Measure.refusal`, the job's own test), refused naming the point and
  the key to change; what a job legitimately leaves to Monte Carlo (its checks pass without
  it) is listed under its study instead (:func:`monte_carlo_only`, :func:`summary`).
* **Studies whose answer cannot exist**: an ``optimal_k`` or ``break_even`` study at α = 1 (every
  draft accepted) -- tokens per call grow without bound in γ, so there is no optimal γ and no
  break-even cost (Leviathan et al. 2022, Eq. 1 and Thm 3.8, arXiv 2211.17192).
"""

from __future__ import annotations

import math
from typing import Any

from specsim.errors import ConfigError
from specsim.families import family_of
from specsim.grid import Grid, Point
from specsim.measures import measure_of
from specsim.resources import ROUNDS_PER_CORE_SECOND, Footprint, human_bytes

# What a point job declares (Snakemake's mem_mb) when its estimate is below: most default-config
# points peak at 116-130 MB. Above it a job declares its estimate, up to MAX_POINT_MB, the most a
# point job may ask of one node: a point needing more is almost surely a mistake (a vocab or
# cap far too large; the default config's largest, pair_policies at gamma 20, peaks at 3.7 GB,
# estimated 7.7 GB) and is refused before any job runs.
POINT_MB = 500
MAX_POINT_MB = 16000
# Wall-clock minutes a point job declares (Snakemake's runtime; sbatch -t on SLURM): twice its
# estimated core-seconds (a loaded node), at least POINT_MINUTES (a default point takes ~1-60 s).
POINT_MINUTES = 2
# The i.i.d. quadrature reference draws all its (p, q) pairs at once (one stream, so the numbers
# do not depend on a chunk size): pairs x vocab float64 cells, ~6 arrays of them alive at once.
# 2^23 cells keeps a point job under ~450 MB, inside the 500 MB the SLURM profile declares
# (a default-config point peaks at 116-130 MB).
MAX_QUADRATURE_CELLS = 1 << 23
# Table families hold several (V, V) tables per point (target, draft, the engine's sampling and
# acceptance tables, the exact DP's kernels); memory grows as V^2. Measured: a vocab-1024
# Markov point (γ = 8, default budget) peaks at 458 MB, inside the 500 MB a point job declares.
MAX_TABLE_VOCAB = 1024


def estimate(grid: Grid) -> int:
    """Simulated rounds the grid asks for."""
    budget = grid.config["budget"]
    return sum(measure_of(p.measure).work(budget) for p in grid.points)


def footprint(grid: Grid, point: Point) -> Footprint:
    """The point job's estimated peak memory and work (its measure's, on the budget its job
    description carries), computed once per point of a grid: the config check, the work
    estimate and Snakemake's two resource callables each ask for it (on a 10^5-point grid the
    estimates were most of the DAG's build)."""
    known: dict[str, Footprint] = vars(grid).setdefault("_footprints", {})  # as cached_property
    got = known.get(point.point_id)
    if got is None:
        measure = measure_of(point.measure)
        budget = grid.config["budget"]
        got = known[point.point_id] = measure.footprint(
            point, {k: budget[k] for k in measure.budget_keys(point)})
    return got


def declared_mb(grid: Grid, point: Point) -> int:
    """The memory the point job declares (Snakemake's ``mem_mb``): its estimate, at least
    :data:`POINT_MB` (refused by :func:`check` above :data:`MAX_POINT_MB`)."""
    return max(POINT_MB, math.ceil(footprint(grid, point).bytes / 1e6))


def declared_minutes(grid: Grid, point: Point) -> int:
    """The wall-clock minutes the point job declares (Snakemake's ``runtime``): twice its
    estimated core-seconds, at least :data:`POINT_MINUTES`."""
    return max(POINT_MINUTES, math.ceil(2 * footprint(grid, point).seconds / 60))


def core_seconds(grid: Grid) -> float:
    """Estimated core-seconds of every point job: starting it, its simulated rounds, the exact
    stage's arithmetic (:attr:`specsim.resources.Footprint.seconds`)."""
    return sum(footprint(grid, p).seconds for p in grid.points)


def _describe(grid: Grid, point: Point) -> str:
    """``studies.<first study naming it>: model 'm', rule r, policy p, knobs k, gamma g``."""
    study = next((n for n, st in grid.studies.items() if point.point_id in st["points"]), "?")
    scheme = point.scheme
    knobs = "" if scheme is None or not scheme.knobs else ", " + ", ".join(
        f"{k}={v}" if isinstance(v, str) else f"{k}={v:g}"  # a tree's shape is a string
        for k, v in scheme.knobs.items())
    return (f"studies.{study}: model {point.model!r} (vocab {point.spec.vocab}), rule "
            f"{point.rule}, policy {point.policy}{knobs}, gamma {point.gamma}")


def _duration(seconds: float) -> str:
    for unit, size in (("core-days", 86400.0), ("core-hours", 3600.0), ("core-minutes", 60.0)):
        if seconds >= size:
            return f"{seconds / size:.3g} {unit}"
    return f"{seconds:.3g} core-seconds"



def _check_refusals(grid: Grid) -> None:
    """What a point job would refuse at run time, refused here first from the same code: a
    computation its model makes ill-posed (:meth:`specsim.measures.Measure.impossible`), its
    exact law over its module's size limit (:meth:`specsim.measures.Measure.refusal`, what to
    change: :meth:`~specsim.measures.Measure.remedy`)."""
    budget = grid.config["budget"]
    for point in grid.points:
        measure = measure_of(point.measure)
        stop = measure.impossible(point)
        if stop:
            raise ConfigError(f"{_describe(grid, point)}: {stop}")
        own = {k: budget[k] for k in measure.budget_keys(point)}
        why = measure.refusal(point, own)
        if why:
            raise ConfigError(f"{_describe(grid, point)}: {why} {measure.remedy(point, own)}")


def monte_carlo_only(grid: Grid) -> dict[str, list[str]]:
    """Per study, why some of its points' exact references will be Monte Carlo only where its
    checks pass without them (:meth:`specsim.measures.Measure.monte_carlo_only`), each
    reason once."""
    budget = grid.config["budget"]
    out: dict[str, list[str]] = {}
    for name, study in grid.studies.items():
        ids = set(study["points"])  # a list: a lookup per point would be quadratic
        for point in (p for p in grid.points if p.point_id in ids):
            measure = measure_of(point.measure)
            why = measure.monte_carlo_only(
                point, {k: budget[k] for k in measure.budget_keys(point)})
            if why and why not in out.get(name, []):
                out.setdefault(name, []).append(why)
    return out


def _check_sequoia(grid: Grid) -> None:
    """Sequoia's trees of the cost section on a table model, which the tables job builds the
    exact law of (:func:`specsim.schemes.tree.law_refusal`, bounded here by a tree of
    ``tree_budget_max`` nodes with as many children at a node)."""
    from specsim.costs import settings as cost_settings
    from specsim.families.markov import TableFamily
    from specsim.schemes.tree import law_refusal

    cost = cost_settings(grid.config)
    nodes = int(cost["tree_budget_max"])
    for model in cost["models"]:
        point = next((p for p in grid.points if p.model == model), None)
        if point is None or nodes < 1 or not isinstance(family_of(point.spec), TableFamily):
            continue
        why = law_refusal(point.spec.vocab, nodes, nodes)
        if why:
            raise ConfigError(f"cost.tree_budget_max: {nodes} on model {model!r} (vocab "
                              f"{point.spec.vocab}): Sequoia's trees of up to {nodes} nodes "
                              f"would be refused by the tables job: {why}; lower "
                              f"cost.tree_budget_max or the vocab, or leave the model out of "
                              f"cost.models")


def check(grid: Grid) -> None:
    """Refuse, with a one-line ConfigError, work above the ceiling or an impossible study."""
    for name, study in grid.config["studies"].items():
        if study["analysis"] in ("optimal_k", "break_even") and 1.0 in study.get("alpha", []):
            raise ConfigError(f"studies.{name}.alpha: 1.0 has no {study['analysis']} answer "
                              f"(every draft is accepted, so tokens per call grow without "
                              f"bound in gamma); use alpha < 1")
    from specsim.families.markov import TableFamily

    for name, spec in {p.model: p.spec for p in grid.points}.items():  # vocab is per model
        if isinstance(family_of(spec), TableFamily) and spec.vocab > MAX_TABLE_VOCAB:
            raise ConfigError(
                f"models.{name}.vocab: {spec.vocab} tokens; table models are limited to "
                f"{MAX_TABLE_VOCAB} (memory grows as vocab^2: a {MAX_TABLE_VOCAB}-token point "
                f"peaks at ~460 MB, the most a point job declares)")

    pairs = int(grid.config["budget"]["quadrature_pairs"])
    for point in grid.points:
        reads_pairs = "quadrature_pairs" in measure_of(point.measure).budget_keys(point)
        if reads_pairs and pairs * point.spec.vocab > MAX_QUADRATURE_CELLS:
            raise ConfigError(
                f"budget.quadrature_pairs: {pairs} pairs x vocab {point.spec.vocab} of model "
                f"{point.model!r} = {pairs * point.spec.vocab:.3g} cells, more than "
                f"{MAX_QUADRATURE_CELLS} (~450 MB, the memory a point job declares); use at "
                f"most {MAX_QUADRATURE_CELLS // point.spec.vocab} pairs")
    _check_refusals(grid)
    for point in grid.points:
        fp = footprint(grid, point)
        if fp.bytes > MAX_POINT_MB * 1e6:
            raise ConfigError(
                f"{_describe(grid, point)}: the {fp.what} needs ~{human_bytes(fp.bytes)}, more "
                f"than the {human_bytes(MAX_POINT_MB * 1e6)} a point job may declare "
                f"(specsim.work.MAX_POINT_MB); lower the vocab, cap, drafts or gamma, or the "
                f"budget's chains")
    _check_sequoia(grid)  # the tables job's, after every point's
    rounds, seconds = estimate(grid), core_seconds(grid)
    worth = max(float(rounds), seconds * ROUNDS_PER_CORE_SECOND)  # the time in rounds
    ceiling = float(grid.config["max_work"])
    if worth > ceiling:
        raise ConfigError(
            f"max_work: the config asks for {rounds:.3g} simulated rounds and the exact stage's "
            f"arithmetic, about {_duration(seconds)} (worth {worth:.3g} rounds at "
            f"~{ROUNDS_PER_CORE_SECOND:.0e} rounds/s), more than max_work={ceiling:.3g}; lower "
            f"budget.chains/rounds/equivalence_trials (or a scheme's cap, drafts or gamma) or "
            f"raise max_work to confirm")


def summary(grid: Grid, sources: dict[str, Any] | None = None) -> str:
    """One line per study (what it computes, where it came from), a line under it per reason
    its points leave part of their exact reference to Monte Carlo (:func:`monte_carlo_only`),
    and the work estimate."""
    lines = []
    partly_mc = monte_carlo_only(grid)
    for name, study in grid.studies.items():
        origin = f" (from {sources[name]})" if sources and name in sources else ""
        lines.append(f"  {name}: {study['analysis']}, {len(study['points'])} points{origin}")
        lines += [f"    Monte Carlo only (its checks pass without it): {why}"
                  for why in partly_mc.get(name, [])]
    peak = max((footprint(grid, p).bytes for p in grid.points), default=0.0)
    lines.append(f"  {len(grid.points)} grid points, {estimate(grid):.3g} simulated rounds "
                 f"(about {_duration(core_seconds(grid))} with the exact stage; a point job "
                 f"peaks at ~{human_bytes(peak)} at most)")
    return "\n".join(lines)
