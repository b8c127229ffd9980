"""specsim.pairs.accept: the pair_accept row against a trace whose law is known in closed form."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from specsim import exact
from specsim.pairs.accept import COLUMNS, Drafts, Measured, accept_row, interval_seeds
from specsim.traces.positional import acceptance, bootstrap_ratio, paired_difference, positional_law
from specsim.traces.trace import Trace, from_full_rows, trace_meta

V = 4


def constant_trace(alpha: float, lengths: list[int]) -> Trace:
    """Every position accepts with α: p = (1, 0, 0, 0), q = (α, 1 − α, 0, 0)."""
    n = sum(lengths)
    P = np.zeros((n, V))
    P[:, 0] = 1.0
    Q = np.zeros((n, V))
    Q[:, 0], Q[:, 1] = alpha, 1.0 - alpha
    return Trace(trace_meta(pair="const", vocab=V, documents=len(lengths)),
                 np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64),
                 np.zeros(n, dtype=np.int64), *from_full_rows(P, Q, V))


def brute_calls(alpha: float, gamma: int, length: int) -> float:
    """E[target calls to emit ``length`` tokens] when every draft is accepted with α: a round
    accepts j drafts with probability α^j (1 − α) (j < γ), α^γ (j = γ), and emits j + 1
    tokens, of which the document keeps what is left of it."""
    accepted = np.array([alpha**j * (1 - alpha) for j in range(gamma)] + [alpha**gamma])
    calls = np.zeros(length + 1)
    for r in range(1, length + 1):
        calls[r] = 1.0 + sum(pj * calls[max(r - (j + 1), 0)] for j, pj in enumerate(accepted))
    return float(calls[length])


@pytest.mark.parametrize(("alpha", "gamma"), [(0.5, 1), (0.75, 3), (0.25, 4), (1.0, 2)])
def test_predicted_is_the_brute_force_expectation_and_a_measurement_equal_to_it_is_covered(
        alpha: float, gamma: int) -> None:
    lengths = [5, 9, 12, 7]
    trace = constant_trace(alpha, lengths)
    calls = np.array([brute_calls(alpha, gamma, n) for n in lengths])
    want = sum(lengths) / calls.sum()
    row = accept_row(trace, "const", "specsim", gamma, Measured(calls), seed=3)
    assert list(row) == list(COLUMNS)
    assert row["tokens_predicted"] == pytest.approx(want, rel=1e-12)
    assert row["tokens_measured"] == pytest.approx(want, rel=1e-12)
    assert row["difference"] == pytest.approx(0.0, abs=1e-12)
    assert row["covered"]
    assert row["tokens_per_document"] == pytest.approx(np.mean(lengths))
    assert row["documents"] == 4 and row["replicas"] == 1
    # Eq. 1 at the mean α; at α = 1 its limit γ + 1, exactly
    assert row["tokens_eq1_mean_alpha"] == pytest.approx(
        gamma + 1 if alpha == 1 else (1 - alpha ** (gamma + 1)) / (1 - alpha), rel=1e-12)
    if alpha == 1:
        assert row["tokens_eq1_mean_alpha"] == gamma + 1
    # every draft the model tests is accepted with α
    assert row["alpha_tested_predicted"] == pytest.approx(alpha)
    assert row["alpha_first_predicted"] == pytest.approx(alpha)
    assert np.isnan(row["alpha_tested_measured"])  # no drafts reported


def test_a_shifted_measurement_is_not_covered_and_replicas_scale_the_tokens() -> None:
    lengths = [16] * 12
    trace = constant_trace(0.75, lengths)
    calls = np.full(12, brute_calls(0.75, 3, 16))
    rng = np.random.default_rng(0)
    noisy = calls * rng.uniform(0.95, 1.05, 12)
    row = accept_row(trace, "const", "specsim", 3, Measured(1.3 * noisy), seed=3)
    assert not row["covered"] and row["difference_ci_low"] > 0
    # 4 replicas: the calls summed over them, the tokens 4 x the documents' lengths
    four = accept_row(trace, "const", "specsim", 3, Measured(4 * noisy, replicas=4), seed=3)
    one = accept_row(trace, "const", "specsim", 3, Measured(noisy), seed=3)
    assert four["tokens_measured"] == pytest.approx(one["tokens_measured"], rel=1e-12)
    assert four["replicas"] == 4 and four["tokens_per_document"] == 16


def test_intervals_follow_the_one_seed_rule() -> None:
    lengths = [6, 8, 10, 12, 14]
    trace = constant_trace(0.5, lengths)
    rng = np.random.default_rng(1)
    calls = rng.uniform(3, 9, 5)
    row = accept_row(trace, "p", "transformers", 2, Measured(calls), seed=11)
    s_pred, s_meas, s_diff = interval_seeds(11, "p", "transformers", 2)
    law = positional_law(acceptance(trace, "correct"), trace.doc_start, 2)
    num = np.asarray(lengths, dtype=np.float64)
    assert (row["tokens_predicted_ci_low"], row["tokens_predicted_ci_high"]) == law.tokens_ci(
        s_pred)
    assert (row["tokens_measured_ci_low"], row["tokens_measured_ci_high"]) == bootstrap_ratio(
        num, calls, s_meas)
    assert (row["difference_ci_low"], row["difference_ci_high"], row["difference_se"]) == \
        paired_difference(num, law.calls, num, calls, s_diff)
    # the key is the row's identity: another engine or γ draws other intervals
    assert len({interval_seeds(11, "p", e, g) for e in ("specsim", "transformers")
                for g in (1, 2)}) == 4


def test_one_prompt_resolves_nothing_and_drafts_give_the_measured_alpha() -> None:
    trace = constant_trace(0.5, [10])
    row = accept_row(trace, "p", "specsim", 2, Measured(np.array([6.0]), 1,
                                                        Drafts(8, 4.0, 5, 2.0)), seed=0)
    for col in ("tokens_predicted_ci_low", "tokens_measured_ci_high", "difference_ci_low",
                "difference_ci_high", "difference_se"):
        assert np.isnan(row[col]), col
    assert not row["covered"]
    assert (row["alpha_tested_measured"], row["alpha_first_measured"]) == (0.5, 0.4)
    assert np.isnan(accept_row(trace, "p", "specsim", 2, Measured(np.array([6.0]), 1,
                                                                  Drafts(0, 0, 0, 0)),
                               seed=0)["alpha_tested_measured"])


def test_measured_prompts_must_be_the_trace_documents() -> None:
    trace = constant_trace(0.5, [4, 4, 4])
    with pytest.raises(ValueError, match="2 measured prompts but the trace has 3 documents"):
        accept_row(trace, "p", "specsim", 1, Measured(np.ones(2)), seed=0)


def test_eq1_needs_no_clamp_at_alpha_one() -> None:
    # the llm tier used to clamp α to 1 − 1e-12 before Eq. 1; the exact limit is γ + 1
    for g in (1, 4, 8):
        assert exact.expected_tokens(1.0, g) == g + 1
    assert pd.DataFrame([accept_row(constant_trace(1.0, [3, 3]), "p", "specsim", 4,
                                    Measured(np.ones(2)), seed=0)])[
        "tokens_predicted"].iloc[0] == 3.0  # one round emits the whole 3-token document


def test_the_one_schema_is_the_declared_one() -> None:
    from specsim import report

    assert list(report.table("pair_accept").columns) == list(COLUMNS)
    assert report.undocumented("pair_accept", COLUMNS) == []
