"""The positional model of a trace: every quantity exact, with a bootstrap CI over documents.

A trace (:mod:`.format`) freezes a pair's distributions along real text: position t of a
document carries the pair (p_t, q_t). Under the *positional model* a speculative round that
starts at position t (t tokens of the document already emitted) meets the pairs t, t+1, ...,
t+γ: draft i (i = 1..γ) is verified against the pair at t+i-1 and the bonus token comes from
p_{t+γ}. It is the i.i.d. stub's ``share: position`` with the pairs of real text instead of
fresh draws, and it ignores one thing a real run does: the context after an accepted draft token
is the draft's accepted token (distributed as min(p, q)/α), not the text's token, so later
pairs are those of a slightly different context. docs/howto/pair.md measures that error
(predicted vs measured, ``pair_accept.csv``).

For a token-wise rule the draft at position s is accepted with probability β_s (α_s for the
sampling rules, q_s(argmax p_s) for an argmax rule, :func:`acceptance`), independently across
positions given the pairs. A document of T positions ends generation: a round from t emits
min(accepted + 1, T - t) tokens. Then, exactly:

* the law of one round from every start (:func:`tokenwise_rounds`, any scheme's law per start
  enters the same way),
* the expected target calls to traverse each document, by a backward DP over positions, and the
  expected number of rounds that start at each position, forward (:func:`traverse`),
* tokens per target call = Σ_d T_d / Σ_d E[calls_d] (documents in the proportion they appear; a
  long run that starts a uniformly random document whenever one ends has exactly this rate, by
  renewal-reward), acceptance by position within the draft, and the stationary law of round
  starts (:class:`PositionalLaw`),
* a percentile bootstrap over documents for the CI of any ratio of per-document sums
  (:func:`bootstrap_ratio`): how much the number depends on which text the trace followed.

:func:`simulate` is the Monte Carlo of the same model (chains from the stationary law of round
starts, Bernoulli acceptances, a fresh document when one ends), whose CI must cover the exact
rate.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from specsim.sampling import FloatArray, IntArray
from specsim.traces.format import Trace
from specsim.verify import rule_spec

__all__ = [
    "PositionalLaw",
    "acceptance",
    "bootstrap_ratio",
    "paired_difference",
    "percentile_interval",
    "positional_law",
    "resampled_sums",
    "simulate",
    "tokenwise_rounds",
    "traverse",
    "truncate",
]

BOOTSTRAP = 2000  # resamples of the documents
LEVEL = 0.95


def acceptance(trace: Trace, rule: str) -> FloatArray:
    """β per position (N,): what a token-wise rule accepts a draft with, from the full rows.

    Sampling rules (``correct``, ``no_resample``, ...) accept with α_t = Σ min(p_t, q_t); an
    argmax rule (``greedy``) with q_t(argmax p_t)."""
    if rule_spec(rule).accept == "argmax":
        return trace.greedy_acceptance()
    return np.clip(trace.alpha, 0.0, 1.0)


def _padded(values: FloatArray, doc_start: IntArray, extra: int, fill: float) -> FloatArray:
    """Per-position values as (D, L + extra), document d in row d, ``fill`` beyond its end."""
    lengths = np.diff(doc_start)
    d = lengths.size
    out = np.full((d, int(lengths.max()) + extra), fill)
    row = np.repeat(np.arange(d), lengths)
    col = np.arange(values.shape[0]) - np.repeat(doc_start[:-1], lengths)
    out[row, col] = values
    return out


def _unpad(padded: np.ndarray, doc_start: IntArray) -> np.ndarray:
    lengths = np.diff(doc_start)
    row = np.repeat(np.arange(lengths.size), lengths)
    col = np.arange(int(doc_start[-1])) - np.repeat(doc_start[:-1], lengths)
    return padded[row, col]


def truncate(emitted: FloatArray, doc_start: IntArray) -> FloatArray:
    """Cut each start's law of emitted tokens (N, W) at its document's end: a round from t
    that would emit n > T - t tokens emits T - t (the document is done)."""
    remaining = np.repeat(doc_start[1:], np.diff(doc_start)) - np.arange(int(doc_start[-1]))
    out = emitted.copy()
    width = emitted.shape[1]
    over = np.arange(width)[None, :] >= remaining[:, None]
    cut = np.where(over, emitted, 0.0).sum(axis=1)
    out[over] = 0.0
    fits = remaining < width
    out[np.flatnonzero(fits), remaining[fits]] += cut[fits]
    return out


def tokenwise_rounds(beta: FloatArray, doc_start: IntArray, gamma: int) -> FloatArray:
    """Law of the tokens one round emits from every start (N, γ+2), column n = P(n tokens),
    for a token-wise rule accepting the draft at position s with probability β_s, cut at the
    document's end (:func:`truncate`)."""
    b = _padded(beta, doc_start, gamma, 1.0)  # beyond the end: any value, truncate() decides
    d, width = b.shape
    length = width - gamma
    # survival[:, :, j] = P(the first j drafts are accepted) = prod_{i<j} b[:, t+i]
    survival = np.ones((d, length, gamma + 1))
    for j in range(1, gamma + 1):
        survival[:, :, j] = survival[:, :, j - 1] * b[:, j - 1 : j - 1 + length]
    emitted = np.zeros((d, length, gamma + 2))
    for n in range(gamma):  # n drafts accepted, then a rejection: n + 1 tokens
        emitted[:, :, n + 1] = survival[:, :, n] * (1.0 - b[:, n : n + length])
    emitted[:, :, gamma + 1] = survival[:, :, gamma]
    flat = _unpad(emitted, doc_start)
    return truncate(flat, doc_start)


