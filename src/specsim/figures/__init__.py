"""``specsim figures``: paper-style figures from the tables, vector PDF plus PNG, one style.

Which figures there are, the analysis each needs, its caption and its drawing function
``(grid, tables_dir) -> Figure``: :mod:`specsim.outputs`. The functions live here by idea
(:mod:`.lossless`, :mod:`.tokens`, :mod:`.draft_length`, :mod:`.roofline`; the ``schemes``
analysis' in :mod:`specsim.figures.schemes`), the shared style and helpers in :mod:`.style`.
Figures read the tables and the config only: no model is built here. Numbers of a model that
no simulated point holds (the exact curves of ``optimal_k``) come from the exact stage through
a table (``optimal_k_exact``); closed forms of :mod:`specsim.exact` (Eq. 1, Thm 3.8) are drawn
directly. Rule names and legend labels come from :data:`specsim.verify.RULES`, draft-knob axis
labels from :data:`specsim.families.KNOBS`.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt

from specsim.figures.style import STYLE, save
from specsim.grid import Grid
from specsim.outputs import FIGURE_NEEDS, FIGURES, declared_path, stage_figures

README_FIGURES = ("accept_curve", "equivalence", "optimal_k_heatmap", "roofline", "jensen",
                  "schemes_frontier", "schemes_policies", "optimal_gamma_batch", "engine_schedule")


def make_figure(grid: Grid, tables_dir: str, name: str, out: str) -> None:
    """Draw the grid's figure ``name`` (a stage's figures: :func:`draw_stage_figures`)."""
    if name not in FIGURE_NEEDS:
        raise ValueError(f"unknown figure {name!r}; known: {sorted(FIGURE_NEEDS)}")
    with plt.rc_context(STYLE):
        fig = FIGURES[name].build()(grid, tables_dir)
        save(fig, out)


def table_reader(results_dir: str | Path = "results") -> Callable[[str], Any]:
    """``read(name)``: the declared table ``name`` as a DataFrame, its CSV at the declared path
    with ``results/`` standing for ``results_dir`` (verified against its sidecar)."""
    from specsim.io import read_table

    def read(name: str) -> Any:
        return read_table(declared_path(results_dir, name))
    return read


def draw_stage_figures(stage: str, step: str, read: Callable[[str], Any],
                       out_dir: str | Path) -> list[str]:
    """Draw every figure a stage's step declares (:func:`specsim.outputs.stage_figures`), each
    by its builder ``(read) -> Figure``, to ``<out_dir>/<name>.pdf`` and ``.png``; ``read``
    gives a declared table by name (:func:`table_reader`, or the step's own frames). Returns
    the PDFs' paths."""
    written = []
    for f in stage_figures(stage, step):
        def declared(name: str, f: Any = f) -> Any:
            if name not in f.reads:
                raise ValueError(f"figure {f.name!r} reads table {name!r}, which its "
                                 f"declaration does not list in reads={f.reads}")
            return read(name)

        pdf = str(Path(out_dir) / f"{f.name}.pdf")
        with plt.rc_context(STYLE):
            save(f.build()(declared), pdf)
        written.append(pdf)
    return written


def copy_readme_figures(src_dir: str | Path, dst_dir: str | Path,
                        names: Iterable[str] = README_FIGURES) -> list[Path]:
    """Copy the PNGs of the key figures (README.md, docs/) from ``src_dir`` to ``dst_dir``.

    Raises ``FileNotFoundError`` naming every missing figure, so docs are never half stale.
    """
    src, dst = Path(src_dir), Path(dst_dir)
    missing = [n for n in names if not (src / f"{n}.png").is_file()]
    if missing:
        raise FileNotFoundError(f"no PNG in {src} for: {', '.join(missing)}")
    dst.mkdir(parents=True, exist_ok=True)
    return [Path(shutil.copyfile(src / f"{n}.png", dst / f"{n}.png")) for n in names]
