"""Which tables and figures a config produces: names, and the analysis each one needs.

Kept apart from :mod:`specsim.tables` and :mod:`specsim.figures` (pandas, matplotlib) because
Snakemake reads it every time it parses the workflow -- on a cluster, once per job group.
Those modules register one builder per name listed here (tests/test_figures.py and
tests/test_outputs.py hold them in step).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

# table -> the analysis whose points it reads; None = needs no simulation (always written)
TABLE_NEEDS: dict[str, str | None] = {
    "equivalence": "equivalence",
    "first_token": "equivalence",
    "accept_curve": "accept_curve",
    "temperature": "temperature",
    "optimal_k": "optimal_k",
    "optimal_k_curve": "optimal_k",
    "optimal_k_exact": "optimal_k",
    "break_even": "break_even",
    "speedup_vs_c": "break_even",
    "leviathan_table1": None,
    "intensity": None,
    "roofline": None,
    "worked_example": None,
    "schemes": "schemes",
    "schemes_policies": "schemes",
}
# figure -> the analysis its table comes from; None = needs no simulation (always drawn)
FIGURE_NEEDS: dict[str, str | None] = {
    "equivalence": "equivalence",
    "accept_curve": "accept_curve",
    "jensen": "accept_curve",
    "temperature": "temperature",
    "optimal_k": "optimal_k",
    "optimal_k_heatmap": None,
    "break_even": "break_even",
    "wallclock": "accept_curve",
    "roofline": None,
    "schemes_speed": "schemes",
    "schemes_frontier": "schemes",
    "schemes_policies": "schemes",
}


def _analyses(grid_or_studies: Any) -> set[str]:
    studies: Mapping[str, Mapping[str, Any]] = getattr(grid_or_studies, "studies",
                                                       grid_or_studies)
    return {s["analysis"] for s in studies.values()}


def _available(needs: dict[str, str | None], analyses: Iterable[str]) -> list[str]:
    have = set(analyses)
    return [name for name, need in needs.items() if need is None or need in have]


def available_tables(grid: Any) -> list[str]:
    """Tables the config's studies support (a Grid, or its ``studies`` mapping)."""
    return _available(TABLE_NEEDS, _analyses(grid))


def available_figures(grid: Any) -> list[str]:
    """Figures the config's studies support (a Grid, or its ``studies`` mapping)."""
    return _available(FIGURE_NEEDS, _analyses(grid))
