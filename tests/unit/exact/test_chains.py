"""specsim.exact.chains: long-run laws of reducible chains (greedy decoding, near-deterministic
targets) against hand-computed laws and Monte Carlo from the start; schemes points at T = 0 and
with a near-deterministic target run end to end, exact beside Monte Carlo; the optimal policy
on a reducible chain is refused by the dry run's checks in one line."""

from __future__ import annotations

import copy
from typing import Any

import mc
import numpy as np
import pytest
from conftest import SCHEMA

from specsim.config import load_grid
from specsim.errors import ConfigError
from specsim.exact import horizon_rates, stationary, stationary_rates
from specsim.exact.chains import closed_classes, limit_law
from specsim.measures import measure_of
from specsim.models.maths import blend
from specsim.schemes import Scheme

# 0 -> class A {1, 2} (w.p. 0.3) or class B {3, 4} (0.7); A is periodic (1 -> 2 -> 1)
BRANCHING = np.array([[0.0, 0.3, 0.0, 0.7, 0.0],
                      [0.0, 0.0, 1.0, 0.0, 0.0],
                      [0.0, 1.0, 0.0, 0.0, 0.0],
                      [0.0, 0.0, 0.0, 0.4, 0.6],
                      [0.0, 0.0, 0.0, 1.0, 0.0]])


def test_limit_law_of_a_reducible_periodic_chain() -> None:
    """Absorption 0.3 / 0.7, A uniform (periodic), B (1/1.6, 0.6/1.6); from a class, its own."""
    b = np.array([1.0, 0.6]) / 1.6
    np.testing.assert_allclose(limit_law(BRANCHING, 0), [0, 0.15, 0.15, *(0.7 * b)],
                               rtol=0, atol=1e-15)
    np.testing.assert_allclose(limit_law(BRANCHING, 2), [0, 0.5, 0.5, 0, 0], atol=1e-15)
    np.testing.assert_allclose(limit_law(BRANCHING, [0.5, 0, 0, 0, 0.5]),
                               [0, 0.075, 0.075, *(0.85 * b)], atol=1e-15)
    assert sorted(c.tolist() for c in closed_classes(BRANCHING)) == [[1, 2], [3, 4]]
    with pytest.raises(ValueError, match="2 closed classes"):
        stationary(BRANCHING)
    # the Cesàro mean of the powers converges to it
    mean, dist = np.zeros(5), np.eye(5)[0]
    for _ in range(20000):
        mean += dist
        dist = dist @ BRANCHING
    np.testing.assert_allclose(mean / 20000, limit_law(BRANCHING, 0), atol=1e-4)


def test_weak_couplings_keep_every_digit() -> None:
    """A coupling of 1e-200 makes least squares on pi (K - I) = 0 singular; state reduction
    keeps it: pi = (0.5, eps) / (0.5 + eps) exactly, the transient start lands there too."""
    eps = 1e-200
    K = np.array([[1 - eps, eps], [0.5, 0.5]])
    np.testing.assert_allclose(stationary(K), [1.0, 2e-200], rtol=1e-15)
    np.testing.assert_array_equal(limit_law(K, 1), stationary(K))
    rng = np.random.default_rng(3)
    dense = rng.random((40, 40)) ** 3
    dense /= dense.sum(axis=1, keepdims=True)
    pi = stationary(dense)
    np.testing.assert_allclose(pi @ dense, pi, rtol=1e-12)
    np.testing.assert_allclose(limit_law(dense, 7), pi, rtol=1e-12)


