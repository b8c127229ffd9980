"""What a config asks the machine to do, judged before any job runs.

* The **work estimate**: simulated rounds summed over the grid (chains x (rounds + burn-in) per
  long-run point, trials per equivalence point, both for a schemes point -- each a round of γ
  drafts and one target call).
  A config above ``max_work`` is refused with the estimate and the time it would take; raising
  ``max_work`` is the deliberate way to confirm a large run.
* **Studies whose answer cannot exist**: an ``optimal_k`` or ``break_even`` study at α = 1 (every
  draft accepted) -- tokens per call grow without bound in γ, so there is no optimal γ and no
  break-even cost (Leviathan et al. 2022, Eq. 1 and Thm 3.8, arXiv 2211.17192).
"""

from __future__ import annotations

from typing import Any

from specsim.errors import ConfigError
from specsim.families import family_of
from specsim.grid import Grid
from specsim.measures import measure_of

ROUNDS_PER_CORE_SECOND = 1e6  # measured order of magnitude (make bench: 1-5 M rounds/s at γ = 4)
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


def _duration(seconds: float) -> str:
    for unit, size in (("core-days", 86400.0), ("core-hours", 3600.0), ("core-minutes", 60.0)):
        if seconds >= size:
            return f"{seconds / size:.3g} {unit}"
    return f"{seconds:.3g} core-seconds"


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
    rounds = estimate(grid)
    ceiling = float(grid.config["max_work"])
    if rounds > ceiling:
        raise ConfigError(
            f"max_work: the config asks for {rounds:.3g} simulated rounds (about "
            f"{_duration(rounds / ROUNDS_PER_CORE_SECOND)} at ~{ROUNDS_PER_CORE_SECOND:.0e} "
            f"rounds/s), more than max_work={ceiling:.3g}; lower budget.chains/rounds/"
            f"equivalence_trials or raise max_work to confirm")


def summary(grid: Grid, sources: dict[str, Any] | None = None) -> str:
    """One line per study (what it computes, where it came from) and the work estimate."""
    lines = []
    for name, study in grid.studies.items():
        origin = f" (from {sources[name]})" if sources and name in sources else ""
        lines.append(f"  {name}: {study['analysis']}, {len(study['points'])} points{origin}")
    rounds = estimate(grid)
    lines.append(f"  {len(grid.points)} grid points, {rounds:.3g} simulated rounds (about "
                 f"{_duration(rounds / ROUNDS_PER_CORE_SECOND)})")
    return "\n".join(lines)
