"""Generation with KV caches: plain target sampling and [L] Alg. 1 (correct rule, temperature 1)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from specsim import timing
from specsim.llm.drafts import CachedLM, Draft, sample
from specsim.llm.loading import VOCAB, FloatArray, softmax, token_tensor
from specsim.realtext.rounds import verify


@dataclass
class Generation:
    tokens: list[int]  # new tokens only
    seconds: float
    target_calls: int = 0
    draft_steps: int = 0
    accepted: int = 0  # drafted tokens accepted
    tested: int = 0  # drafted positions tested (up to and including the first rejection)
    per_round: list[int] = field(default_factory=list)  # tokens emitted per round
    target_seconds: float = 0.0
    draft_seconds: float = 0.0
    verified: list[FloatArray] = field(default_factory=list)  # p rows used (if recorded)


def plain_generate(target: CachedLM, prompt: Sequence[int], n_new: int,
                   rng: np.random.Generator) -> Generation:
    """Autoregressive sampling from the target: one call (one position) per token."""
    target.reset()
    seq = list(prompt)
    t0 = timing.clock()
    for _ in range(n_new):
        seq.append(sample(softmax(target.next_logits(seq, 1))[0], rng.random()))
    gen = Generation(seq[len(prompt) :], timing.clock() - t0, target_calls=n_new)
    gen.per_round = [1] * n_new
    return gen


def speculative_generate(target: CachedLM, draft: Draft, prompt: Sequence[int], gamma: int,
                         n_new: int, rng: np.random.Generator, record: bool = False
                         ) -> Generation:
    """[L] Alg. 1 (correct rule, temperature 1) until at least ``n_new`` tokens are emitted.

    Per round: γ draft steps, ONE target call verifying γ+1 positions (the pending token plus
    the γ drafts) with the KV cache, then :func:`specsim.realtext.rounds.verify` -- the same
    accept / first-rejection / residual-or-bonus code as tier 1, for one chain. Both caches
    are cropped back to the accepted prefix. Uniforms: u[i] drafts token i, u[γ+i] tests it,
    u[2γ] draws the final token, as in the engine.
    """
    target.reset()
    draft.reset()
    seq = list(prompt)
    gen = Generation([], 0.0)
    t_start = timing.clock()
    while len(seq) - len(prompt) < n_new:
        u = rng.random((2 * gamma + 1, 1))
        t0 = timing.clock()
        q = np.empty((gamma, 1, VOCAB))
        x = np.empty((gamma, 1), dtype=np.intp)
        for i in range(gamma):
            q[i, 0] = draft.probs(seq + x[:i, 0].tolist())
            x[i, 0] = sample(q[i, 0], u[i, 0])
        t1 = timing.clock()
        p = softmax(target.next_logits(seq + x[:, 0].tolist(), gamma + 1))[:, None, :]
        t2 = timing.clock()
        res = verify(p, q, x, "correct", u)
        n_acc = int(res.n_accepted[0])
        if record:
            gen.verified.append(p[: n_acc + 1, 0])
        target.keep(len(seq) + n_acc)
        draft.keep(len(seq) + n_acc)
        seq += [*x[:n_acc, 0].tolist(), int(res.final[0])]
        gen.target_calls += 1
        gen.draft_steps += gamma
        gen.accepted += n_acc
        gen.tested += min(n_acc + 1, gamma)
        gen.per_round.append(n_acc + 1)
        gen.draft_seconds += t1 - t0
        gen.target_seconds += t2 - t1
    gen.seconds = timing.clock() - t_start
    gen.tokens = seq[len(prompt) :]
    return gen


def cache_consistency(model: Any, prompt: Sequence[int], gen: Generation) -> float:
    """Largest |p_cached - p_full| over every distribution the generator verified against,
    where p_full comes from ONE cache-free forward pass over the whole final sequence."""
    import torch

    seq = [*prompt, *gen.tokens]
    with torch.inference_mode():
        full = softmax(model(token_tensor([seq], model)).logits[0])
    worst, pos = 0.0, len(prompt) - 1  # row pos predicts token pos + 1
    for rows in gen.verified:
        worst = max(worst, float(np.abs(full[pos : pos + len(rows)] - rows).max()))
        pos += len(rows)
    return worst
