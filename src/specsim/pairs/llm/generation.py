"""Generation with KV caches: plain target sampling and [L] Alg. 1 (correct rule, temperature 1)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from specsim import timing
from specsim.engine import verify_round
from specsim.pairs.llm.drafts import CachedLM, Draft, sample
from specsim.pairs.llm.loading import VOCAB, FloatArray, softmax, token_tensor


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


@dataclass(frozen=True)
class ChainRound:
    """One round of one sequence: its drafts x (γ,), drafts accepted, the final token, the rows
    verified (p (γ+1, V), q (γ, V)) and the seconds spent drafting and in the target call."""

    drafts: list[int]
    accepted: int
    final: int
    p: FloatArray
    q: FloatArray
    draft_seconds: float
    target_seconds: float


def chain_round(target: CachedLM, draft: Draft, seq: list[int], gamma: int, rule: str,
                u: FloatArray) -> ChainRound:
    """[L] Alg. 1 for one sequence ``seq`` (the prompt and what is emitted so far, its last
    token not yet in the target's cache): γ draft steps, ONE target call verifying γ+1
    positions (the pending token plus the γ drafts) with the KV cache, then
    :func:`specsim.engine.verify_round` -- the same accept / first-rejection /
    residual-or-bonus code as tier 1, for one chain. Both caches are cropped back to the
    accepted prefix; ``seq`` itself is left as it is. Uniforms ``u`` (2γ+1, 1): u[i] drafts
    token i, u[γ+i] tests it, u[2γ] draws the final token, as in the engine.
    """
    t0 = timing.clock()
    q = np.empty((gamma, 1, VOCAB))
    x = np.empty((gamma, 1), dtype=np.intp)
    for i in range(gamma):
        q[i, 0] = draft.probs(seq + x[:i, 0].tolist())
        x[i, 0] = sample(q[i, 0], u[i, 0])
    t1 = timing.clock()
    p = softmax(target.next_logits(seq + x[:, 0].tolist(), gamma + 1))[:, None, :]
    t2 = timing.clock()
    res = verify_round(p, q, x, rule, u)
    n_acc = int(res.n_accepted[0])
    target.keep(len(seq) + n_acc)
    draft.keep(len(seq) + n_acc)
    return ChainRound(x[:, 0].tolist(), n_acc, int(res.final[0]), p[:, 0], q[:, 0], t1 - t0,
                      t2 - t1)


def speculative_generate(target: CachedLM, draft: Draft, prompt: Sequence[int], gamma: int,
                         n_new: int, rng: np.random.Generator, record: bool = False
                         ) -> Generation:
    """[L] Alg. 1 (correct rule, temperature 1) until at least ``n_new`` tokens are emitted:
    :func:`chain_round` after round, ``rng.random((2γ+1, 1))`` uniforms a round."""
    target.reset()
    draft.reset()
    seq = list(prompt)
    gen = Generation([], 0.0)
    t_start = timing.clock()
    while len(seq) - len(prompt) < n_new:
        rnd = chain_round(target, draft, seq, gamma, "correct", rng.random((2 * gamma + 1, 1)))
        n_acc = rnd.accepted
        if record:
            gen.verified.append(rnd.p[: n_acc + 1])
        seq += [*rnd.drafts[:n_acc], rnd.final]
        gen.target_calls += 1
        gen.draft_steps += gamma
        gen.accepted += n_acc
        gen.tested += min(n_acc + 1, gamma)
        gen.per_round.append(n_acc + 1)
        gen.draft_seconds += rnd.draft_seconds
        gen.target_seconds += rnd.target_seconds
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
