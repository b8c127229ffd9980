"""The speculative-sampling engine, vectorised over independent chains.

One call to a ``*_round`` function plays one round of Leviathan et al. 2022, Algorithm 1, for
every chain at once: draft γ tokens with the draft model, verify all γ positions in one
(simulated) target call, stop at the first rejection and emit a residual (or bonus) token.
Sampling is by inverse CDF from uniforms, so a round consumes exactly 2γ+1 uniforms per chain.

The four acceptance rules reproduce the from-scratch program's ``verify_round``:

* ``correct``      accept x with probability min(1, p(x)/q(x)); on rejection sample from
                   norm(max(p - q, 0)) (p itself when that residual has no mass).
* ``greedy``       BREAK: accept iff x is the target's argmax; on rejection sample the residual.
* ``no_resample``  BREAK: on rejection sample from p instead of the residual.
* ``continue``     BREAK: after the residual token keep emitting the rest of the drafted tokens.

Loops run over draft positions and rounds, never over chains.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from specsim.models import FloatArray, ModelSpec, iid_pairs, residual

Rule = Literal["correct", "greedy", "no_resample", "continue"]
RULES: tuple[Rule, ...] = ("correct", "greedy", "no_resample", "continue")
IntArray = NDArray[np.intp]

CHUNK = 1 << 14  # chains advanced together; bounds memory at any number of chains or rounds


def normalised_cdf(probs: FloatArray) -> FloatArray:
    """Cumulative sums along the last axis, divided by the total so the last entry is exactly 1.

    Dividing (rather than overwriting the last entry with 1) keeps zero-probability trailing
    tokens at zero width, so inverse-CDF sampling never returns them.
    """
    c = np.cumsum(probs, axis=-1)
    return c / c[..., -1:]


def inverse_cdf_rows(cdf: FloatArray, u: FloatArray) -> IntArray:
    """Sample one index per row of ``cdf`` (..., V) from uniforms ``u`` (...): #{k: cdf_k <= u}."""
    v = cdf.shape[-1]
    return np.minimum((cdf <= u[..., None]).sum(axis=-1), v - 1)


