"""Every table and figure the workflow writes, each declared once (:mod:`specsim.declare`).

The declarations live beside what they describe: the grid studies' tables and figures in
:mod:`.study_tables` and :mod:`.study_figures`, an analysis's own in its module
(:mod:`.schemes`, :mod:`.traces`), the checks table in :mod:`.checks`, and each stage's tables
and figures in its module (:mod:`.realtext`, :mod:`.llm`), where ``step`` names the stage step
writing each: the stage's rules list their outputs from them (:func:`step_files`).
This module gathers them. Snakemake plans from it (``available_tables``/``available_figures``),
the CLI checks names against it, :mod:`specsim.tables` and :mod:`specsim.figures` build from
it and :mod:`specsim.report` writes the captions and HTML pages from it.

Kept free of pandas and matplotlib: Snakemake reads it every time it parses the workflow -- on
a cluster, once per job group.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from specsim.declare import Figure, Table
from specsim.outputs import checks as checks_outputs
from specsim.outputs import llm as llm_outputs
from specsim.outputs import llm_pairs as llm_pairs_outputs
from specsim.outputs import realtext as realtext_outputs
from specsim.outputs import schemes as schemes_outputs
from specsim.outputs import study_figures, study_tables
from specsim.outputs import traces as traces_outputs


def _by_name(items: Iterable[Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        if item.name in out:
            raise ValueError(f"{type(item).__name__} {item.name!r} is declared twice")
        out[item.name] = item
    return out


TABLES: dict[str, Table] = _by_name([*study_tables.TABLES, *schemes_outputs.TABLES,
                                     *traces_outputs.TABLES, *checks_outputs.TABLES,
                                     *realtext_outputs.TABLES, *llm_outputs.TABLES,
                                     *llm_pairs_outputs.TABLES])
FIGURES: dict[str, Figure] = _by_name([*study_figures.FIGURES, *schemes_outputs.FIGURES,
                                       *realtext_outputs.FIGURES, *llm_outputs.FIGURES,
                                       *llm_pairs_outputs.FIGURES])

# table -> the analysis whose points it reads, for the tables `specsim tables` builds
# (None = needs no simulation: always written)
TABLE_NEEDS: dict[str, str | None] = {n: t.needs for n, t in TABLES.items() if t.builder}
# figure -> the analysis its table comes from (None = needs no simulation: always drawn), for
# the figures `specsim figures` draws (a stage's figures are drawn by a step of the stage)
FIGURE_NEEDS: dict[str, str | None] = {n: f.needs for n, f in FIGURES.items() if not f.step}


def stage_tables(stage: str, step: str | None = None) -> list[Table]:
    """The tables a stage's steps write (``step``: that step's only), as declared."""
    return [t for t in TABLES.values()
            if t.stage == stage and (step is None or t.step == f"{stage}:{step}")]


def stage_figures(stage: str, step: str | None = None) -> list[Figure]:
    """The figures a stage's steps draw (``step``: that step's only), as declared."""
    return [f for f in FIGURES.values()
            if f.stage == stage and (step is None or f.step == f"{stage}:{step}")]


def step_files(stage: str, step: str | None = None, figures: bool = True) -> list[str]:
    """The files of a stage's (or one step's) declared tables, ``.csv`` and ``.md``, and
    (``figures``) figures, ``results/figures/<name>.pdf`` and ``.png``: what its rules list as
    outputs."""
    return [*(p for t in stage_tables(stage, step)
              for p in (t.path, t.markdown)),
            *(f"results/figures/{f.name}.{ext}" for f in stage_figures(stage, step)
              if figures for ext in ("pdf", "png"))]


def declared_path(results_dir: str | Path, name: str) -> Path:
    """Where the declared table ``name`` goes with ``results_dir`` standing for its path's
    ``results/``."""
    return Path(results_dir) / Path(table(name).path).relative_to("results")


# the tables the real-text stage writes to results/tables (their HTML comes from `specsim html`)
REALTEXT_TABLES = tuple(t.name for t in stage_tables("realtext")
                        if t.path == f"results/tables/{t.name}.csv")


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
