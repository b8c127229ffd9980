"""Speculative sampling over a batch of sequences with KV caches ([L] Alg. 1, temperature 1).

Sequences of one batch accept different numbers of drafts each round, so their lengths become
ragged. Here every model (target and draft) keeps ONE KV cache of a common number of *slots*
for the whole batch (:class:`BatchLM`), and a per-sequence mask of which slots hold one of that
sequence's tokens:

* a forward appends the same number of slots to every sequence; its attention mask is the
  slots' mask (a masked slot is invisible to every later query), its position ids count each
  sequence's own valid tokens (RoPE sees each sequence's true positions, holes or not);
* after verification sequence i keeps its pending token and its n_i accepted drafts; the slots
  of its rejected drafts are masked. The cache is then cropped to the longest kept prefix in
  the batch: the slots no sequence kept are removed, the others' rejected slots stay as masked
  holes (at most K per sequence per round; they cost attention, not correctness);
* the draft never saw its own last draft x_K: a sequence that accepted all K feeds it at the
  next round's first draft step, in a slot masked for the others (the step feeds two tokens a
  sequence only when some sequence needs it).

Prompts are of one length (held-out windows of ``prompt_tokens``): all but the last token are
prefilled; the last is the first round's pending token. The accept / first-rejection /
residual-or-bonus code is :func:`specsim.engine.verify_round`, vectorised over the batch's
chains, with the uniforms laid out as :func:`.generation.speculative_generate` lays them (u[i]
drafts token i, u[K+i] tests it, u[2K] draws the final token), one column a sequence. K = 0 is
plain batched sampling from the target. The wall time is the decoding loop's (after prefill).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from specsim import timing
from specsim.engine import verify_round
from specsim.pairs.llm.loading import FloatArray, softmax, token_tensor
from specsim.sampling import sample_rows

IntArray = NDArray[np.int64]
BoolArray = NDArray[np.bool_]


class BatchLM:
    """A causal LM over a batch, one shared KV cache of common slot count (module docstring).

    ``forward(tokens, valid)`` appends ``tokens`` (b, k) in k new slots (``valid`` (b, k):
    which of them hold a token of that sequence) in ONE forward call and returns the logits of
    the k slots (b, k, V); ``keep(new, kept)`` keeps, of the ``new`` newest slots (all valid),
    the first ``kept[i]`` for sequence i, masks the rest and crops the slots none kept.
    """

    def __init__(self, model: Any) -> None:
        self.model = model
        self.reset(0)

    def reset(self, batch: int) -> None:
        self.cache: Any = None
        self.mask = np.zeros((batch, 0), dtype=bool)
        self.pos = np.zeros(batch, dtype=np.int64)  # valid tokens of each sequence so far

    @property
    def slots(self) -> int:
        return self.mask.shape[1]

    def forward(self, tokens: IntArray, valid: BoolArray | None = None) -> Any:
        import torch

        tokens = np.asarray(tokens, dtype=np.int64)
        valid = np.ones(tokens.shape, dtype=bool) if valid is None else np.asarray(valid, bool)
        # a slot's position: the sequence's valid tokens before it (a masked slot gets the
        # next one's, and is never attended to)
        pos = self.pos[:, None] + np.cumsum(valid, axis=1) - valid
        mask = np.concatenate([self.mask, valid], axis=1)
        with torch.inference_mode():
            out = self.model(input_ids=token_tensor(tokens, self.model),
                             attention_mask=token_tensor(mask, self.model),
                             position_ids=token_tensor(pos, self.model), cache=self.cache,
                             use_cache=True)
        self.cache, self.mask = out.cache, mask
        self.pos = self.pos + valid.sum(axis=1)
        return out.logits

    def keep(self, new: int, kept: IntArray) -> None:
        kept = np.asarray(kept, dtype=np.int64)
        start = self.slots - new
        drop = np.arange(new)[None, :] >= kept[:, None]  # (b, new): rejected slots
        self.mask[:, start:] &= ~drop
        self.pos = self.pos - drop.sum(axis=1)
        cut = new - int(kept.max())
        if cut > 0:
            self.cache.crop(-cut)  # negative: remove that many slots
            self.mask = self.mask[:, : self.slots - cut]


@dataclass
class BatchGeneration:
    """One batched run: the new tokens of every sequence, the decoding loop's wall time, and
    the prefix-acceptance record (one entry per sequence and round: drafts accepted)."""

    tokens: list[list[int]]
    seconds: float
    gamma: int
    rounds: int = 0  # target forwards of the loop
    accepted: list[int] = field(default_factory=list)  # n_i per (round, sequence)
    verified: list[list[FloatArray]] = field(default_factory=list)  # per sequence: p rows used

    @property
    def emitted(self) -> int:
        return sum(len(t) for t in self.tokens)

    @property
    def tokens_per_second(self) -> float:
        return self.emitted / self.seconds

    def histogram(self) -> IntArray:
        """h_0..h_K: (sequence, round) pairs that accepted exactly j drafts."""
        return np.bincount(np.asarray(self.accepted, dtype=np.int64), minlength=self.gamma + 1)


def batched_generate(target: BatchLM, draft: BatchLM | None, prompts: Sequence[Sequence[int]],
                     gamma: int, n_new: int, rng: np.random.Generator, record: bool = False
                     ) -> BatchGeneration:
    """Speculative sampling (module docstring) of every prompt at once, until every sequence
    has at least ``n_new`` new tokens (a sequence done early keeps decoding with the batch, its
    tokens counted: the batch stays b sequences); ``gamma`` 0: plain sampling, no draft.
    ``record``: keep each sequence's p rows (:func:`batch_cache_consistency`)."""
    p0 = np.asarray(prompts, dtype=np.int64)
    if p0.ndim != 2 or p0.shape[1] < 2:
        raise ValueError("prompts must be of one length, at least 2 tokens")
    b = p0.shape[0]
    if gamma and draft is None:
        raise ValueError("speculative sampling needs a draft")
    models = [target] + ([draft] if gamma and draft is not None else [])
    for lm in models:
        lm.reset(b)
        lm.forward(p0[:, :-1])
    seqs = [row.tolist() for row in p0]
    n0 = p0.shape[1]
    gen = BatchGeneration([], 0.0, gamma, verified=[[] for _ in range(b)])
    lag = np.zeros(b, dtype=bool)  # the draft lacks the token before the pending one
    rows = np.arange(b)
    t0 = timing.clock()
    while min(len(s) for s in seqs) - n0 < n_new:
        u = rng.random((2 * gamma + 1, b))
        pending = np.array([s[-1] for s in seqs], dtype=np.int64)
        if gamma == 0:
            p = softmax(target.forward(pending[:, None])[:, -1])
            tok = sample_rows(p, u[0])
            for i in range(b):
                seqs[i].append(int(tok[i]))
                if record:
                    gen.verified[i].append(p[i : i + 1])
            gen.rounds += 1
            continue
        assert draft is not None
        x = np.empty((gamma, b), dtype=np.int64)
        qs = []
        for j in range(gamma):
            if j == 0 and lag.any():
                before = np.array([s[-2] for s in seqs], dtype=np.int64)
                logits = draft.forward(np.stack([before, pending], axis=1),
                                       np.stack([lag, np.ones(b, dtype=bool)], axis=1))
            else:
                logits = draft.forward((pending if j == 0 else x[j - 1])[:, None])
            qs.append(softmax(logits[:, -1]))
            x[j] = sample_rows(qs[j], u[j])
        q = np.stack(qs)  # (γ, b, V)
        tokens = np.concatenate([pending[:, None], x.T], axis=1)  # (b, γ+1)
        p = np.moveaxis(softmax(target.forward(tokens)), 1, 0)  # (γ+1, b, V)
        res = verify_round(p, q, x, "correct", u)
        n_acc = np.asarray(res.n_accepted, dtype=np.int64)
        target.keep(gamma + 1, n_acc + 1)
        draft.keep(gamma, np.minimum(n_acc, gamma - 1) + 1)  # pending, x_1..x_{γ-1} fed
        lag = n_acc == gamma
        final = np.asarray(res.final)
        for i in rows:
            seqs[i] += [*x[: n_acc[i], i].tolist(), int(final[i])]
            if record:
                gen.verified[i].append(p[: n_acc[i] + 1, i])
        gen.accepted += n_acc.tolist()
        gen.rounds += 1
    gen.seconds = timing.clock() - t0
    gen.tokens = [s[n0:] for s in seqs]
    return gen


def batch_cache_consistency(model: Any, prompts: Sequence[Sequence[int]],
                            gen: BatchGeneration) -> float:
    """Largest |p_cached - p_full| over every row the batched loop verified against, p_full
    from ONE cache-free forward of each sequence alone (its prompt and its new tokens)."""
    import torch

    worst = 0.0
    for prompt, new, verified in zip(prompts, gen.tokens, gen.verified, strict=True):
        seq = [*prompt, *new]
        with torch.inference_mode():
            full = softmax(model(token_tensor([seq], model)).logits[0])
        pos = len(prompt) - 1  # row pos predicts token pos + 1
        for rows in verified:
            worst = max(worst, float(np.abs(full[pos : pos + len(rows)] - rows).max()))
            pos += len(rows)
    return worst
