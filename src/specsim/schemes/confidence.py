"""Draft-length policy: stop drafting at the first low-confidence draft (Hugging Face's
``assistant_confidence_threshold``).

Hugging Face transformers' assisted generation (``generation/stopping_criteria.py``,
``ConfidenceCriteria``): after the assistant generates a token it stops drafting if its own
probability of that token is below the threshold, ``p < assistant_confidence_threshold``
(strict); the low-confidence token stays in the draft, and drafting stops after
``num_assistant_tokens`` = γ tokens in any case. A greedy assistant tests its top probability;
here drafts are sampled, so the test is on q(x | c) of the drafted x:

    stop[c, x] = 1 if Q[c, x] < threshold else 0,

and the round is the token-wise rule's (:mod:`.tokenwise`) with that stop table. Knob
``threshold`` in [0, 1]: 0 never stops early (fixed γ); 1 stops after the first draft unless
q(x) = 1. The scheme state is the context (N = S).
"""

from __future__ import annotations

import math
from numbers import Real

import numpy as np
from numpy.typing import ArrayLike

from specsim.exact import RoundLaw
from specsim.schemes import tokenwise
from specsim.schemes.base import Knobs
from specsim.schemes.law import FloatArray, LawSize, RoundSample

__all__ = ["KNOBS", "check", "footprint", "law", "play", "stop", "stop_table"]

KNOBS: Knobs = {"threshold": None}  # required, no default


def check(knobs: Knobs | None) -> float:
    """The threshold of valid ``knobs`` ({"threshold": t}, t in [0, 1]), or a ValueError."""
    t = tokenwise.check_knobs("confidence", knobs, KNOBS)["threshold"]
    if isinstance(t, bool) or not isinstance(t, Real) or not (
            math.isfinite(t) and 0 <= float(t) <= 1):
        raise ValueError(f"confidence knob 'threshold' must be a number in [0, 1], got "
                         f"threshold={t!r}")
    return float(t)


def stop_table(Q: ArrayLike, threshold: float) -> FloatArray:
    """``ConfidenceCriteria`` as a table: stop after drafting x in context c iff
    Q[c, x] < threshold."""
    return (np.asarray(Q, dtype=np.float64) < threshold).astype(np.float64)


def stop(Q: ArrayLike, knobs: Knobs | None) -> FloatArray:
    """The stop table (:func:`stop_table`) at the threshold of valid ``knobs``, on rows Q
    (..., V) of any shape."""
    return stop_table(Q, check(knobs))


def law(P: ArrayLike, Q: ArrayLike, accept: ArrayLike, reject: ArrayLike, gamma: int,
        knobs: Knobs | None) -> RoundLaw:
    """Exact law of one round of the token-wise rule (accept, reject) whose drafting stops at
    the first draft with q(x) < threshold, or after γ drafts."""
    return tokenwise.law(P, Q, accept, reject, gamma, stop(Q, knobs))


def play(P: ArrayLike, Q: ArrayLike, accept: ArrayLike, reject: ArrayLike, state: ArrayLike,
         gamma: int, knobs: Knobs | None, rng: np.random.Generator) -> RoundSample:
    """One such round for n chains from contexts ``state`` (n,) (:func:`tokenwise.play`)."""
    return tokenwise.play(P, Q, accept, reject, state, gamma, rng, stop(Q, knobs))


def footprint(size: int, support: int, gamma: int, knobs: Knobs | None,
              chains: int) -> LawSize:
    """As a fixed γ's (:func:`tokenwise.footprint`): the stop table is one more (S, S)."""
    return tokenwise.footprint(size, support, gamma, knobs, chains)
