"""The character n-gram pair as a pair backend (:class:`specsim.pairs.backend.PairBackend`).

A chain is its context id (the target's last ``target_order - 1`` characters, int64), so a
batch of chains is an int64 array and a round is :func:`.rounds.spec_round`, vectorised over
chains. A target call verifying k positions is ONE :meth:`specsim.ngram.NGramModel.probs` on
the (n, k) contexts, as :mod:`.costs` times it; a draft step is the draft's row and one
inverse-CDF draw.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from specsim.ngram import V, append
from specsim.pairs.backend import Contexts, FloatArray, IntArray, RoundCounts
from specsim.pairs.realtext.rounds import NGramPair, spec_round
from specsim.sampling import sample_rows


class NGramBackend:
    """The n-gram pair ``pair`` (target and draft orders of one model) behind the protocol."""

    vocab = V

    def __init__(self, pair: NGramPair, name: str | None = None) -> None:
        self.pair = pair
        self.name = name or f"ngram_o{pair.draft_order}"

    def chains(self, prompts: Sequence[Any], replicas: int) -> Contexts:
        return np.repeat(np.asarray(prompts, dtype=np.int64), replicas)

    def rows(self, contexts: Contexts) -> tuple[FloatArray, FloatArray]:
        return self.pair.target(contexts), self.pair.draft(contexts)

    def round(self, contexts: Contexts, gamma: int, rule: str, u: FloatArray) -> RoundCounts:
        rnd = spec_round(self.pair, contexts, gamma, rule, u)
        return RoundCounts(gamma, np.asarray(rnd.result.n_accepted, dtype=np.int64), rnd.beta(),
                           rnd.next_ctx)

    def verified_contexts(self, contexts: Contexts, tokens: IntArray) -> IntArray:
        """(n, k): each chain's context and its contexts after each prefix of ``tokens``."""
        block = np.empty((contexts.shape[0], tokens.shape[1] + 1), dtype=np.int64)
        block[:, 0] = contexts
        for j in range(tokens.shape[1]):
            block[:, j + 1] = append(block[:, j], tokens[:, j], self.pair.length)
        return block

    def target_call(self, contexts: Contexts, tokens: IntArray) -> Callable[[int], object]:
        block = self.verified_contexts(contexts, np.asarray(tokens, dtype=np.int64))
        model, order = self.pair.model, self.pair.target_order
        return lambda r: model.probs(block, order)

    def draft_step(self, contexts: Contexts, u: FloatArray) -> Callable[[int], object]:
        pair = self.pair
        return lambda r: append(contexts, sample_rows(pair.draft(contexts), u), pair.length)
