"""The contract every verification scheme and draft-length policy of :mod:`specsim.schemes` meets.

A scheme plays rounds on an order-1 Markov pair (target table P, draft table Q, both (S, S),
row = context state, column = next token's state). The i.i.d. stub enters as its frozen
position-indexed chain (:func:`specsim.models.iid.iid_frozen_markov`), so one contract covers both.
A scheme may carry its own state beyond the context (the ``heuristic`` policy carries the
current draft length): its *scheme states* are numbered 0..N-1 and :attr:`RoundLaw.context`
maps each to the context state of P (the identity for plain rules, N = S).

Two functions per scheme, written from its paper:

``law(P, Q, gamma, knobs) -> RoundLaw``
    the exact law of one round from every scheme state (enumeration or DP, no sampling).
``play(P, Q, state, gamma, knobs, rng) -> RoundSample``
    one round for n independent chains at once (vectorised over chains, no Python loop over
    chains), from scheme states ``state`` (n,).

The drivers here turn either into what the tables report -- long-run tokens per target call and
drafted tokens per round (renewal-reward over the stationary round-start law), and the joint
law of the first two emitted tokens (the seed program's lossless check).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from specsim.exact import stationary

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.intp]

__all__ = ["RoundLaw", "RoundSample", "first_two_law", "long_run"]


@dataclass(frozen=True)
class RoundLaw:
    """Exact law of one round from each scheme state s (N states; context states S).

    tokens[s, n]      P(the round emits n tokens), n = 0..L (index 0 is 0 for every scheme here)
    next_state[s, t]  P(the next round starts in scheme state t) -- row-stochastic (N, N)
    drafted[s]        E[draft tokens proposed this round] (a round costs 1 + drafted * c)
    single[s, t]      P(the round emits exactly one token and the next round starts in t) (N, N)
    pair[s, a, b]     P(the round emits >= 2 tokens, the first two being context states a, b)
                      (N, S, S)
    context[t]        the context state of P that scheme state t stands for (N,)
    """

    tokens: FloatArray
    next_state: FloatArray
    drafted: FloatArray
    single: FloatArray
    pair: FloatArray
    context: IntArray

    @property
    def mean_tokens(self) -> FloatArray:
        return np.asarray(self.tokens @ np.arange(self.tokens.shape[1], dtype=np.float64))


@dataclass(frozen=True)
class RoundSample:
    """One round for n chains: emitted tokens (n, L) as context states of P, padded with -1
    after the last one; how many were emitted (n,); the next scheme state (n,); how many draft
    tokens were proposed (n,)."""

    tokens: IntArray
    n_emitted: IntArray
    next_state: IntArray
    drafted: IntArray


def long_run(law: RoundLaw) -> tuple[float, float, FloatArray]:
    """(tokens per target call, drafted tokens per round, stationary round-start law pi):
    renewal-reward over the chain of round-start scheme states (ratios of long-run means)."""
    pi = stationary(law.next_state)
    return float(pi @ law.mean_tokens), float(pi @ law.drafted), pi


def first_two_law(law: RoundLaw, start: int) -> FloatArray:
    """Joint law (S, S) of the first two emitted tokens of a generation from scheme state
    ``start``: a round emitting >= 2 tokens gives both; one emitting a single token a (landing
    in scheme state t, whose context is a) is followed by the first token of a round from t."""
    first = law.pair.sum(axis=2)  # P(round from t emits >= 2 tokens, the first being a)
    n_states, size = law.single.shape[0], law.pair.shape[1]
    first_of = first.copy()  # first_of[t, b]: law of the first token of a round from t
    np.add.at(first_of, (slice(None), law.context), law.single)
    out = law.pair[start].copy()
    lead = np.zeros((n_states, size))  # lead[t, a]: one-token round from start, token a, lands t
    lead[np.arange(n_states), law.context] = law.single[start]
    out += np.einsum("ta,tb->ab", lead, first_of)
    return np.asarray(out, dtype=np.float64)
