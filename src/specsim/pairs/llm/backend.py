"""A transformers pair as a pair backend (:class:`specsim.pairs.backend.PairBackend`).

The target is a causal LM (:class:`.drafts.CachedLM`'s model), the draft one of the tier's
drafts (:mod:`.drafts`: a model draft with its own KV cache, or a token n-gram). A chain is a
:class:`Chain`: its sequence (prompt and tokens emitted so far, the last one pending: not yet
in the target's cache) and its own KV caches of target and draft, so a batch of chains is a
numpy object array of them. A round runs :func:`.generation.chain_round` on each chain in
turn -- the code of :func:`.generation.speculative_generate`, so one chain's rounds are that
loop's, draw for draw, with batch-1 numerics (the batched loop with its shared, masked cache
is :mod:`.batched`). torch is imported only where a model runs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from specsim.pairs.backend import Contexts, FloatArray, IntArray, RoundCounts
from specsim.pairs.llm.drafts import CachedLM, Draft, ModelDraft, sample
from specsim.pairs.llm.generation import chain_round
from specsim.pairs.llm.loading import VOCAB, softmax


class Chain:
    """One generation: ``seq`` (its last token pending) and its caches ``target``, ``draft``."""

    def __init__(self, seq: Sequence[int], target: CachedLM, draft: Draft) -> None:
        if len(seq) < 1:
            raise ValueError("a chain starts from a prompt of at least one token")
        self.seq, self.target, self.draft = list(seq), target, draft

    def settle(self) -> None:
        """Bring both caches to exactly the tokens before the pending one (untimed set-up of
        a timed call)."""
        caches = [self.target] + ([self.draft.lm] if isinstance(self.draft, ModelDraft) else [])
        n = len(self.seq) - 1
        for lm in caches:
            lm.keep(n)
            if lm.n < n:
                lm.next_logits(self.seq[:n], 1)


class TransformersBackend:
    """Target ``model`` (a transformers causal LM) and ``draft`` behind the protocol."""

    vocab = VOCAB

    def __init__(self, model: Any, draft: Draft, name: str | None = None) -> None:
        self.model, self.draft = model, draft
        self.name = name or draft.name

    def _fresh_draft(self) -> Draft:
        """A draft with a cache of its own (an n-gram draft has no state: it is shared)."""
        if isinstance(self.draft, ModelDraft):
            return ModelDraft(self.draft.name, self.draft.lm.model)
        return self.draft

    def chains(self, prompts: Sequence[Any], replicas: int) -> Contexts:
        out = np.empty(len(prompts) * replicas, dtype=object)
        for j in range(out.size):
            out[j] = Chain(prompts[j // replicas], CachedLM(self.model), self._fresh_draft())
        return out

    def rows(self, contexts: Contexts) -> tuple[FloatArray, FloatArray]:
        p = np.empty((contexts.shape[0], self.vocab))
        q = np.empty_like(p)
        for j, c in enumerate(contexts):
            n = len(c.seq) - 1
            p[j] = softmax(c.target.next_logits(c.seq, 1))[0]
            c.target.keep(n)
            q[j] = c.draft.probs(c.seq)
            c.draft.keep(n)
        return p, q

    def round(self, contexts: Contexts, gamma: int, rule: str, u: FloatArray) -> RoundCounts:
        n = contexts.shape[0]
        accepted = np.empty(n, dtype=np.int64)
        beta = np.empty((gamma, n))
        for j, c in enumerate(contexts):
            rnd = chain_round(c.target, c.draft, c.seq, gamma, rule, u[:, j : j + 1])
            accepted[j] = rnd.accepted
            beta[:, j] = np.minimum(rnd.p[:-1], rnd.q).sum(axis=-1)
            c.seq += [*rnd.drafts[: rnd.accepted], rnd.final]
        return RoundCounts(gamma, accepted, beta, contexts)

    def target_call(self, contexts: Contexts, tokens: IntArray) -> Callable[[int], object]:
        k = tokens.shape[1] + 1
        for c in contexts:
            c.settle()

        def call(r: int) -> None:
            for c, more in zip(contexts, np.asarray(tokens).tolist(), strict=True):
                c.target.next_logits(c.seq + more, k)
                c.target.keep(len(c.seq) - 1)
        return call

    def draft_step(self, contexts: Contexts, u: FloatArray) -> Callable[[int], object]:
        for c in contexts:
            c.settle()

        def step(r: int) -> None:
            for c, uj in zip(contexts, np.asarray(u).tolist(), strict=True):
                sample(c.draft.probs(c.seq), uj)
                c.draft.keep(len(c.seq) - 1)
        return step
