"""specsim.pairs.lossless: a G-test row against a known law."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from specsim.pairs.lossless import GTEST_COLUMNS, gtest_columns


def test_row_of_counts_from_the_law_and_from_a_shifted_one() -> None:
    law = np.array([0.4, 0.3, 0.2, 0.1])
    rng = np.random.default_rng(5)
    counts = rng.multinomial(20000, law)
    row = gtest_columns(counts, law, 1e-3)
    assert list(row) == list(GTEST_COLUMNS)
    assert row["trials"] == 20000 and row["cells_pooled"] == 4 and row["df"] == 3
    assert row["tv_mc"] == pytest.approx(0.5 * np.abs(counts / 20000 - law).sum(), rel=1e-12)
    # G = 2 Σ O ln(O/E) and its χ²(3) tail, by hand
    g = 2 * sum(o * math.log(o / (20000 * p)) for o, p in zip(counts, law, strict=True))
    assert row["g_statistic"] == pytest.approx(g, rel=1e-10)
    assert row["p_value"] == pytest.approx(sps.chi2.sf(g, 3), rel=1e-9)
    assert row["verdict"] == ("lossless" if row["p_value"] >= 1e-3 else "biased")
    shifted = gtest_columns(rng.multinomial(20000, [0.37, 0.33, 0.2, 0.1]), law, 1e-3)
    assert shifted["verdict"] == "biased" and shifted["p_value"] < 1e-6


def test_floor_is_the_expected_tv_of_draws_from_the_law() -> None:
    """Two cells, n = 6: E[TV] = Σ_k C(6,k) p^k (1-p)^(6-k) |k/6 - p|, enumerated."""
    p, n = 0.3, 6
    want = sum(math.comb(n, k) * p**k * (1 - p) ** (n - k) * abs(k / n - p)
               for k in range(n + 1))
    row = gtest_columns([2, 4], [p, 1 - p], 1e-3)
    assert row["tv_floor"] == pytest.approx(want, rel=1e-12)
    assert gtest_columns([2, 4], [p, 1 - p], 1e-3, floor=0.25)["tv_floor"] == 0.25


def test_a_count_where_the_law_has_none_is_biased_and_no_trials_refused() -> None:
    row = gtest_columns([5, 5, 1], [0.5, 0.5, 0.0], 1e-3)
    assert row["p_value"] == 0.0 and row["verdict"] == "biased"
    with pytest.raises(ValueError, match="at least one trial"):
        gtest_columns([0, 0], [0.5, 0.5], 1e-3)