def traverse(emitted: FloatArray, doc_start: IntArray) -> tuple[FloatArray, FloatArray]:
    """(expected target calls to traverse each document (D,), expected rounds that start at
    each position (N,)) from each start's law of emitted tokens (N, W) (cut at the end).

    Backward: E(t) = 1 + Σ_n P(n | t) E(t + n), E(T) = 0. Forward: v(0) = 1,
    v(t + n) += v(t) P(n | t). Σ_t v(t) = E(0) (a test checks it)."""
    if np.any(emitted[:, 0] > 0):
        raise ValueError("a round emits at least one token")
    lengths = np.diff(doc_start)
    d, width = lengths.size, emitted.shape[1]
    length = int(lengths.max())
    law = np.zeros((d, length + width, width))
    law[np.repeat(np.arange(d), lengths),
        np.arange(int(doc_start[-1])) - np.repeat(doc_start[:-1], lengths)] = emitted
    calls = np.zeros((d, length + width))  # zero at and beyond each document's end
    inside = np.arange(length)[None, :] < lengths[:, None]
    for t in range(length - 1, -1, -1):
        step = 1.0 + (law[:, t, 1:] * calls[:, t + 1 : t + width]).sum(axis=1)
        calls[:, t] = np.where(inside[:, t], step, 0.0)
    visits = np.zeros((d, length + width))
    visits[:, 0] = 1.0
    for t in range(length):
        v = np.where(inside[:, t], visits[:, t], 0.0)
        visits[:, t + 1 : t + width] += v[:, None] * law[:, t, 1:]
    return calls[:, 0].copy(), _unpad(visits, doc_start)


@dataclass(frozen=True)
class PositionalLaw:
    """A rule's exact positional law on a trace at one γ.

    ``emitted`` (N, γ+2): law of the tokens a round from each start emits (cut at the end);
    ``calls`` (D,): expected target calls to traverse each document; ``visits`` (N,): expected
    rounds starting at each position; ``beta`` (N,): acceptance per position (token-wise rules;
    None for a scheme given by its round laws)."""

    gamma: int
    doc_start: IntArray
    emitted: FloatArray
    calls: FloatArray
    visits: FloatArray
    beta: FloatArray | None = None

    @property
    def lengths(self) -> IntArray:
        return np.diff(self.doc_start)

    @property
    def tokens_per_call(self) -> float:
        """Σ_d T_d / Σ_d E[calls_d]: the long-run tokens per target call."""
        return float(self.lengths.sum() / self.calls.sum())

    @property
    def stationary(self) -> FloatArray:
        """Stationary law of round starts (N,) of the long run that restarts a uniformly random
        document whenever one ends: expected visits over expected rounds."""
        return self.visits / self.calls.sum()

    def tokens_ci(self, seed: int, resamples: int = BOOTSTRAP) -> tuple[float, float]:
        """Percentile bootstrap CI of tokens per call over documents."""
        return bootstrap_ratio(self.lengths.astype(np.float64), self.calls, seed, resamples)

    def accepted_law(self) -> FloatArray:
        """Stationary law of the drafts counted accepted per round (γ+1,): emitted - 1."""
        return np.asarray(self.stationary @ self.emitted[:, 1:], dtype=np.float64)

    def accept_by_position(self) -> tuple[FloatArray, FloatArray, FloatArray]:
        """Per draft position i = 1..γ: (rate, std, tested weight) where rate = P(draft i
        accepted | draft i tested), averaged over round starts with their long-run frequency,
        counting only drafts that lie inside the document; std is the spread of β at that
        draft position across those starts (same weights); weight the expected tests per round.
        Token-wise rules only."""
        if self.beta is None:
            raise ValueError("acceptance by position needs the per-position β of a token-wise "
                             "rule")
        g = self.gamma
        b = _padded(self.beta, self.doc_start, g, 0.0)
        v = _padded(self.stationary, self.doc_start, g, 0.0)
        length = b.shape[1] - g
        reach = np.ones_like(v[:, :length])  # P(draft i tested | start t)
        rate, std, weight = (np.zeros(g) for _ in range(3))
        for i in range(g):
            bi = b[:, i : i + length]  # zero beyond the end: not a draft of this document
            inside = _padded(np.ones_like(self.beta), self.doc_start, g, 0.0)[:, i : i + length]
            w = v[:, :length] * reach * inside
            total = w.sum()
            weight[i] = total
            if total > 0:
                rate[i] = (w * bi).sum() / total
                std[i] = np.sqrt(max((w * (bi - rate[i]) ** 2).sum() / total, 0.0))
            reach = reach * bi
        return rate, std, weight


