"""specsim.schemes.multi_draft_optimal: the LP-optimal verification of k i.i.d. drafts per depth.

The closed form of the optimal acceptance is checked against a direct LP over draft tuples and
against the minimum over every token subset; each coupling reaches it; the exact law against a
brute-force enumeration of every draft tuple through the couplings; losslessness; optimal >=
RRS (multi_draft) and K-SEQ (spectr) one step and on the seed tables; play against law; refusals.
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from dataclasses import replace

import numpy as np
import pytest
from multi_draft_reference import (
    DRAFT,
    PAIRS,
    TARGET,
    draft_tuples,
)
from scipy.optimize import linprog

from specsim.exact import first_two_law, stationary_rates, target_joint, tv
from specsim.models.maths import random_table
from specsim.schemes import multi_draft, spectr
from specsim.schemes.multi_draft_optimal import (
    coupling,
    coupling_lp,
    law,
    limit,
    optimal_acceptance,
    play,
    solve_coupling,
)


def _lp_over_tuples(p: np.ndarray, q: np.ndarray, k: int) -> float:
    """max P(Y in X) over couplings of X ~ q^k (ordered tuples) and Y ~ p, by linprog."""
    v = p.size
    tuples = list(itertools.product(range(v), repeat=k))
    var = [(i, y) for i, t in enumerate(tuples) for y in sorted(set(t))]
    a = np.zeros((len(tuples) + v, len(var)))
    for j, (i, y) in enumerate(var):
        a[i, j] = a[len(tuples) + y, j] = 1.0
    b = np.concatenate([[math.prod(q[x] for x in t) for t in tuples], p])
    return -linprog(-np.ones(len(var)), A_ub=a, b_ub=b, bounds=(0, None), method="highs").fun


def _min_over_subsets(p: np.ndarray, q: np.ndarray, k: int) -> float:
    v = p.size
    return min(p[list(h)].sum() + 1 - q[list(h)].sum() ** k
               for r in range(v + 1) for h in itertools.combinations(range(v), r))


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize(("v", "k"), [(3, 2), (4, 2), (4, 3), (3, 4)])
def test_closed_form_equals_lp(seed: int, v: int, k: int) -> None:
    rng = np.random.default_rng(seed)
    p, q = rng.dirichlet(np.ones(v)), rng.dirichlet(np.full(v, 0.7))
    if seed == 5:
        q[0], p[1] = 0.0, 0.0  # zeros on both sides
        p, q = p / p.sum(), q / q.sum()
    lp = _lp_over_tuples(p, q, k)
    assert abs(optimal_acceptance(p, q, k) - lp) < 1e-9
    assert abs(_min_over_subsets(p, q, k) - lp) < 1e-9


def test_closed_form_edge_cases() -> None:
    p = np.array([0.5, 0.5])
    assert optimal_acceptance(p, p, 3) == pytest.approx(1.0, abs=1e-15)  # identical: all accepted
    assert optimal_acceptance(np.array([1.0, 0]), np.array([0, 1.0]), 4) == 0.0  # disjoint
    q = np.array([0.2, 0.8])
    assert optimal_acceptance(p, q, 1) == pytest.approx(0.7, abs=1e-15)  # Σ min(p, q)
    # i.i.d. k drafts of q cover token 0 with 1 - 0.8^k: the optimum is min(1, 0.5 + that)
    for k in (2, 3, 4):
        assert optimal_acceptance(p, q, k) == pytest.approx(min(1.0, 0.5 + 1 - 0.8**k), abs=1e-14)


@pytest.mark.parametrize("pair", PAIRS)
@pytest.mark.parametrize("m", [1, 2, 3, 4])
def test_couplings_reach_the_optimum_and_are_couplings(pair: str, m: int) -> None:
    p, q = PAIRS[pair]
    for c in range(p.shape[0]):
        sets, mass, w = coupling(p[c], q[c], m)
        assert abs(mass.sum() - 1) < 1e-12 and (w >= 0).all()
        assert (w.sum(axis=1) <= mass + 1e-15).all() and (w.sum(axis=0) <= p[c] + 1e-15).all()
        for i, s in enumerate(sets):
            assert (w[i, [t for t in range(p.shape[1]) if t not in s]] == 0).all()
        assert abs(w.sum() - optimal_acceptance(p[c], q[c], m)) < 1e-8


def _spread(lp, seeds: int = 3) -> float:
    """The largest difference between the couplings solved with permuted variables by simplex
    and by interior point, and the default solve."""
    base = solve_coupling(lp)
    return max(float(np.abs(solve_coupling(lp, method, rng.permutation(lp.rows.size))
                            - base).max())
               for method in ("highs-ds", "highs-ipm")
               for rng in map(np.random.default_rng, range(seeds)))


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize(("v", "m"), [(6, 2), (6, 3), (5, 4)])
def test_the_coupling_is_pinned_whatever_vertex_the_solver_takes(seed: int, v: int,
                                                                 m: int) -> None:
    """The third objective leaves one coupling: simplex and interior point, on permuted
    variables, agree to rounding -- while the first two objectives alone leave optimal
    couplings the same solves tell apart (the selection the test pins is not vacuous)."""
    rng = np.random.default_rng(seed)
    p, q = rng.dirichlet(np.ones(v)), rng.dirichlet(np.ones(v))
    lp = coupling_lp(p, q, m)
    assert _spread(lp) < 1e-9
    assert _spread(replace(lp, tie=np.zeros_like(lp.tie))) > 1e-3
    x = solve_coupling(lp)
    assert x.sum() == pytest.approx(optimal_acceptance(p, q, m), abs=1e-8)


def test_the_tie_weights_belong_to_multiset_and_token() -> None:
    """A variable's weight is a function of (multiset, token), distinct across variables."""
    p = q = np.full(4, 0.25)
    lp = coupling_lp(p, q, 3)
    again = coupling_lp(p, q, 3)
    assert np.array_equal(lp.tie, again.tie) and np.unique(lp.tie).size == lp.tie.size
    assert ((lp.tie >= 0) & (lp.tie < 1)).all()
    by_var = {(lp.sets[r], c): t for r, c, t in zip(lp.rows, lp.cols, lp.tie, strict=True)}
    narrow = coupling_lp(p, np.array([0.5, 0.5, 0.0, 0.0]), 3)  # fewer multisets, same keys
    for r, c, t in zip(narrow.rows, narrow.cols, narrow.tie, strict=True):
        assert by_var[narrow.sets[r], c] == t