class TableSampler:
    """Exact inverse-CDF sampling from many rows of one table, vectorised over chains.

    A guide table (Chen & Asau's indexed search) splits [0, 1) into M = 2^k equal buckets.
    M grows (within a memory cap) until no bucket holds more than one *distinct* CDF value;
    then each bucket stores that value ``thr`` and the two tokens on either side of it, and a
    draw is one lookup and one comparison. Where the cap is reached first, a bucket stores the
    range of CDF indices a uniform in it can land on and vectorised bisection finishes the
    search. Either way the result is exactly ``#{k: cdf_k <= u}`` -- the token
    ``searchsorted(cdf, u, 'right')`` returns -- because M is a power of two and ``floor(u*M)``
    is exact. Zero-probability tokens have zero-width cells and are never returned.
    """

    MAX_ENTRIES = 1 << 22  # guide-table cap (rows * M)

    def __init__(self, table: FloatArray, m_min: int = 4) -> None:
        rows, v = table.shape
        cdf = normalised_cdf(np.asarray(table, dtype=np.float64))
        self.v = v
        self.cdf = cdf.ravel()
        m = 1 << max(2, int(np.ceil(np.log2(max(4 * v, m_min)))))
        while True:
            distinct = self._max_distinct(cdf, m)
            if distinct <= 1 or rows * m * 2 > self.MAX_ENTRIES:
                break
            m *= 2
        self.m = m
        edges = np.arange(m + 1) / m
        lo = np.empty((rows, m), dtype=np.intp)
        hi = np.empty((rows, m), dtype=np.intp)
        for r in range(rows):  # table construction only; sampling has no Python loop
            lo[r] = np.searchsorted(cdf[r], edges[:-1], side="right")
            hi[r] = np.searchsorted(cdf[r], edges[1:], side="left")
        hi = np.minimum(hi, v - 1)
        self.single = distinct <= 1
        if self.single:
            # the one CDF value inside the bucket (if any) and the token just past it
            thr = cdf[np.arange(rows)[:, None], np.minimum(lo, v - 1)]
            after = np.empty_like(lo)
            for r in range(rows):
                after[r] = np.searchsorted(cdf[r], thr[r], side="right")
            self.thr = thr.ravel()
            self.below = lo.astype(np.int32).ravel()
            self.above = np.minimum(after, v - 1).astype(np.int32).ravel()
            self.steps = 1 if distinct == 1 else 0  # 0: every breakpoint on a bucket edge
        else:
            self.lo = lo.astype(np.int32).ravel()
            self.hi = hi.astype(np.int32).ravel()
            span = int((hi - lo).max(initial=0))
            self.steps = int(np.ceil(np.log2(span + 1))) if span > 0 else 0

    @staticmethod
    def _max_distinct(cdf: FloatArray, m: int) -> int:
        """Most distinct CDF values strictly inside one bucket (m/M, (m+1)/M), over all rows."""
        worst = 0
        for row in cdf:
            vals = np.unique(row[(row > 0) & (row < 1)])
            inner = vals[vals * m != np.floor(vals * m)]  # values on an edge change nothing inside
            if inner.size:
                worst = max(worst, int(np.bincount(np.floor(inner * m).astype(np.intp)).max()))
        return worst

    def __call__(self, rows: IntArray, u: FloatArray) -> IntArray:
        bucket = rows * self.m + (u * self.m).astype(np.intp)
        if self.single:
            if self.steps == 0:
                return self.below[bucket].astype(np.intp)
            return np.where(u >= self.thr[bucket], self.above[bucket],
                            self.below[bucket]).astype(np.intp)
        lo = self.lo[bucket].astype(np.intp)
        if self.steps == 0:
            return lo
        hi = self.hi[bucket].astype(np.intp)
        for _ in range(self.steps):
            mid = (lo + hi) >> 1
            right = self.cdf[rows * self.v + mid] <= u
            lo = np.where(right, mid + 1, lo)
            hi = np.where(right, hi, mid)
        return lo


@dataclass(frozen=True)
class RoundResult:
    """One round for n chains: drafted tokens x (γ, n), accepted count, and the final token."""

    x: IntArray
    n_accepted: IntArray
    final: IntArray

    @property
    def gamma(self) -> int:
        return int(self.x.shape[0])

    def tokens(self, rule: Rule) -> IntArray:
        """Tokens emitted this round (``continue`` keeps the drafts after a rejection)."""
        if rule == "continue":
            return np.where(self.n_accepted < self.gamma, self.gamma, self.gamma + 1)
        return self.n_accepted + 1

    def emitted(self, j: int) -> IntArray:
        """The j-th emitted token (valid where j < tokens): a draft, or the final token at n_acc."""
        return np.where(self.n_accepted == j, self.final, self.x[min(j, self.gamma - 1)])

    def next_context(self, rule: Rule) -> IntArray:
        """Last emitted token: the context the next round starts from."""
        if rule == "continue":
            return np.where(self.n_accepted < self.gamma - 1, self.x[-1], self.final)
        return self.final


def first_rejection(accept: NDArray[np.bool_]) -> IntArray:
    """Number of leading accepted positions per chain (γ when all were accepted)."""
    alive = accept[0].copy()
    n_acc = alive.astype(np.intp)
    for row in accept[1:]:
        alive &= row
        n_acc += alive
    return n_acc


