"""The drafts and the KV-cached runner: transformer drafts (int8, layer-skipping) and token
n-gram drafts (:class:`specsim.ngram.NGramModel` over the tokenizer's vocabulary)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from specsim.ngram import NGramModel
from specsim.pairs.llm.loading import FloatArray, softmax, token_tensor
from specsim.sampling import sample_rows


class CachedLM:
    """A causal LM plus its KV cache over one growing sequence (batch 1).

    ``next_logits(seq, k)`` feeds the tokens of ``seq`` not yet in the cache in ONE forward
    call and returns the logits of its last k positions (row j predicts the token after
    ``seq[:len(seq) - k + 1 + j]``); ``keep(n)`` drops cached positions beyond the first n.
    """

    def __init__(self, model: Any) -> None:
        self.model = model
        self.cache: Any = None
        self.n = 0

    def reset(self) -> None:
        self.cache, self.n = None, 0

    def next_logits(self, seq: Sequence[int], k: int = 1) -> Any:
        import torch

        new = list(seq[self.n :])
        if len(new) < k:
            raise ValueError("asked for logits of positions already in the cache")
        with torch.inference_mode():
            out = self.model(token_tensor([new], self.model), cache=self.cache, use_cache=True,
                             logits_to_keep=k)
        self.cache, self.n = out.cache, len(seq)
        return out.logits[0]

    def keep(self, n: int) -> None:
        if n < self.n:
            self.cache.crop(n - self.n)  # negative: remove that many positions
            self.n = n


class ModelDraft:
    """A draft that is a (cheaper) transformer with its own KV cache."""

    def __init__(self, name: str, model: Any) -> None:
        self.name, self.lm = name, CachedLM(model)

    def reset(self) -> None:
        self.lm.reset()

    def probs(self, seq: Sequence[int]) -> FloatArray:
        return softmax(self.lm.next_logits(seq, 1))[0]

    def keep(self, n: int) -> None:
        self.lm.keep(n)


class NGramDraft:
    """A token n-gram draft: the last order-1 tokens are its whole state."""

    def __init__(self, name: str, model: NGramModel, order: int) -> None:
        self.name, self.model, self.order = name, model, order

    def reset(self) -> None:
        pass

    def probs(self, seq: Sequence[int]) -> FloatArray:
        ctx = last_context_id(seq, self.order - 1, self.model.V)
        return self.model.probs(np.array([ctx], dtype=np.int64), self.order)[0]

    def keep(self, n: int) -> None:
        pass


Draft = ModelDraft | NGramDraft


def last_context_id(seq: Sequence[int], length: int, vocab: int) -> int:
    """Id of the last ``length`` tokens of ``seq`` in :mod:`specsim.ngram`'s convention (the
    most recent token least significant), as :func:`specsim.ngram.context_ids` numbers them."""
    out = 0
    for tok in seq[len(seq) - length :] if length else ():
        out = out * vocab + int(tok)
    return out


def sample(p: FloatArray, u: float) -> int:
    """Inverse-CDF draw (:func:`specsim.sampling.sample_rows`) from one distribution."""
    return int(sample_rows(p[None, :], np.array([u]))[0])
