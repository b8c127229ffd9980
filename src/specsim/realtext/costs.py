"""Measured costs and wall-clock speedup of speculative sampling with n-grams (not deterministic).

Only wall times are measured here; tokens per round and α come from the speculative
experiment's table. :func:`best_time` is also the timer of the LLM tier (:mod:`specsim.llm`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from specsim import exact
from specsim.ngram import Corpus, FloatArray, IntArray, NGramModel, append, context_ids
from specsim.realtext.rounds import NGramPair, plain_step, seed_for, spec_round
from specsim.realtext.settings import Settings
from specsim.sampling import sample_rows


def best_time(fn: Callable[[], object], repeats: int, min_seconds: float = 2e-3) -> float:
    """Seconds per call: best over ``repeats`` of the mean of ``number`` back-to-back calls.

    One untimed warm-up call also sizes ``number`` so that a repeat lasts at least
    ``min_seconds`` (timer resolution and scheduler jitter matter less); time.perf_counter.
    """
    t0 = time.perf_counter()
    fn()
    number = max(1, int(np.ceil(min_seconds / max(time.perf_counter() - t0, 1e-9))))
    best = np.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        best = min(best, (time.perf_counter() - t0) / number)
    return float(best)


def costs_table(model: NGramModel, corpus: Corpus, s: Settings, seed: int,
                speculative: pd.DataFrame) -> pd.DataFrame:
    """Long table, per batch size: target-call times T(k), draft steps (c) and speedups per γ.

    Only wall times are measured here; tokens per round and α come from the speculative
    experiment (``speculative``, the realtext_speculative table), whose estimates are far more
    precise than a few timed rounds could give.
    """
    spec = speculative.set_index(["draft_order", "gamma"])
    missing = {(k, g) for k in s.draft_orders for g in s.cost_gamma} - set(spec.index)
    if missing:
        raise ValueError(f"the speculative table has no rows for (draft_order, gamma) "
                         f"{sorted(missing)}; costs.gamma must be a subset of speculative.gamma")
    return pd.concat([_costs_at_batch(model, corpus, s, seed, b, spec) for b in s.cost_batch],
                     ignore_index=True)


def _costs_at_batch(model: NGramModel, corpus: Corpus, s: Settings, seed: int, b: int,
                    spec: pd.DataFrame) -> pd.DataFrame:
    length = s.target_order - 1
    ids = context_ids(corpus.heldout, length)
    rng = np.random.default_rng(seed_for(seed, "costs", b))
    starts = np.sort(rng.choice(ids.size - s.cost_max_positions, size=b, replace=False))
    u = rng.random(b)
    rows: list[dict[str, Any]] = []
    base = {"batch": b, "repeats": s.cost_repeats}
    t_k = {}
    for k in range(1, s.cost_max_positions + 1):  # k consecutive real contexts per prompt
        block = ids[starts[:, None] + np.arange(k)]
        t_k[k] = best_time(lambda block=block: model.probs(block, s.target_order), s.cost_repeats)
    for k, t in t_k.items():
        rows.append(base | {"measure": "target_call", "positions": k, "seconds": t,
                            "ratio": t / t_k[1]})
    ctx = ids[starts]
    target = NGramPair(model, s.target_order, s.target_order - 1)
    t_plain = best_time(lambda: plain_step(target, ctx, u), s.cost_repeats)
    rows.append(base | {"measure": "plain_step", "positions": 1, "seconds": t_plain,
                        "ratio": t_plain / t_k[1]})
    for order in s.draft_orders:
        pair = NGramPair(model, s.target_order, order)
        t_d = best_time(lambda pair=pair: append(ctx, sample_rows(pair.draft(ctx), u), length),
                        s.cost_repeats)
        c = t_d / t_k[1]
        rows.append(base | {"measure": "draft_step", "draft_order": order, "positions": 1,
                            "seconds": t_d, "ratio": c, "c": c})
        for g in s.cost_gamma:
            u_rounds = np.random.default_rng(seed_for(seed, "costs", b, order, g)).random(
                (s.cost_rounds, 2 * g + 1, b))
            t_round = best_time(lambda pair=pair, g=g, u_rounds=u_rounds: _rounds(
                pair, ctx, g, u_rounds), s.cost_repeats) / s.cost_rounds
            alpha = float(spec.loc[(order, g), "accept_rate"])
            tokens = float(spec.loc[(order, g), "tokens_per_call"])
            t_verify = t_k[g + 1] / t_k[1] if g + 1 in t_k else np.nan
            rows.append(base | {
                "measure": "speculative", "draft_order": order, "gamma": g,
                "positions": g + 1, "seconds": t_round, "ratio": t_round / t_k[1], "c": c,
                "alpha": alpha, "tokens_per_round": tokens,
                "overhead": t_round / t_k[1] - g * c - t_verify,
                "speedup_measured": t_plain * tokens / t_round,
                "speedup_thm38": float(exact.walltime_improvement(alpha, g, c)),
                "speedup_cost_model": tokens / (g * c + t_verify),
            })
    return pd.DataFrame(rows)


def _rounds(pair: NGramPair, ctx: IntArray, gamma: int, u: FloatArray) -> None:
    """``len(u)`` speculative rounds from ``ctx`` (what the costs experiment times)."""
    for ur in u:
        ctx = spec_round(pair, ctx, gamma, "correct", ur).next_ctx