class MarkovKernel:
    """Precomputed tables for an order-1 Markov pair (P, Q): states are tokens."""

    def __init__(self, target: FloatArray, draft: FloatArray) -> None:
        if target.shape != draft.shape or target.ndim != 2 or target.shape[0] != target.shape[1]:
            raise ValueError(f"tables must be square and equal in shape: {target.shape}, "
                             f"{draft.shape}")
        self.p = np.ascontiguousarray(target, dtype=np.float64)
        self.q = np.ascontiguousarray(draft, dtype=np.float64)
        self.size = target.shape[0]
        # min(1, p/q) per (context, token) cell: the seed's accept_prob; q = 0 is never drafted.
        with np.errstate(divide="ignore", invalid="ignore"):
            self.ratio = np.where(self.q > 0, np.minimum(1.0, self.p / self.q), 0.0).ravel()
        self.argmax_p = self.p.argmax(axis=1)
        self.draft_sampler = TableSampler(self.q)
        # Final-token table: rows [0, S) sample p (bonus / no_resample), rows [S, 2S) the residual.
        self.final_sampler = TableSampler(np.vstack([self.p, residual(self.p, self.q)]))
        self._build_encoded()

    def _build_encoded(self) -> None:
        """Tables for :meth:`advance`: tokens carried as ``token * M`` (M = 2^k buckets).

        When both samplers need at most one comparison per draw, a common M lets a chain's
        state be the offset of its row in every table: a draw is ``state + floor(u*M)``, one
        lookup of the threshold and of the two candidate next states, no multiplication.
        """
        self.shift = -1  # no encoded path: advance() falls back to round()
        q, f = self.draft_sampler, self.final_sampler
        if not (q.single and f.single):
            return
        m = max(q.m, f.m)
        if q.m != m:
            q = TableSampler(self.q, m_min=m)
        if f.m != m:
            f = TableSampler(np.vstack([self.p, residual(self.p, self.q)]), m_min=m)
        if not (q.single and f.single and q.m == f.m == m):
            return
        s = self.size
        self.m, self.shift = m, int(np.log2(m))
        self.q_thr, self.f_thr = q.thr, f.thr
        self.q_above, self.q_below = q.above.astype(np.intp) * m, q.below.astype(np.intp) * m
        self.f_above, self.f_below = f.above.astype(np.intp) * m, f.below.astype(np.intp) * m
        ratio = np.zeros((s, m))
        ratio[:, : s] = self.ratio.reshape(s, s)
        self.ratio_enc = ratio.ravel()
        amax = np.full((s, m), -1, dtype=np.intp)
        amax[:, 0] = self.argmax_p * m
        self.argmax_enc = amax.ravel()

    def encode(self, tokens: IntArray) -> IntArray:
        """Token -> the state :meth:`advance` carries (token * M, or the token itself)."""
        return tokens * self.m if self.shift >= 0 else tokens

    def advance(self, state: IntArray, gamma: int, rule: Rule,
                u: FloatArray) -> tuple[IntArray, IntArray]:
        """One round for the long-run estimate: (accepted drafts, next state) only.

        Same draws and the same semantics as :meth:`round` (tests hold them equal), on the
        encoded states of :meth:`encode`, skipping everything the long run does not need.
        """
        if self.shift < 0:
            res = self.round(state, gamma, rule, u)
            return res.n_accepted, res.next_context(rule)
        n = state.shape[0]
        m = self.m
        b = np.empty((gamma + 1, n), dtype=np.intp)
        b[0] = state
        for i in range(gamma):
            bucket = b[i] + (u[i] * m).astype(np.intp)
            b[i + 1] = np.where(u[i] >= self.q_thr[bucket], self.q_above[bucket],
                                self.q_below[bucket])
        ctx, x = b[:-1], b[1:]
        if rule == "greedy":
            accept = x == self.argmax_enc[ctx]
        else:
            accept = u[gamma : 2 * gamma] < self.ratio_enc[ctx + (x >> self.shift)]
        n_acc = first_rejection(accept)
        stop = b.ravel()[n_acc * n + np.arange(n)]
        if rule != "no_resample":
            stop += (self.size * m) * (n_acc < gamma)
        last = u[2 * gamma]
        bucket = stop + (last * m).astype(np.intp)
        final = np.where(last >= self.f_thr[bucket], self.f_above[bucket], self.f_below[bucket])
        if rule == "continue":
            final = np.where(n_acc < gamma - 1, b[gamma], final)
        return n_acc, final

    def round(self, ctx: IntArray, gamma: int, rule: Rule, u: FloatArray) -> RoundResult:
        """One round from contexts ``ctx`` (n,) with uniforms ``u`` (2γ+1, n)."""
        n = ctx.shape[0]
        v = self.size
        xs = np.empty((gamma + 1, n), dtype=np.intp)  # xs[0] = context, xs[i+1] = draft i
        xs[0] = ctx
        for i in range(gamma):
            xs[i + 1] = self.draft_sampler(xs[i], u[i])
        x = xs[1:]
        cell = xs[:-1] * v + x  # (context, drafted token) of every position
        if rule == "greedy":
            accept = x == self.argmax_p[xs[:-1]]
        else:
            accept = u[gamma : 2 * gamma] < self.ratio[cell]
        n_acc = first_rejection(accept)
        stop = xs.ravel()[n_acc * n + np.arange(n)]  # context of the stopping position
        row = stop if rule == "no_resample" else stop + v * (n_acc < gamma)
        final = self.final_sampler(row, u[2 * gamma])
        return RoundResult(x, n_acc, final)


