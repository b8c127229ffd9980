"""Every table and figure the workflow writes, each declared once (:mod:`specsim.declare`).

The declarations live beside what they describe: the grid studies' tables and figures in
:mod:`.study_tables` and :mod:`.study_figures`, the tables other steps write in
:mod:`.stage_tables`, a package's own in its ``outputs`` module (:mod:`specsim.outputs.schemes`).
This module gathers them. Snakemake plans from it (``available_tables``/``available_figures``),
the CLI checks names against it, :mod:`specsim.tables` and :mod:`specsim.figures` build from
it and :mod:`specsim.report` writes the captions and HTML pages from it.

Kept free of pandas and matplotlib: Snakemake reads it every time it parses the workflow -- on
a cluster, once per job group.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

from specsim.declare import Figure, Table
from specsim.outputs import schemes as schemes_outputs
from specsim.outputs import stage_tables, study_figures, study_tables
from specsim.outputs import traces as traces_outputs
from specsim.realtext_settings import PAIR_TABLES


def _by_name(items: Iterable[Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        if item.name in out:
            raise ValueError(f"{type(item).__name__} {item.name!r} is declared twice")
        out[item.name] = item
    return out


TABLES: dict[str, Table] = _by_name([*study_tables.TABLES, *schemes_outputs.TABLES,
                                     *traces_outputs.TABLES, *stage_tables.TABLES])
FIGURES: dict[str, Figure] = _by_name([*study_figures.FIGURES, *schemes_outputs.FIGURES])

# table -> the analysis whose points it reads, for the tables `specsim tables` builds
# (None = needs no simulation: always written)
TABLE_NEEDS: dict[str, str | None] = {n: t.needs for n, t in TABLES.items() if t.builder}
# figure -> the analysis its table comes from (None = needs no simulation: always drawn)
FIGURE_NEEDS: dict[str, str | None] = {n: f.needs for n, f in FIGURES.items()}
# the tables the real-text stage writes to results/tables (their HTML comes from `specsim html`)
REALTEXT_TABLES = (*(n for n in TABLES if n.startswith("realtext_")), *PAIR_TABLES)


D = TypeVar("D", Table, Figure)


def _declared(kind: str, registry: Mapping[str, D], name: str) -> D:
    try:
        return registry[name]
    except KeyError:
        raise KeyError(f"no {kind} {name!r} is declared in specsim.outputs; known: "
                       f"{', '.join(sorted(registry))}") from None


def table(name: str) -> Table:
    return _declared("table", TABLES, name)


def figure(name: str) -> Figure:
    return _declared("figure", FIGURES, name)


def _analyses(grid_or_studies: Any) -> set[str]:
    """The config's analyses, and ``<analysis>/<family>`` for each model family a study of
    that analysis runs (a declaration's ``needs`` may name either: ``accept_curve/trace``)."""
    studies: Mapping[str, Mapping[str, Any]] = getattr(grid_or_studies, "studies",
                                                       grid_or_studies)
    out = {s["analysis"] for s in studies.values()}
    config = getattr(grid_or_studies, "config", None)
    if config is not None:
        models = config.get("models", {})
        for study in config.get("studies", {}).values():
            out |= {f"{study['analysis']}/{models[m]['family']}"
                    for m in study.get("models", ()) if m in models}
    return out


def _available(needs: dict[str, str | None], analyses: Iterable[str]) -> list[str]:
    have = set(analyses)
    return [name for name, need in needs.items() if need is None or need in have]


def available_tables(grid: Any) -> list[str]:
    """Tables the config's studies support (a Grid, or its ``studies`` mapping)."""
    return _available(TABLE_NEEDS, _analyses(grid))


def available_figures(grid: Any) -> list[str]:
    """Figures the config's studies support (a Grid, or its ``studies`` mapping)."""
    return _available(FIGURE_NEEDS, _analyses(grid))
