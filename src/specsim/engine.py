"""The speculative-sampling engine, vectorised over independent chains.

One call to a ``*_round`` function plays one round of Leviathan et al. 2022 (arXiv 2211.17192),
Algorithm 1, for every chain at once: draft γ tokens with the draft model, verify all γ positions
in one (simulated) target call, stop at the first rejection and emit a residual (or bonus) token.
Sampling is by inverse CDF from uniforms (:mod:`specsim.sampling`), so a round consumes exactly
2γ+1 uniforms per chain: u[i] draws draft i, u[γ+i] tests it, u[2γ] draws the final token.

The four rules -- ``correct`` and the seed program's deliberate breakages ``greedy``,
``no_resample`` and ``continue`` (its ``verify_round``) -- are defined once, with their accept
step and rejection distribution, in :data:`specsim.verify.RULES`.

The i.i.d. path hands its drafted round to :func:`specsim.verify.verify_uniforms`; the Markov
path keeps its own loops for speed but tabulates the same pieces per (context, token) cell:
:func:`specsim.verify.acceptance_probability` (a chain accepts iff u < the cell) and
:func:`specsim.verify.residual`, chosen by the rule's ``on_rejection``.
Loops run over draft positions and rounds, never over chains.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from specsim.models.iid import iid_pairs
from specsim.models.spec import ModelSpec
from specsim.resources import Footprint
from specsim.sampling import (
    FloatArray,
    IntArray,
    TableSampler,
    inverse_cdf_rows,
    normalised_cdf,
)
from specsim.verify import (
    CLASSIC_RULES,
    Rule,
    acceptance_probability,
    accepted_uniforms,
    first_rejection,
    residual,
    rule_spec,
    verify_uniforms,
)

RULES: tuple[Rule, ...] = CLASSIC_RULES

CHUNK = 1 << 14  # chains advanced together; bounds memory at any number of chains or rounds


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
        if rule_spec(rule).keep_drafts:
            return np.where(self.n_accepted < self.gamma, self.gamma, self.gamma + 1)
        return self.n_accepted + 1

    def emitted(self, j: int) -> IntArray:
        """The j-th emitted token (valid where j < tokens): a draft, or the final token at n_acc."""
        return np.where(self.n_accepted == j, self.final, self.x[min(j, self.gamma - 1)])

    def next_context(self, rule: Rule) -> IntArray:
        """Last emitted token: the context the next round starts from."""
        if rule_spec(rule).keep_drafts:
            return np.where(self.n_accepted < self.gamma - 1, self.x[-1], self.final)
        return self.final


class MarkovKernel:
    """Precomputed tables for an order-1 Markov pair (P, Q): states are tokens."""

    def __init__(self, target: FloatArray, draft: FloatArray) -> None:
        if target.shape != draft.shape or target.ndim != 2 or target.shape[0] != target.shape[1]:
            raise ValueError(f"tables must be square and equal in shape: {target.shape}, "
                             f"{draft.shape}")
        self.p = np.ascontiguousarray(target, dtype=np.float64)
        self.q = np.ascontiguousarray(draft, dtype=np.float64)
        self.size = target.shape[0]
        # Accept probability per (context, token) cell and accept step ("ratio": min(1, p/q),
        # the seed's accept_prob; "argmax": one-hot greedy); a chain accepts iff u < the cell.
        # One table per accept step of the registry's rules (one rule stands for each step).
        steps = {spec.accept: spec for spec in map(rule_spec, CLASSIC_RULES)}
        self.accept_prob = {kind: acceptance_probability(self.p, self.q, spec.name).ravel()
                            for kind, spec in steps.items()}
        self._build_samplers()

    @staticmethod
    def footprint(size: int) -> Footprint:
        """Building one for S = ``size`` states: peak cells of the final-token sampler (2S
        rows) beside the acceptance tables, the draft sampler and the encoded tables kept
        (~20 (S, S); measured 21 M cells at S = 64 and 45 M at S = 1024); its samplers' work."""
        return Footprint(TableSampler.cells(2 * size, size) + 20.0 * size * size,
                         TableSampler.work(2 * size, size) + 2 * TableSampler.work(size, size),
                         what=f"Markov engine ({size} states)")

    def _final_rows(self) -> FloatArray:
        """Final-token table: rows [0, S) are p (bonus, and the rejection token of rules that
        sample p), rows [S, 2S) the residual (the rejection token of the other rules)."""
        return np.vstack([self.p, residual(self.p, self.q)])

    def _final_offset(self, gamma: int, rule: Rule) -> IntArray:
        """Per accepted count k (0..γ), the encoded offset of the :meth:`_final_rows` row
        sampled at the stopping context: S rows down where the round stopped at a rejection
        (k < γ) and the rule's rejection distribution is the residual."""
        rejected = np.arange(gamma + 1) < gamma
        if rule_spec(rule).on_rejection == "target":
            rejected[:] = False
        return (self.size * self.m) * rejected.astype(np.intp)

    def _build_samplers(self) -> None:
        """Guide tables of one common M for q and the final rows, tokens carried as
        ``token * M``: a chain's state is the offset of its row in every table, so a draw is
        one lookup at ``state + floor(u*M)`` (:meth:`TableSampler.lookup`)."""
        final = self._final_rows()
        m = max(TableSampler.guide_size(self.q, self.size),
                TableSampler.guide_size(final, self.size))
        self.draft_sampler = TableSampler(self.q, m_min=m, scale=m)
        self.final_sampler = TableSampler(final, m_min=m, scale=m)
        self.m = m = self.draft_sampler.m
        assert self.final_sampler.m == m
        self.shift = int(np.log2(m))
        self._accept_by_bucket: dict[str, FloatArray] = {}

    def accept_by_bucket(self, kind: str) -> FloatArray:
        """Accept probability of the (context, draft) cell a pure bucket of the draft sampler
        draws (built once per accept step): with it the accept test needs no cell index."""
        if kind not in self._accept_by_bucket:
            token = self.draft_sampler.pure_tokens().reshape(self.size, self.m)
            cells = self.accept_prob[kind].reshape(self.size, self.size)
            by_bucket = np.take_along_axis(cells, np.maximum(token, 0), axis=1)
            self._accept_by_bucket[kind] = np.where(token >= 0, by_bucket, np.nan).ravel()
        return self._accept_by_bucket[kind]

    def encode(self, tokens: IntArray) -> IntArray:
        """Token -> the state :meth:`advance` carries (token * M)."""
        return tokens << self.shift

    def _play(self, state: IntArray, gamma: int, rule: Rule,
              u: FloatArray) -> tuple[IntArray, IntArray, IntArray]:
        """One round on encoded states: (encoded contexts and drafts (γ+1, n), accepted
        drafts, encoded final token)."""
        n = state.shape[0]
        m, shift, q = self.m, self.shift, self.draft_sampler
        kind = rule_spec(rule).accept
        by_bucket, by_cell = self.accept_by_bucket(kind), self.accept_prob[kind]
        b = np.empty((gamma + 1, n), dtype=np.intp)  # b[0] = context, b[i+1] = draft i
        b[0] = state
        accepted = np.empty((gamma, n), dtype=bool)
        for i in range(gamma):
            bucket = b[i] + (u[i] * m).astype(np.intp)
            if q.direct.dtype == np.intp:
                x = q.direct.take(bucket, mode="clip", out=b[i + 1])  # in range: no check
            else:
                x = q.direct.take(bucket, mode="clip")
            p_accept = by_bucket.take(bucket, mode="clip")
            fixed = q.resolve(x, bucket, u[i])
            if fixed.size:  # impure buckets: the accept probability of the drawn cell
                p_accept[fixed] = by_cell[(b[i, fixed] >> shift) * self.size + (x[fixed] >> shift)]
            if x.dtype != np.intp:
                b[i + 1] = x
            np.less(u[gamma + i], p_accept, out=accepted[i])
        n_acc = first_rejection(accepted, axis=0)
        stop = b.ravel()[n_acc * n + _lanes(n)]  # encoded context of the stopping position
        last = u[2 * gamma]
        row = stop + self._final_offset(gamma, rule)[n_acc]
        final = self.final_sampler.lookup(row + (last * m).astype(np.intp), last)
        return b, n_acc, final

    def advance(self, state: IntArray, gamma: int, rule: Rule,
                u: FloatArray) -> tuple[IntArray, IntArray]:
        """One round for the long-run estimate: (accepted drafts, next state) only.

        Same draws and the same semantics as :meth:`round` (tests hold them equal), on the
        encoded states of :meth:`encode`, skipping everything the long run does not need.
        """
        b, n_acc, final = self._play(state, gamma, rule, u)
        if rule_spec(rule).keep_drafts:
            final = np.where(n_acc < gamma - 1, b[gamma], final)
        return n_acc, final

    def round(self, ctx: IntArray, gamma: int, rule: Rule, u: FloatArray) -> RoundResult:
        """One round from contexts ``ctx`` (n,) with uniforms ``u`` (2γ+1, n)."""
        b, n_acc, final = self._play(self.encode(ctx), gamma, rule, u)
        return RoundResult(b[1:] >> self.shift, n_acc, (final >> self.shift).astype(np.intp))


