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
from collections.abc import Iterable
from pathlib import Path

import matplotlib.pyplot as plt

from specsim.figures.style import STYLE, save
from specsim.grid import Grid
from specsim.outputs import FIGURES

README_FIGURES = ("accept_curve", "equivalence", "optimal_k_heatmap", "roofline", "jensen",
                  "schemes_frontier", "schemes_policies", "optimal_gamma_batch", "engine_schedule")


def make_figure(grid: Grid, tables_dir: str, name: str, out: str) -> None:
    if name not in FIGURES:
        raise ValueError(f"unknown figure {name!r}; known: {sorted(FIGURES)}")
    with plt.rc_context(STYLE):
        fig = FIGURES[name].build()(grid, tables_dir)
        save(fig, out)


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