def reference_round(p: np.ndarray, q: np.ndarray, k: int, gamma: int,
                    s: int) -> dict[tuple[int, ...], float]:
    """P(one round from s emits this sequence): every tuple of k draft paths, each depth's
    survivors' multiset through the module's coupling for (context, m), by enumeration."""
    out: dict[tuple[int, ...], float] = defaultdict(float)
    table = {}
    for c in range(p.shape[0]):
        for m in range(1, k + 1):
            sets, mass, w = coupling(p[c], q[c], m)
            left = np.clip(p[c] - w.sum(axis=0), 0, None)
            table[c, m] = ({st: (mass[i], w[i]) for i, st in enumerate(sets)},
                           left / left.sum() if left.sum() > 0 else p[c])

    def depth(drafts, i, ctx, surv, emitted, prob):
        if i == gamma:
            for b in range(p.shape[0]):
                out[(*emitted, b)] += prob * p[ctx, b]
            return
        by_set, res = table[ctx, len(surv)]
        key = tuple(sorted(drafts[d][i] for d in surv))
        mass, w = by_set[key]
        for z in set(key):
            if w[z] > 0:
                keep = [d for d in surv if drafts[d][i] == z]
                depth(drafts, i + 1, z, keep, (*emitted, z), prob * w[z] / mass)
        rej = prob * (1 - w.sum() / mass)
        for b in range(p.shape[0]):
            out[(*emitted, b)] += rej * res[b]

    for drafts, prob in draft_tuples(q, s, k, gamma):
        depth(drafts, 0, s, list(range(k)), (), prob)
    return out


