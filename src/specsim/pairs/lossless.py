"""The lossless test of a real pair: Monte Carlo counts of what a loop emitted against the
exact law it should have, by the G-test (:func:`specsim.stats.gof_test`), beside the total
variation between them and its sampling floor (:func:`specsim.stats.tv_floor`)."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from specsim import exact, stats

#: The test's columns, in order: what :func:`gtest_columns` returns.
GTEST_COLUMNS = ("trials", "cells_pooled", "tv_mc", "tv_floor", "g_statistic", "df",
                 "p_value", "verdict")


def gtest_columns(counts: ArrayLike, law: ArrayLike, significance: float,
                  floor: float | None = None) -> dict[str, Any]:
    """The G-test of ``counts`` against the exact ``law`` (same cells) as the columns of
    :data:`GTEST_COLUMNS`: trials, the cells after pooling the rare ones, TV between the
    observed frequencies and the law and its floor (the expected TV of as many draws from the
    law itself; ``floor`` when the caller already has it for this law and trial count), the
    statistic, its degrees of freedom, p-value and verdict at ``significance``."""
    obs = np.asarray(counts, dtype=np.int64).ravel()
    p = np.asarray(law, dtype=np.float64).ravel()
    n = int(obs.sum())
    if n <= 0:
        raise ValueError("a lossless test needs at least one trial")
    g = stats.gof_test(obs, p)
    return {"trials": n, "cells_pooled": g.cells, "tv_mc": exact.tv(obs / n, p),
            "tv_floor": stats.tv_floor(p, n) if floor is None else floor,
            "g_statistic": g.statistic, "df": g.df, "p_value": g.p_value,
            "verdict": stats.verdict(g.p_value, significance)}