def test_long_run_from_the_start_matches_monte_carlo() -> None:
    """The correct rule (γ = 2) on BRANCHING with a blended draft: the round-start chain has
    two closed classes. Chains from token 0 after a long burn-in average to the limit law's
    rates, not to either class's: Monte Carlo against the exact horizon mean, which equals the
    limit to 1e-9 by then (the other classes' rates differ by far more)."""
    P = BRANCHING
    Q = blend(P, np.full((5, 5), 0.2), 0.6)
    scheme = Scheme.build("correct")
    law = scheme.law(P, Q, 2)
    limit = stationary_rates(law, 0)
    chains, burn_in, rounds = 20000, 60, 40
    seen = horizon_rates(law, 0, burn_in, rounds)
    for a, b in ((seen.tokens_per_round, limit.tokens_per_round),
                 (seen.drafted_per_round, limit.drafted_per_round)):
        assert abs(a - b) < 1e-9
    per_class = [float(stationary_rates(law, s).tokens_per_round) for s in (1, 3)]
    assert min(abs(limit.tokens_per_round - t) for t in per_class) > 0.03
    rng = np.random.default_rng(11)
    state = np.zeros(chains, dtype=np.intp)
    emitted = np.zeros(chains)
    for r in range(burn_in + rounds):
        sample = scheme.play(P, Q, state, 2, rng)
        if r >= burn_in:
            emitted += sample.n_emitted
        state = sample.next_state
    per_chain = emitted / rounds
    mc.assert_close(per_chain.mean(), per_chain.std() / np.sqrt(chains), seen.tokens_per_round)


def _policies(tiny: dict[str, Any], model: dict[str, Any], temperature: float,
              policies: list[str]) -> dict[str, Any]:
    cfg = {k: v for k, v in copy.deepcopy(tiny).items() if k not in ("studies", "cost")}
    cfg["models"] = {"m": model}
    cfg["studies"] = {"policies": dict(tiny["studies"]["policies"], models=["m"],
                                       temperature=[temperature], policy=policies)}
    return cfg


def _near_deterministic(tiny: dict[str, Any]) -> dict[str, Any]:
    m = copy.deepcopy(tiny["models"]["seed_good"])
    m["target"] = {"seed": 3, "sharpness": 100.0}  # rows of ~1 and 1e-300: reducible
    return m


@pytest.mark.parametrize("case", ["greedy", "near_deterministic"])
def test_schemes_points_on_reducible_chains_run_and_match(
        tiny_config: dict[str, Any], case: str) -> None:
    """The dry run's checks pass and each point's exact tokens per call lies within the
    Monte Carlo bound (batch means) -- where the stationary law raised before. The
    near-deterministic target's P has no zero (entries down to 1e-232): every policy's
    round-start chain has one closed class, so the optimal policy runs there too."""
    policies = ["fixed", "confidence", "heuristic"]
    model, temperature = ((tiny_config["models"]["seed_good"], 0.0) if case == "greedy"
                          else (_near_deterministic(tiny_config), 1.0))
    if case != "greedy":
        policies.append("optimal")
    grid = load_grid(_policies(tiny_config, model, temperature, policies), SCHEMA)  # checks
    budget = grid.config["budget"]
    assert len(grid.points) == len(policies) + (case != "greedy")  # optimal: one per c
    for point in grid.points:
        measure = measure_of(point.measure)
        b = {k: budget[k] for k in measure.budget_keys(point)}
        row = measure.simulate(point, b, grid.config["seed"]) | measure.exact(
            point, b, grid.config["seed"])
        est = measure.estimate(row, 1e-3)
        assert row["exact_method"] == "stationary"
        assert np.isfinite(row["tokens_stationary"]) and np.isfinite(row["tv_exact"])
        mc.assert_batch_mean_close(est["tokens_batches"], est["rounds_batches"],
                                   row["tokens_exact"], assertions=len(grid.points),
                                   slack=1e-12)


def test_optimal_policy_on_a_reducible_chain_is_refused_in_one_line(
        tiny_config: dict[str, Any]) -> None:
    """Greedy decoding: every round-start chain the policy iteration meets has several closed
    classes (one gain per class, a multichain problem the module does not solve)."""
    model, temperature = tiny_config["models"]["seed_good"], 0.0
    cfg = _policies(tiny_config, model, temperature, ["fixed", "optimal"])
    del cfg["studies"]["policies"]["knobs"]
    with pytest.raises(ConfigError) as err:
        load_grid(cfg, SCHEMA)  # the dry run's checks (specsim.work.check)
    msg = str(err.value)
    assert "\n" not in msg
    for needle in ("studies.policies", "model 'm'", "policy optimal",
                   f"temperature {temperature:g}", "closed class"):
        assert needle in msg, (needle, msg)
