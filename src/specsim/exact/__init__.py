"""Exact (sampling-free) theory of speculative decoding for order-1 Markov "models".

Sources: Leviathan, Kalman & Matias 2022, "Fast Inference from Transformers via Speculative
Decoding" (arXiv 2211.17192), cited below as [L]; Chen et al. 2023, "Accelerating Large
Language Model Decoding with Speculative Sampling" (arXiv 2302.01318), cited as [C].

Four layers, one module each:

1. Closed forms of [L] Section 3 (i.i.d. acceptance with rate ``alpha``), numpy-broadcasting
   (:mod:`.closed_forms`).
2. An exact forward dynamic programme over one speculative round for Markov tables ``P``
   (target) and ``Q`` (draft), both ``(V, V)`` row-stochastic, where the context/state is the
   last emitted token. It yields per start context the exact law of the number of accepted
   drafts, of emitted tokens and of the next round's start context, and from the stationary
   law of the round-start chain the exact long-run rates (:mod:`.rounds`: the one round model,
   :class:`RoundLaw`, that every scheme of :mod:`specsim.schemes` gives too).
3. The exact joint law of the first ``n`` emitted tokens (lossless check, [L] Thm 3.5 /
   [C] Thm 1), compared with the target's own law (:mod:`.outputs`).
4. The exact law of one round of :func:`specsim.verify.verify` on given per-position rows
   (:func:`verify_law`), or on rows that depend on the drafted prefix (:func:`verify_law_tree`)
   (:mod:`.outputs`).

Checked tables and the one-position kernels of a rule, which they share, are :mod:`.kernels`.

Round semantics (the seed program's ``verify_round``): from start context ``s`` the draft
proposes ``x_1..x_gamma`` autoregressively from ``Q``; position ``i`` (0-based) is tested in
context ``c_i`` (``c_0 = s``, ``c_i = x_i``) with ``p = P[c_i]``, ``q = Q[c_i]``:

* ``correct``: accept ``x`` w.p. ``min(1, p[x]/q[x])``; on rejection emit one token from
  ``residual(p, q) = norm(max(p - q, 0))`` (``p`` itself if that mass is 0) and stop.
* ``greedy``: accept iff ``x == argmax(p)`` (first index on ties); rejection as ``correct``.
* ``no_resample``: as ``correct`` but the rejection token is drawn from ``p``.
* ``continue``: as ``correct`` but after the residual token the remaining drafts
  ``x_{i+2}..x_gamma`` are emitted too (``gamma`` tokens in all; ``i`` counted accepted).

If all ``gamma`` drafts are accepted a bonus token is drawn from ``P[x_gamma]``. The next
round starts at the last emitted token.
"""

from __future__ import annotations

from specsim.exact.closed_forms import (
    arithmetic_operations,
    break_even_c,
    expected_tokens,
    optimal_gamma,
    round_tokens,
    speedup_exists,
    table1_rows,
    truncated_geometric_moments,
    walltime_improvement,
)
from specsim.exact.kernels import (
    RULES,
    check_gamma,
    check_pair,
    check_table,
    context_acceptance,
    residual_table,
)
from specsim.exact.outputs import (
    VerifyLaw,
    first_tokens_distribution,
    target_joint,
    tv,
    verify_law,
    verify_law_tree,
)
from specsim.exact.rounds import (
    LongRun,
    Rates,
    RoundLaw,
    RoundParts,
    first_two_law,
    horizon_average,
    horizon_rates,
    long_run,
    round_dp,
    round_law,
    stationary,
    stationary_rates,
)
from specsim.verify import Rule

__all__ = [
    "RULES",
    "LongRun",
    "Rates",
    "RoundLaw",
    "RoundParts",
    "Rule",
    "VerifyLaw",
    "arithmetic_operations",
    "break_even_c",
    "check_gamma",
    "check_pair",
    "check_table",
    "context_acceptance",
    "expected_tokens",
    "first_tokens_distribution",
    "first_two_law",
    "horizon_average",
    "horizon_rates",
    "long_run",
    "optimal_gamma",
    "residual_table",
    "round_dp",
    "round_law",
    "round_tokens",
    "speedup_exists",
    "stationary",
    "stationary_rates",
    "table1_rows",
    "target_joint",
    "truncated_geometric_moments",
    "tv",
    "verify_law",
    "verify_law_tree",
    "walltime_improvement",
]
