"""Draft-length policy: Hugging Face's ``num_assistant_tokens_schedule="heuristic"``.

Hugging Face transformers' assisted generation (``generation/candidate_generator.py``,
``AssistedCandidateGenerator.update_candidate_strategy``): after a round in which every draft
was accepted (``num_matches == num_assistant_tokens``) the draft length grows by two,
``num_assistant_tokens += 2``; otherwise it shrinks by one, ``max(1, num_assistant_tokens - 1)``.
Generation starts at γ (the grid point's γ; transformers' default is 5). transformers bounds
the length only by ``max_new_tokens``; here the knob ``cap`` (an integer >= γ, default 64) does,
so the chain is finite: g' = min(cap, g + 2) after an all-accepted round.

Each round is the token-wise rule's (:mod:`.tokenwise`) with γ = g and no early stop. The
scheme state carries the draft length: state = (g - 1) S + c for context c in 0..S-1 and
g in 1..cap (N = S cap), :attr:`RoundLaw.context` maps it back to c, and the exact long run is
the stationary law of this chain (:func:`specsim.exact.stationary_rates`).
"""

from __future__ import annotations

from dataclasses import replace
from numbers import Integral
from typing import cast

import numpy as np
from numpy.typing import ArrayLike

from specsim.exact import RoundLaw, check_gamma
from specsim.resources import Footprint
from specsim.schemes import tokenwise
from specsim.schemes.base import Knobs
from specsim.schemes.law import IntArray, LawSize, RoundSample

__all__ = ["KNOBS", "check", "decode", "footprint", "law", "next_length", "play", "refusal",
           "start_state"]

KNOBS: Knobs = {"cap": 64}


#: Most cells of the first two tokens' law (cap S^3) law() allocates, ~256 MB; beyond it the
#: point is Monte Carlo only. The (S cap)^2 transition tables are not bounded here: the
#: config-time estimate (:func:`footprint`) judges the whole law against the memory a point
#: job may declare (:mod:`specsim.work`).
MAX_CELLS = 2**25


def check(knobs: Knobs | None, gamma: int) -> int:
    """The cap of valid ``knobs`` ({} or {"cap": integer >= γ}), or a ValueError."""
    cap = tokenwise.check_knobs("heuristic", knobs, KNOBS)["cap"]
    if isinstance(cap, bool) or not isinstance(cap, Integral) or cap < gamma:
        raise ValueError(f"heuristic knob 'cap' must be an integer >= gamma = {gamma}, got "
                         f"cap={cap!r}")
    return int(cap)


def refusal(size: int, cap: int) -> str | None:
    """Why :func:`law` refuses S = ``size`` contexts at ``cap`` (the first two tokens' law
    alone needs more than :data:`MAX_CELLS`), or None; :func:`footprint` asks the same."""
    cells = size * cap * size * size
    if cells <= MAX_CELLS:
        return None
    return (f"the heuristic's exact law needs cap S^3 = {cells:.3g} cells (S = {size}, "
            f"cap = {cap}), more than {MAX_CELLS:.3g}")


def start_state(context: int | ArrayLike, gamma: int, size: int) -> int | IntArray:
    """The scheme state of context(s) ``context`` at draft length γ, for S = ``size``."""
    c = np.asarray(context, dtype=np.intp)
    if ((c < 0) | (c >= size)).any() or int(gamma) != gamma or gamma < 1:
        raise ValueError(f"need contexts in 0..{size - 1} and an integer gamma >= 1, got "
                         f"context={context!r}, gamma={gamma!r}")
    s = (int(gamma) - 1) * size + c
    return int(s) if s.ndim == 0 else s


def decode(state: ArrayLike, size: int) -> tuple[IntArray, IntArray]:
    """(context, draft length g) of scheme states, for S = ``size``."""
    s = np.asarray(state, dtype=np.intp)
    return s % size, s // size + 1


def next_length(g: ArrayLike, all_accepted: ArrayLike, cap: int) -> IntArray:
    """``update_candidate_strategy``: g + 2 (at most ``cap``) after a round that accepted every
    draft, max(1, g - 1) otherwise."""
    g = np.asarray(g, dtype=np.intp)
    return cast(IntArray, np.where(all_accepted, np.minimum(g + 2, cap), np.maximum(g - 1, 1)))


