"""The rows a study table starts from: the points of one analysis' studies, sorted one way.

Shared by every table builder (:mod:`specsim.tables.studies`, :mod:`specsim.tables.schemes`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from specsim.grid import Grid

__all__ = ["KEYS", "expected_slower", "slower_rows", "sort_rows", "study_points"]

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


def expected_slower(grid: Grid) -> list[tuple[str, dict[str, Any]]]:
    """(study, claim) for every ``expect_slower`` entry of the config's break_even studies: a
    draft the config says makes decoding slower at a cost c (the program's demo 5 says so of
    a quarter-size poor draft)."""
    return [(name, claim) for name, study in grid.config["studies"].items()
            if study.get("analysis") == "break_even" for claim in study.get("expect_slower", [])]


def slower_rows(sv: pd.DataFrame, study: str, claim: dict[str, Any]) -> pd.Series:
    """Rows of a speedup_vs_c table a claim is about: its study, model, c (and α if given)."""
    mask = (sv["model"] == claim["model"]) & np.isclose(sv["c"], claim["c"])
    if "study" in sv:
        mask &= sv["study"] == study
    if "alpha" in claim:
        mask &= np.isclose(sv["alpha"], claim["alpha"])
    return mask