def _lanes(n: int, _cache: dict[int, IntArray] = {}) -> IntArray:  # noqa: B006
    """``np.arange(n)``, made once per size (every round of a chunk uses it)."""
    if n not in _cache:
        _cache.clear()
        _cache[n] = np.arange(n)
    return _cache[n]


# One round for a chunk of chains: (state (n,), generator) -> (the count the histogram bins (n,),
# the next state (n,), draft tokens proposed (n,) or None when the caller does not count them).
Play = Callable[[IntArray, np.random.Generator], tuple[IntArray, IntArray, IntArray | None]]


def run_chains(play: Play, start: Callable[[int], IntArray], seed: np.random.SeedSequence,
               chains: int, rounds: int, burn_in: int, batches: int,
               width: int) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """The long-run simulation loop of every rule and scheme: ``chains`` independent chains,
    each from ``start(n)`` (its first state, for a chunk of n chains), ``burn_in`` rounds
    discarded, then ``rounds`` rounds whose counts (0 .. width - 1) are histogrammed per batch
    of chains (chain i belongs to batch i * batches // chains); returns the histogram
    (batches, width) and the draft tokens proposed per batch (batches,).

    Chains are advanced in chunks of ``CHUNK`` (:func:`chunks`), each chunk with its own child
    seed, so memory is bounded and results depend only on the seed, never on chunking.
    """
    hist = np.zeros(batches * width, dtype=np.int64)
    drafted = np.zeros(batches, dtype=np.int64)
    batch_of_chain = (np.arange(chains) * batches) // chains
    lo = 0
    for n, rng in chunks(chains, seed):
        batch = batch_of_chain[lo : lo + n]
        offset = batch * width
        lo += n
        state = start(n)
        for r in range(burn_in + rounds):
            count, state, drafts = play(state, rng)
            if r >= burn_in:
                hist += np.bincount(offset + count, minlength=hist.size)
                if drafts is not None:
                    drafted += np.bincount(batch, weights=drafts,
                                           minlength=batches).astype(np.int64)
    return hist.reshape(batches, width), drafted


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
    estimate the stationary long-run behaviour (:func:`run_chains` with
    :meth:`MarkovKernel.advance`).
    """
    buffer = np.empty((2 * gamma + 1) * min(chains, CHUNK))  # reused: no fresh pages a round

    def play(state: IntArray, rng: np.random.Generator) -> tuple[IntArray, IntArray, None]:
        # the stream of rng.random((2γ+1, n)), drawn into the buffer
        rows = (2 * gamma + 1, state.shape[0])
        u = rng.random(out=buffer[: rows[0] * rows[1]].reshape(rows))
        n_acc, nxt = kernel.advance(state, gamma, rule, u)
        return n_acc, nxt, None

    def first(n: int) -> IntArray:
        return kernel.encode(np.full(n, start, dtype=np.intp))

    return run_chains(play, first, seed, chains, rounds, burn_in, batches, gamma + 1)[0]


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
    for n, rng in chunks(trials, seed):
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


def verify_round(p: FloatArray, q: FloatArray, x: IntArray, rule: Rule, u: FloatArray
                 ) -> RoundResult:
    """Accept/reject γ drafts ``x`` (γ, n) given target rows p (γ+1, n, V) and draft rows
    q (γ, n, V), position-major (as the real-model tiers build them):
    :func:`specsim.verify.verify_uniforms` on the chain-major views, with the engine's uniforms
    u[γ:2γ] for acceptance and u[2γ] for the final token."""
    gamma = x.shape[0]
    res = verify_uniforms(np.moveaxis(p, 0, 1), np.moveaxis(q, 0, 1), x.T, rule,
                          u[gamma : 2 * gamma].T, u[2 * gamma])
    return RoundResult(x, res.accepted, res.final)


def iid_round(
    p: FloatArray, q: FloatArray, gamma: int, rule: Rule, u: FloatArray
) -> RoundResult:
    """One round of the i.i.d. stub: per-chain rows p, q of shape (n, positions, V).

    ``positions`` is γ+1 (a fresh pair per position) or 1 (one pair for the whole round, the
    notebook's ``speculative_step``). Drafts do not depend on context, so all γ are drawn at once.
    """
    p_all, q_draft, x = _iid_drafts(p, q, gamma, u)
    res = verify_uniforms(p_all, q_draft, x, rule, u[gamma : 2 * gamma].T, u[2 * gamma])
    return RoundResult(x.T, res.accepted, res.final)


def _iid_drafts(p: FloatArray, q: FloatArray, gamma: int,
                u: FloatArray) -> tuple[FloatArray, FloatArray, IntArray]:
    """The rows p (n, γ+1, V) and q (n, γ, V) a round of :func:`iid_round` meets (views of
    p, q where the positions allow: a pair per position, or one pair broadcast over the
    round) and its drafts (n, γ), drawn with ``u[:γ]``."""
    n, npos, v = p.shape
    if npos > gamma:
        p_all, q_draft = p[:, : gamma + 1], q[:, :gamma]
        cdf = normalised_cdf(q_draft)
    elif npos == 1:  # one row per chain: its CDF once, broadcast over the γ positions
        p_all = np.broadcast_to(p, (n, gamma + 1, v))
        q_draft = np.broadcast_to(q, (n, gamma, v))
        cdf = normalised_cdf(q)
    else:
        pos = np.minimum(np.arange(gamma + 1), npos - 1)
        p_all, q_draft = p[:, pos], q[:, pos[:gamma]]
        cdf = normalised_cdf(q_draft)
    return p_all, q_draft, inverse_cdf_rows(cdf, u[:gamma].T)


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

    def play(state: IntArray, rng: np.random.Generator) -> tuple[IntArray, IntArray, None]:
        n = state.shape[0]
        n_acc = np.empty(n, dtype=np.intp)
        for b in range(0, n, block):
            m = min(block, n - b)
            p, q = iid_pairs(spec, temperature, alpha, rng, (m, npos))
            u = rng.random((2 * gamma + 1, m))  # u[2γ], the final token's, is not needed
            p_all, q_draft, x = _iid_drafts(p, q, gamma, u)
            n_acc[b : b + m] = accepted_uniforms(p_all, q_draft, x, rule, u[gamma : 2 * gamma].T)
        return n_acc, state, None

    def first(n: int) -> IntArray:
        return np.zeros(n, dtype=np.intp)  # no state: rounds are independent

    return run_chains(play, first, seed, chains, rounds, 0, batches, gamma + 1)[0]


def chunks(count: int, seed: np.random.SeedSequence) -> Iterator[tuple[int, np.random.Generator]]:
    """Blocks of at most CHUNK of ``count`` chains or generations: (size, its own generator,
    from the next child of ``seed``). The children are spawned at once, so a second call on
    the same SeedSequence continues with fresh children (a schemes point's generations follow
    its chains)."""
    children = seed.spawn(-(-count // CHUNK))
    for lo, child in zip(range(0, count, CHUNK), children, strict=True):
        yield min(CHUNK, count - lo), np.random.default_rng(child)