def positional_law(beta: FloatArray, doc_start: IntArray, gamma: int) -> PositionalLaw:
    """The exact positional law of a token-wise rule accepting with β (N,) at one γ."""
    if gamma < 1:
        raise ValueError(f"gamma must be >= 1, got {gamma}")
    emitted = tokenwise_rounds(beta, doc_start, gamma)
    calls, visits = traverse(emitted, doc_start)
    return PositionalLaw(gamma, doc_start, emitted, calls, visits, beta)


def resampled_sums(columns: list[FloatArray], seed: int | np.random.SeedSequence,
                   resamples: int = BOOTSTRAP) -> FloatArray:
    """(resamples, k): the sums of each of k per-document columns over the documents resampled
    with replacement, the same resample for every column.

    Sums are taken in a fixed order on integer resample counts (no BLAS), so they depend only on
    the seed and the data."""
    cols = [np.asarray(c, dtype=np.float64) for c in columns]
    d = cols[0].size
    rng = np.random.default_rng(seed)
    out = np.empty((resamples, len(cols)))
    for lo in range(0, resamples, 256):
        hi = min(resamples, lo + 256)
        # one draw for the block: the same stream as one draw per resample, counted at once
        picks = rng.integers(0, d, (hi - lo, d)) + d * np.arange(hi - lo)[:, None]
        counts = np.bincount(picks.ravel(), minlength=(hi - lo) * d).reshape(hi - lo, d)
        counts = counts.astype(np.float64)
        for k, c in enumerate(cols):
            out[lo:hi, k] = (counts * c).sum(axis=1)
    return out


def percentile_interval(values: FloatArray, level: float = LEVEL) -> tuple[float, float]:
    """The central ``level`` percentile interval of bootstrap ``values``."""
    tail = (1.0 - level) / 2.0
    low, high = np.quantile(values, [tail, 1.0 - tail])
    return float(low), float(high)


def bootstrap_ratio(num: FloatArray, den: FloatArray, seed: int | np.random.SeedSequence,
                    resamples: int = BOOTSTRAP, level: float = LEVEL) -> tuple[float, float]:
    """Percentile bootstrap CI of Σ num / Σ den over documents (resampled with replacement)."""
    if np.asarray(num).size < 2:
        return (float("nan"), float("nan"))
    s = resampled_sums([num, den], seed, resamples)
    return percentile_interval(s[:, 0] / s[:, 1], level)


def paired_difference(num_a: FloatArray, den_a: FloatArray, num_b: FloatArray,
                      den_b: FloatArray, seed: int | np.random.SeedSequence,
                      resamples: int = BOOTSTRAP, level: float = LEVEL
                      ) -> tuple[float, float, float]:
    """Percentile CI and standard error of Σa/Σa' − Σb/Σb' under one bootstrap of the shared
    units (prompts: a trace's document and its measured runs): ``(low, high, se)``."""
    s = resampled_sums([num_a, den_a, num_b, den_b], seed, resamples)
    diffs = s[:, 0] / s[:, 1] - s[:, 2] / s[:, 3]
    return (*percentile_interval(diffs, level), float(diffs.std(ddof=1)))


def simulate(law: PositionalLaw, rng: np.random.Generator, chains: int, rounds: int,
             batches: int) -> np.ndarray:
    """Monte Carlo of the positional long run: histogram (batches, W-1) of emitted - 1 per round.

    Each chain starts at a round start drawn from the stationary law, plays ``rounds`` rounds
    (the tokens of each drawn from its start's law), and starts a uniformly random document
    when one ends. The mean of emitted tokens per round estimates ``law.tokens_per_call``."""
    starts = law.doc_start
    n = int(starts[-1])
    doc_of = np.repeat(np.arange(starts.size - 1), np.diff(starts))
    end_of = starts[1:][doc_of]
    cdf = np.cumsum(law.emitted, axis=1)
    cdf[:, -1] = 1.0
    station = np.cumsum(law.stationary)
    station[-1] = 1.0
    pos = np.minimum(np.searchsorted(station, rng.random(chains), side="right"), n - 1)
    width = law.emitted.shape[1]
    batch = (np.arange(chains) * batches) // chains
    hist = np.zeros((batches, width - 1), dtype=np.int64)
    for _ in range(rounds):
        u = rng.random(chains)
        k = (u[:, None] >= cdf[pos]).sum(axis=1)  # tokens emitted this round (>= 1)
        k = np.minimum(k, width - 1)
        np.add.at(hist, (batch, k - 1), 1)
        nxt = pos + k
        done = nxt >= end_of[pos]
        fresh = starts[rng.integers(0, starts.size - 1, chains)]
        pos = np.where(done, fresh, nxt)
    return hist
