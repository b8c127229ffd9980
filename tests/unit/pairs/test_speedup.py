"""specsim.pairs.speedup: the cost model and its factors against their definitions."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from specsim import exact
from specsim.pairs import speedup


@given(tokens=st.floats(1.0, 9.0), gamma=st.integers(1, 8), c=st.floats(0.0, 2.0),
       verify=st.floats(1.0, 3.0), measured=st.floats(0.1, 5.0))
def test_factors_multiply_to_the_measured_speedup(tokens: float, gamma: int, c: float,
                                                  verify: float, measured: float) -> None:
    f = speedup.factors(tokens, gamma, c, verify, measured)
    assert list(f) == list(speedup.FACTORS)
    assert np.prod(list(f.values())) == pytest.approx(measured, rel=1e-12)
    # the first four are the cost model's speedup
    model = f["factor_ideal"] * f["factor_alpha"] * f["factor_draft"] * f["factor_verify"]
    assert model == pytest.approx(tokens / (gamma * c + verify), rel=1e-12)


def test_thm38_at_eq1_tokens_is_the_closed_form_and_verify_one_is_thm38() -> None:
    gammas = np.arange(1, 9)
    for alpha, c in ((0.3, 0.05), (0.8, 0.2), (1.0, 0.1)):
        tokens = exact.expected_tokens(alpha, gammas)
        np.testing.assert_allclose(speedup.thm38(tokens, gammas, c),
                                   exact.walltime_improvement(alpha, gammas, c), rtol=1e-13)
        np.testing.assert_allclose(speedup.cost_model(tokens, gammas, c, 1.0),
                                   speedup.thm38(tokens, gammas, c), rtol=1e-15)


def test_break_even_is_where_the_speedup_is_one() -> None:
    tokens, gammas = np.array([1.6, 2.1, 2.5]), np.array([1, 2, 4])
    verify = np.array([1.05, 1.1, 1.2])
    for v in (1.0, verify):
        c = speedup.break_even(tokens, gammas, v)
        np.testing.assert_allclose(speedup.cost_model(tokens, gammas, 0.0, v)
                                   * v / (gammas * c + v), 1.0, rtol=1e-12)
        # just below the break-even c it gains, just above it loses
        for i, g in enumerate(gammas):
            vi = np.broadcast_to(v, gammas.shape)[i]
            assert speedup.cost_model(tokens[i], g, c[i] * 0.99, vi) > 1.0
            assert speedup.cost_model(tokens[i], g, c[i] * 1.01, vi) < 1.0


@given(alpha=st.floats(0.05, 0.95), gamma=st.integers(1, 8), verify=st.floats(1.0, 2.0))
def test_break_even_alpha_is_where_eq1_pays_for_the_round(alpha: float, gamma: int,
                                                          verify: float) -> None:
    # the c at which a draft of this α just breaks even: Eq. 1's tokens = γ c + verify
    c = (float(exact.expected_tokens(alpha, gamma)) - verify) / gamma
    if c <= 0:
        return
    assert speedup.break_even_alpha(gamma, c, verify) == pytest.approx(alpha, abs=1e-9)
    assert float(speedup.cost_model(exact.expected_tokens(alpha, gamma), gamma, c, verify)) \
        == pytest.approx(1.0, rel=1e-12)


def test_break_even_alpha_is_nan_where_even_alpha_one_does_not_pay() -> None:
    assert np.isnan(speedup.break_even_alpha(2, 1.0))  # 2c + 1 = 3 = γ + 1 tokens: no α pays
    assert np.isnan(speedup.break_even_alpha(4, 0.1, float("nan")))  # T(γ+1) not timed
    got = speedup.break_even_alpha(np.array([1, 2]), 0.0)  # free drafts: every α > 0 pays
    np.testing.assert_array_equal(got, [0.0, 0.0])