def long_run_markov(
    kernel: MarkovKernel,
    gamma: int,
    rule: Rule,
    seed: np.random.SeedSequence,
    chains: int,
    rounds: int,
    burn_in: int,
    batches: int,
    start: int = 0,
) -> NDArray[np.int64]:
    """Histogram of accepted drafts per round, per batch of chains: shape (batches, γ+1).

    Chains start at ``start`` and the first ``burn_in`` rounds are discarded, so the counts
    estimate the stationary long-run behaviour. Chains are advanced in chunks of ``CHUNK``, each
    chunk with its own child seed, so memory is bounded and results depend only on the seed.
    """
    hist = np.zeros(batches * (gamma + 1), dtype=np.int64)
    for n, rng, offset in _chain_chunks(chains, batches, gamma, seed):
        state = kernel.encode(np.full(n, start, dtype=np.intp))
        for r in range(burn_in + rounds):
            n_acc, state = kernel.advance(state, gamma, rule, rng.random((2 * gamma + 1, n)))
            if r >= burn_in:
                hist += np.bincount(offset + n_acc, minlength=hist.size)
    return hist.reshape(batches, gamma + 1)


def first_tokens_markov(
    kernel: MarkovKernel,
    gamma: int,
    rule: Rule,
    seed: np.random.SeedSequence,
    trials: int,
    start: int,
    token_of_state: IntArray,
    vocab: int,
) -> NDArray[np.int64]:
    """Counts (vocab, vocab) of the first two emitted tokens over ``trials`` fresh generations.

    Each generation starts at state ``start``; when the first round emits a single token a second
    round starts from it (the seed program's ``spec_generate(..., n_tokens=2)``).
    """
    counts = np.zeros(vocab * vocab, dtype=np.int64)
    for lo, child in zip(range(0, trials, CHUNK), seed.spawn(_n_chunks(trials)), strict=True):
        rng = np.random.default_rng(child)
        n = min(CHUNK, trials - lo)
        first_round = kernel.round(np.full(n, start, dtype=np.intp), gamma, rule,
                                   rng.random((2 * gamma + 1, n)))
        first = first_round.emitted(0)
        second = first_round.emitted(1)
        short = first_round.tokens(rule) < 2
        if short.any():
            again = kernel.round(first[short], gamma, rule,
                                 rng.random((2 * gamma + 1, int(short.sum()))))
            second[short] = again.emitted(0)
        cells = token_of_state[first] * vocab + token_of_state[second]
        counts += np.bincount(cells, minlength=counts.size)
    return counts.reshape(vocab, vocab)