@pytest.mark.parametrize("pair", PAIRS)
@pytest.mark.parametrize("k", [1, 2, 4])
def test_lossless_and_at_least_every_multi_draft_scheme(pair: str, k: int) -> None:
    p, q = PAIRS[pair]
    ours = law(p, q, 1, {"drafts": k})
    for s in range(p.shape[0]):
        assert tv(first_two_law(ours, s), target_joint(p, s, 2)) <= 1e-12
    np.testing.assert_allclose(ours.tokens[:, 2], optimal_acceptance(p, q, k), atol=1e-8)
    for other in (multi_draft.law(p, q, 1, {"drafts": k}), spectr.law(p, q, 1, {"drafts": k})):
        assert (ours.tokens[:, 2] >= other.tokens[:, 2] - 1e-8).all()  # one step: the bound


def test_tokens_per_round_on_seed_tables() -> None:
    """γ = 4, k = 1..4 on the seed program's blend: optimal >= K-SEQ >= RRS (reported)."""
    import specsim.schemes.multi_draft_optimal as optimal

    rates = {name: [stationary_rates(mod.law(TARGET, DRAFT, 4, {"drafts": k})).tokens_per_round
                    for k in (1, 2, 3, 4)]
             for name, mod in (("opt", optimal), ("kseq", spectr), ("rrs", multi_draft))}
    np.testing.assert_allclose(rates["opt"], [2.1171444958, 2.6818210521, 3.0088525617,
                                              3.2237851697], rtol=0, atol=1e-7)
    np.testing.assert_allclose(rates["kseq"], [2.1171444958, 2.6757391518, 2.9797740844,
                                               3.1629895631], rtol=0, atol=1e-9)
    assert (np.array(rates["opt"]) >= np.array(rates["kseq"]) - 1e-9).all()
    assert (np.array(rates["kseq"]) >= np.array(rates["rrs"])).all()


def test_vocabulary_limit_refused() -> None:
    assert limit(6, {"drafts": 10}) is None and limit(20, {"drafts": 3}) is None
    why = limit(20, {"drafts": 4})
    assert why is not None and "8855" in why and "vocab 20" in why and "\n" not in why
    big = random_table(4, 1.0, 20)
    with pytest.raises(ValueError, match="8855"):
        law(big, big, 1, {"drafts": 4})


@pytest.mark.parametrize(("knobs", "needle"), [
    ({}, "drafts"), ({"drafts": 0}, "drafts"), ({"drafts": 2.5}, "drafts"),
    ({"drafts": False}, "drafts"), ({"drafts": 2, "y": 1}, "y")])
def test_bad_knobs_refused(knobs: object, needle: str) -> None:
    for call in (lambda: law(TARGET, DRAFT, 2, knobs), lambda: limit(6, knobs),
                 lambda: play(TARGET, DRAFT, np.zeros(3, dtype=int), 2, knobs,
                              np.random.default_rng(0))):
        with pytest.raises(ValueError, match=needle) as err:
            call()
        assert "\n" not in str(err.value) and "multi_draft_optimal" in str(err.value)


def test_only_its_points_rerun_when_its_numbers_move(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pinned coupling moved this rule's values: its points carry the scheme's numbers
    version (a new digest, so they rerun); every other point's description is as it was."""
    import yaml
    from conftest import ROOT, SCHEMA

    from specsim.config import load_grid
    from specsim.errors import ConfigError
    from specsim.job import describe, point_from
    from specsim.schemes import SCHEMES

    grid = load_grid(yaml.safe_load((ROOT / "config.yaml").read_text()), SCHEMA)
    optimal = next(p for p in grid.points if p.rule == "multi_draft_optimal")
    others = [p for p in grid.points if p.rule != "multi_draft_optimal"]
    desc = describe(grid, optimal)
    assert desc["scheme_numbers"] == SCHEMES["multi_draft_optimal"].numbers == 2
    assert not any("scheme_numbers" in describe(grid, p) for p in others[::10])
    assert point_from(desc) == optimal
    monkeypatch.setattr(SCHEMES["multi_draft_optimal"], "numbers", 1)
    assert describe(grid, optimal)["digest"] != desc["digest"]
    with pytest.raises(ConfigError, match="numbers 2, this specsim has 1; rerun snakemake"):
        point_from(desc)
