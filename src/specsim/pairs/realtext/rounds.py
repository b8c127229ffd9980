"""One speculative round with n-gram models, vectorised over chains."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from specsim.engine import RoundResult, verify_round
from specsim.ngram import (
    Corpus,
    FloatArray,
    IntArray,
    NGramModel,
    V,
    append,
    context_ids,
)
from specsim.realtext_settings import RULES
from specsim.sampling import sample_rows


@dataclass(frozen=True)
class NGramPair:
    """Target = ``model`` at ``target_order``, draft = the same model at ``draft_order``."""

    model: NGramModel
    target_order: int
    draft_order: int

    @property
    def length(self) -> int:
        """Characters of context the state keeps (the target's)."""
        return self.target_order - 1

    def target(self, ctx: IntArray) -> FloatArray:
        return self.model.probs(ctx, self.target_order)

    def draft(self, ctx: IntArray) -> FloatArray:
        return self.model.probs(ctx, self.draft_order)


@dataclass(frozen=True)
class Round:
    """A round's result plus what the experiments read from it."""

    result: RoundResult
    contexts: IntArray  # (γ+1, n): context before each position
    p: FloatArray  # (γ+1, n, V): target rows at every position
    q: FloatArray  # (γ, n, V): draft rows at every drafted position
    next_ctx: IntArray  # (n,)

    def beta(self) -> FloatArray:
        """(γ, n): sum min(p, q) at each drafted position (instrumentation, not the algorithm)."""
        return np.minimum(self.p[:-1], self.q).sum(axis=-1)


def spec_round(pair: NGramPair, ctx: IntArray, gamma: int, rule: str, u: FloatArray) -> Round:
    """[L] Alg. 1 for n chains at contexts ``ctx``: γ draft steps, ONE target call on γ+1 contexts.

    ``u`` holds 2γ+1 uniforms per chain, as in the engine: u[i] draws draft i.
    """
    if rule not in RULES:
        raise ValueError(f"rule {rule!r} not supported for n-gram models; use one of {RULES}")
    n = ctx.shape[0]
    ctxs = np.empty((gamma + 1, n), dtype=np.int64)
    ctxs[0] = ctx
    x = np.empty((gamma, n), dtype=np.intp)
    q = np.empty((gamma, n, V))
    for i in range(gamma):  # draft: autoregressive, one cheap call per position
        q[i] = pair.draft(ctxs[i])
        x[i] = sample_rows(q[i], u[i])
        ctxs[i + 1] = append(ctxs[i], x[i], pair.length)
    p = pair.target(ctxs)  # (γ+1, n, V): the single target call verifying γ+1 positions
    res = verify_round(p, q, x, rule, u)
    stop = ctxs[res.n_accepted, np.arange(n)]
    return Round(res, ctxs, p, q, append(stop, res.final, pair.length))


def plain_step(pair: NGramPair, ctx: IntArray, u: FloatArray) -> IntArray:
    """Plain autoregressive sampling from the target: one call, one character."""
    return append(ctx, sample_rows(pair.target(ctx), u), pair.length)


def prompts(corpus: Corpus, n: int, length: int, seed: np.random.SeedSequence) -> IntArray:
    """Context ids of ``n`` distinct held-out positions (the prompts' last ``length`` chars)."""
    ids = context_ids(corpus.heldout, length)
    rng = np.random.default_rng(seed)
    return ids[np.sort(rng.choice(ids.size, size=n, replace=n > ids.size))]