def iid_round(
    p: FloatArray, q: FloatArray, gamma: int, rule: Rule, u: FloatArray
) -> RoundResult:
    """One round of the i.i.d. stub: per-chain rows p, q of shape (n, positions, V).

    ``positions`` is γ+1 (a fresh pair per position) or 1 (one pair for the whole round, the
    notebook's ``speculative_step``). Drafts do not depend on context, so all γ are drawn at once.
    """
    n, npos, _ = p.shape
    pos = np.minimum(np.arange(gamma + 1), npos - 1)
    q_draft = q[:, pos[:gamma]]  # (n, γ, V)
    p_all = p[:, pos]  # (n, γ+1, V)
    x = inverse_cdf_rows(normalised_cdf(q_draft), u[:gamma].T).T  # (γ, n)
    px = np.take_along_axis(p_all[:, :gamma], x.T[..., None], axis=2)[..., 0].T
    qx = np.take_along_axis(q_draft, x.T[..., None], axis=2)[..., 0].T
    if rule == "greedy":
        accept = x == p_all[:, :gamma].argmax(axis=2).T
    else:
        accept = u[gamma : 2 * gamma] * qx < px
    n_acc = first_rejection(accept)
    rejected = n_acc < gamma
    chains = np.arange(n)
    p_stop = p_all[chains, n_acc]
    if rule == "no_resample":
        dist = p_stop
    else:
        q_stop = q_draft[chains, np.minimum(n_acc, gamma - 1)]
        dist = np.where(rejected[:, None], residual(p_stop, q_stop), p_stop)
    final = inverse_cdf_rows(normalised_cdf(dist), u[2 * gamma])
    return RoundResult(x, n_acc, final)


def long_run_iid(
    spec: ModelSpec,
    temperature: float,
    alpha: float | None,
    gamma: int,
    rule: Rule,
    seed: np.random.SeedSequence,
    chains: int,
    rounds: int,
    batches: int,
) -> NDArray[np.int64]:
    """Histogram (batches, γ+1) of accepted drafts per round for the notebook's stub.

    Fresh (p, q) pairs are drawn every round (``share: round``) or every position
    (``share: position``); rounds are independent, so no burn-in is needed.
    """
    npos = gamma + 1 if spec.share == "position" else 1
    block = max(1, (1 << 18) // (npos * spec.vocab))  # (n, npos, V) draws of ~2 MB each
    hist = np.zeros(batches * (gamma + 1), dtype=np.int64)
    for n, rng, offset in _chain_chunks(chains, batches, gamma, seed):
        for _ in range(rounds):
            for b in range(0, n, block):
                m = min(block, n - b)
                p, q = iid_pairs(spec, temperature, alpha, rng, (m, npos))
                res = iid_round(p, q, gamma, rule, rng.random((2 * gamma + 1, m)))
                hist += np.bincount(offset[b : b + m] + res.n_accepted, minlength=hist.size)
    return hist.reshape(batches, gamma + 1)


def _n_chunks(n: int) -> int:
    return -(-n // CHUNK)


def _chain_chunks(
    chains: int, batches: int, gamma: int, seed: np.random.SeedSequence
) -> Iterator[tuple[int, np.random.Generator, IntArray]]:
    """Blocks of at most CHUNK chains: (size, its own generator, histogram offset per chain).

    Chain i belongs to batch i * batches // chains; the offset places its accepted-drafts count
    in that batch's row of the flattened (batches, γ+1) histogram.
    """
    batch_of_chain = (np.arange(chains) * batches) // chains
    for lo, child in zip(range(0, chains, CHUNK), seed.spawn(_n_chunks(chains)), strict=True):
        n = min(CHUNK, chains - lo)
        yield n, np.random.default_rng(child), batch_of_chain[lo : lo + n] * (gamma + 1)