def law(P: ArrayLike, Q: ArrayLike, accept: ArrayLike, reject: ArrayLike, gamma: int,
        knobs: Knobs | None) -> RoundLaw:
    """Exact law of one round from every (context, draft length) state: the token-wise law at
    γ = g (:func:`tokenwise.parts`, split by how the round ended) placed on the rows of g and
    the columns of the next length. O(cap^2 S^3); ``gamma`` only bounds ``cap`` from below."""
    Pa, Qa, acc, rej, no_stop = tokenwise.check_tables(P, Q, accept, reject)
    cap = check(knobs, check_gamma(gamma))
    size = Pa.shape[0]
    n = size * cap
    why = refusal(size, cap)  # the first-two-tokens array alone: refuse, not exhaust
    if why:
        raise ValueError(why)
    tokens, nxt = np.zeros((n, cap + 2)), np.zeros((n, n))
    drafted, single = np.zeros(n), np.zeros((n, n))
    pair = np.zeros((n, size, size))
    for g in range(1, cap + 1):  # one draft length at a time; each DP vectorised over contexts
        parts = tokenwise.parts(Pa, Qa, acc, rej, g, no_stop)
        rows = slice((g - 1) * size, g * size)
        down, up = (int(next_length(g, ok, cap)) - 1 for ok in (False, True))
        tokens[rows, : g + 2] = parts.tokens
        nxt[rows, down * size : (down + 1) * size] += parts.after_rejection
        nxt[rows, up * size : (up + 1) * size] += parts.after_bonus
        drafted[rows] = g
        single[rows, down * size : (down + 1) * size] = parts.single  # 1 token: a rejection
        pair[rows] = parts.pair
    return RoundLaw(tokens=tokens, next_state=nxt, drafted=drafted, single=single, pair=pair,
                    context=np.tile(np.arange(size), cap))


def play(P: ArrayLike, Q: ArrayLike, accept: ArrayLike, reject: ArrayLike, state: ArrayLike,
         gamma: int, knobs: Knobs | None, rng: np.random.Generator) -> RoundSample:
    """One round for n chains from scheme states ``state`` (n,), each drafting its own g
    (positions beyond a chain's g are masked); tokens are padded to cap + 1 columns."""
    Pa, Qa, acc, rej, no_stop = tokenwise.check_tables(P, Q, accept, reject)
    cap = check(knobs, check_gamma(gamma))
    size = Pa.shape[0]
    ctx, g = decode(tokenwise.check_states(state, size * cap), size)
    out = tokenwise.play_rows(Pa, Qa, acc, rej, ctx, g, no_stop, rng, cap)
    g_next = next_length(g, out.n_emitted == g + 1, cap)
    return replace(out, next_state=(g_next - 1) * size + out.next_state)


def footprint(size: int, support: int, gamma: int, knobs: Knobs | None,
              chains: int) -> LawSize:
    """What :func:`law` and :func:`play` cost on S = ``size`` contexts: N = S cap states; the
    law holds two (N, N) tables (next state, single), the (N, S, S) pair and the token law,
    beside one draft length's token-wise DP at a time -- O(cap^2 S^3) work, and the
    stationary law of N states after it is O((S cap)^3) (:mod:`specsim.exact.footprints`).
    A round drafts up to cap tokens per chain."""
    cap = check(knobs, gamma)
    n = size * cap
    law_fp: Footprint | None = None
    why = refusal(size, cap)
    if why is None:  # law() refuses beyond it
        dp = tokenwise.law_footprint(size, cap)  # the largest of the cap DPs, ~g S^3 work each
        law_fp = Footprint(2.0 * n * n + n * (cap + 2) + n * size * size + dp.cells,
                           (cap + 1) / 2.0 * dp.flops,
                           what=f"heuristic exact law ({n} states: vocab {size} x cap {cap})")
    return LawSize(n, law_fp, tokenwise.play_footprint(size, chains, cap, cap), why or "")
