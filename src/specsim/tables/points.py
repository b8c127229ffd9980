"""The rows a study table starts from: the points of one analysis' studies, sorted one way.

Shared by every table builder (:mod:`specsim.tables.studies`, :mod:`specsim.schemes.tables`).
"""

from __future__ import annotations

import pandas as pd

from specsim.grid import Grid

__all__ = ["KEYS", "sort_rows", "study_points"]

KEYS = ["model", "draft", "knob", "alpha", "gamma", "temperature", "rule"]


def study_points(grid: Grid, points: pd.DataFrame, analysis: str) -> pd.DataFrame:
    """Rows of ``points`` used by the studies of one analysis, each with its study's c list."""
    frames = []
    for name, study in grid.studies.items():
        if study["analysis"] != analysis:
            continue
        sub = points[points["point_id"].isin(study["points"])].copy()
        sub.insert(0, "study", name)
        sub["c_list"] = [study["c"]] * len(sub)
        frames.append(sub)
    if not frames:
        raise ValueError(f"no study in the config has analysis {analysis!r}")
    return pd.concat(frames, ignore_index=True)


def sort_rows(df: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Rows sorted by ``keys`` (stable; empty cells first), renumbered."""
    return df.sort_values(keys, na_position="first", kind="mergesort").reset_index(drop=True)
