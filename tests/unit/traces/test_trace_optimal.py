"""The optimal draft-length policy on a trace's positional model (specsim.traces.optimal):
its backward DP against brute force over every deterministic policy of every start."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from specsim.traces.optimal import solve
from specsim.traces.positional import traverse


def tiny(n: int, vocab: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Frozen rows: q (n, V) and an accept table in [0, 1] with some exact 0s and 1s."""
    rng = np.random.default_rng(seed)
    q = rng.dirichlet(np.ones(vocab), n)
    accept = rng.choice([0.0, 0.35, 0.6, 0.9, 1.0], size=(n, vocab))
    return q, accept


def prefixes(vocab: int, gamma: int) -> list[tuple[int, ...]]:
    return [p for d in range(gamma) for p in itertools.product(range(vocab), repeat=d)]


def round_of(policy: dict, start: int, end: int, q, accept, gamma: int):
    """[(probability, drafts, emitted)] of one round from ``start`` under ``policy``
    (prefix -> draft on?), enumerating drafts and acceptance outcomes."""
    out = []

    def walk(path, prob):
        d = len(path)
        s = start + d
        if d < gamma and s < end and policy[path]:
            for x in range(q.shape[1]):
                if q[s, x] > 0:
                    walk((*path, x), prob * q[s, x])
            return
        surv = 1.0
        for i, x in enumerate(path):  # first rejection at draft i + 1: i + 1 tokens
            a = accept[start + i, x]
            out.append((prob * surv * (1 - a), d, i + 1))
            surv *= a
        out.append((prob * surv, d, d + 1))

    walk((), 1.0)
    return [(p, g, min(m, end - start)) for p, g, m in out]


def brute(q, accept, doc_start, gamma: int, c: float) -> np.ndarray:
    """Least expected cost per start: every deterministic policy of each start's round, the
    later starts' least costs already known (Bellman, checked by enumeration per start)."""
    n, vocab = q.shape
    end = np.repeat(doc_start[1:], np.diff(doc_start))
    best = np.zeros(n + gamma + 2)
    pre = prefixes(vocab, gamma)
    for start in range(n - 1, -1, -1):
        last = int(end[start])
        vals = []
        for choice in itertools.product([False, True], repeat=len(pre)):
            rnd = round_of(dict(zip(pre, choice, strict=True)), start, last, q, accept, gamma)
            vals.append(sum(p * (1 + c * g + (best[start + m] if start + m < last else 0.0))
                            for p, g, m in rnd))
        best[start] = min(vals)
    return best[:n]


@pytest.mark.parametrize("vocab,gamma,seed", [(2, 2, 0), (2, 3, 1), (3, 2, 2), (2, 3, 3)])
@pytest.mark.parametrize("c", [0.05, 0.3])
def test_dp_equals_brute_force_over_policies(vocab, gamma, seed, c):
    q, accept = tiny(6, vocab, seed)
    doc_start = np.array([0, 4, 6])
    sol = solve(q, accept, doc_start, gamma, c)
    np.testing.assert_allclose(sol.cost, brute(q, accept, doc_start, gamma, c), atol=1e-12)
    # the laws describe the policy whose cost the DP reports
    calls, visits = traverse(sol.emitted, doc_start)
    total = calls.sum() + c * (visits * sol.drafted).sum()
    np.testing.assert_allclose(total, sol.cost[doc_start[:-1]].sum(), atol=1e-12)
    np.testing.assert_allclose(sol.emitted.sum(axis=1), 1.0, atol=1e-12)
    assert np.isfinite(sol.thresholds).any() and sol.drafted.max() > 0  # it drafts somewhere


def test_thresholds_stop_where_drafting_cannot_pay():
    """A draft at a document's last position only costs: never made; with c large nothing is
    drafted; with every draft accepted, c small, the cap is drafted wherever it fits."""
    q, accept = tiny(6, 2, 0)
    doc_start = np.array([0, 4, 6])
    sol = solve(q, accept, doc_start, 3, 0.05)
    assert np.all(np.isinf(sol.thresholds[:, [3, 5]]))
    assert solve(q, accept, doc_start, 3, 10.0).drafted.max() == 0
    full = solve(q, np.ones_like(accept), doc_start, 3, 0.01)
    np.testing.assert_allclose(full.drafted, [3, 2, 1, 0, 1, 0])


def forward_cost(q, accept, doc_start, t, c):
    """The expected cost of the threshold policy ``t`` per document, from per-start round laws
    enumerated path by path (equal π merged), independent of the DP's envelopes."""
    n, v = q.shape
    gamma = t.shape[0] - 1
    end = np.repeat(doc_start[1:], np.diff(doc_start))
    beta = (q * accept).sum(axis=1)
    emitted, drafted = np.zeros((n, gamma + 2)), np.zeros(n)
    for start in range(n):
        groups = {1.0: 1.0}  # π -> probability of the drafts
        for d in range(gamma + 1):
            s = start + d
            nxt: dict[float, float] = {}
            for pi, m in groups.items():
                if s < end[start] and d < gamma and pi >= t[gamma - d, s]:
                    emitted[start, d + 1] += m * pi * (1 - beta[s])
                    for x in range(v):
                        key = pi * accept[s, x]
                        nxt[key] = nxt.get(key, 0.0) + m * q[s, x]
                else:
                    emitted[start, min(d + 1, end[start] - start)] += m * pi
                    drafted[start] += m * d
            groups = nxt
    calls, visits = traverse(emitted, doc_start)
    return calls.sum() + c * (visits * drafted).sum()


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("c", [0.02, 0.1])
def test_dp_value_is_its_policys_cost_with_many_breakpoints(seed, c):
    """Continuous accept values on 5 tokens, cap 5: thousands of breakpoints, some of whose
    images fall a rounding error away from a child's; the DP's value is what its thresholds
    cost, counted path by path."""
    rng = np.random.default_rng(seed)
    q = rng.dirichlet(np.ones(5), 40)
    accept = np.where(rng.random((40, 5)) < 0.3, 1.0, rng.uniform(0.3, 1.0, (40, 5)))
    doc_start = np.array([0, 25, 40])
    sol = solve(q, accept, doc_start, 5, c)
    assert sol.breakpoints > 50
    np.testing.assert_allclose(forward_cost(q, accept, doc_start, sol.thresholds, c),
                               sol.cost[doc_start[:-1]].sum(), rtol=1e-12)


@pytest.mark.parametrize("gamma", [1, 3])
def test_documents_solved_together_as_alone(gamma):
    """The DP solves the starts of every document together (documents of lengths 1..9, some
    shorter than the cap, drafts accepted with probability 0 among 8 tokens): each document's
    thresholds, laws and costs are bit for bit those it gets as the only document."""
    q, accept = tiny(30, 8, 4)
    doc_start = np.array([0, 9, 10, 13, 21, 23, 30])
    together = solve(q, accept, doc_start, gamma, 0.05)
    assert np.isfinite(together.thresholds).any()
    for lo, hi in itertools.pairwise(doc_start):
        alone = solve(q[lo:hi], accept[lo:hi], np.array([0, hi - lo]), gamma, 0.05)
        np.testing.assert_array_equal(together.thresholds[:, lo:hi], alone.thresholds)
        for name in ("emitted", "drafted", "cost"):
            np.testing.assert_array_equal(getattr(together, name)[lo:hi], getattr(alone, name))
