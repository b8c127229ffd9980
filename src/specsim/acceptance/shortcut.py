"""How good is the counters' shortcut? Measured on a trace's exact positional model.

An engine's counters at draft length K (:mod:`.counts`) give tokens per call at K' <= K as if
rounds of length K' started where the rounds of length K did. They do not: a run at K' starts
its rounds elsewhere in the text (which context each round started in is what a trace keeps and
the counters lose), and beyond K the tail model extrapolates. On a trace both are exact
(:mod:`specsim.traces.positional`):

- the counters a run at K records, in expectation: per document d, N_d = E[rounds] and
  a_{i,d} = Σ_t v_t P(J_t >= i), v_t the expected rounds starting at t, J_t the drafts a round
  from t accepts (cut at the document's end, as an engine stops at a request's end);
- their route: T_cnt(K') = 1 + Σ_{i<=K'} Σ_d a_{i,d} / Σ_d N_d for K' <= K, and
  :mod:`.tail`'s model beyond (beside it the constant tail it replaced, to measure both);
- the truth: T(K') = Σ_d T_d / Σ_d E[calls_d at K'] (the positional law at K').

The error T_cnt(K') - T(K') is exact given the trace; its interval is a percentile bootstrap
over documents (one resample draws both: how much the error depends on which text the trace
followed), as every trace interval is. Beside it, the interval the counters' route itself
reports (:meth:`.counts.AcceptanceCounts.tokens_per_call`) for counters of that expected
shape at the size of a run of ``replicas`` chains per document, and whether it covers the
truth: a tail model is honest where its interval does.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from specsim.acceptance.counts import AcceptanceCounts
from specsim.acceptance.tail import tail_means
from specsim.traces.format import Trace
from specsim.traces.positional import (
    BOOTSTRAP,
    PositionalLaw,
    acceptance,
    percentile_interval,
    positional_law,
    resampled_sums,
)

__all__ = ["expected_counters", "shortcut_laws", "shortcut_table"]


def _per_document(values: np.ndarray, doc_start: np.ndarray) -> np.ndarray:
    doc = np.repeat(np.arange(doc_start.size - 1), np.diff(doc_start))
    return np.bincount(doc, weights=values, minlength=doc_start.size - 1)


def expected_counters(beta: np.ndarray, doc_start: np.ndarray, gamma: int) -> np.ndarray:
    """(D, gamma + 1): per document, E[rounds] and E[a_i] for i = 1..gamma of a run at
    ``gamma`` under the positional model (rule accepting with ``beta``)."""
    return _counters(positional_law(beta, doc_start, gamma))


def _counters(law: PositionalLaw) -> np.ndarray:
    """:func:`expected_counters` of the positional law of a run at ``law.gamma``."""
    # P(J >= i | t) = P(emitted >= i + 1 | t): a tail sum of each start's law
    tail = np.cumsum(law.emitted[:, ::-1], axis=1)[:, ::-1]
    cols = [law.calls] + [_per_document(law.visits * tail[:, i + 1], law.doc_start)
                          for i in range(1, law.gamma + 1)]
    return np.stack(cols, axis=1)


def _route(sums: np.ndarray, gammas: list[int], constant: bool = False) -> np.ndarray:
    """T_cnt at each K' from summed counters [N, a_1..a_K] (rows (R, K + 1) -> (R, len(gammas)));
    beyond K the fitted tail, or with ``constant`` the constant one (:func:`.tail.tail_means`)."""
    sums = np.atleast_2d(sums)
    return tail_means(sums[:, 1:] / sums[:, :1], gammas, constant)


def _reported(sums: np.ndarray, replicas: int, gammas: list[int],
              level: float) -> list[tuple[float, float]]:
    """The interval the counters' route reports at each K' for counters of the expected shape
    ``sums`` at the size of a run of ``replicas`` chains per document (rounded to counts)."""
    n = np.round(replicas * sums).astype(np.int64)
    c = AcceptanceCounts(int(n[0]), tuple(int(a) for a in np.minimum.accumulate(n[1:])))
    out = []
    for g in gammas:
        t = c.tokens_per_call(g, level)
        out.append((t.low, t.high))
    return out


def shortcut_laws(trace: Trace, gammas: list[int],
                  rule: str = "correct") -> dict[int, PositionalLaw]:
    """The positional law of ``rule`` on ``trace`` at each of ``gammas``: what
    :func:`shortcut_table` reads, the same at every ``engine_gamma`` (compute it once)."""
    beta = acceptance(trace, rule)
    return {g: positional_law(beta, trace.doc_start, g) for g in sorted(set(gammas))}


def shortcut_table(trace: Trace, name: str, engine_gamma: int, max_gamma: int,
                   seed: int | np.random.SeedSequence, rule: str = "correct",
                   resamples: int = BOOTSTRAP, level: float = 0.95,
                   replicas: int = 1,
                   laws: dict[int, PositionalLaw] | None = None) -> pd.DataFrame:
    """One row per K' = 1..max_gamma: the counters' route from a run at ``engine_gamma``
    against the positional law at K', the error and its bootstrap interval over documents, the
    constant tail's error, and the route's own interval at ``replicas`` chains per document.
    ``laws``: :func:`shortcut_laws` of ``trace`` and ``rule`` already computed (those missing
    are computed here)."""
    gammas = list(range(1, max_gamma + 1))
    laws = dict(laws or {})
    missing = sorted({*gammas, engine_gamma} - set(laws))
    if missing:
        laws.update(shortcut_laws(trace, missing, rule))
    counters = _counters(laws[engine_gamma])  # (D, K + 1)
    lengths = trace.doc_lengths.astype(np.float64)
    calls = [laws[g].calls for g in gammas]
    cols = [*counters.T, lengths, *calls]
    k = counters.shape[1]
    point = np.array([c.sum() for c in cols])
    boot = resampled_sums(cols, seed, resamples)
    rows = []
    route = _route(point[:k], gammas)[0]
    constant = _route(point[:k], gammas, constant=True)[0]
    reported = _reported(point[:k], replicas, gammas, level)
    route_boot = _route(boot[:, :k], gammas)
    for j, g in enumerate(gammas):
        truth = point[k] / point[k + 1 + j]
        truth_boot = boot[:, k] / boot[:, k + 1 + j]
        err = route[j] - truth
        lo, hi = percentile_interval(route_boot[:, j] - truth_boot, level)
        rows.append({"pair": name, "engine_gamma": engine_gamma, "gamma": g,
                     "extrapolated": g > engine_gamma, "tokens_exact": truth,
                     "tokens_counters": route[j], "error": err, "error_ci_low": lo,
                     "error_ci_high": hi, "relative_error": err / truth,
                     "documents": trace.n_docs,
                     "tokens_counters_ci_low": reported[j][0],
                     "tokens_counters_ci_high": reported[j][1],
                     "covered": reported[j][0] <= truth <= reported[j][1],
                     "tokens_constant_tail": constant[j],
                     "relative_error_constant_tail": (constant[j] - truth) / truth})
    return pd.DataFrame(rows)
