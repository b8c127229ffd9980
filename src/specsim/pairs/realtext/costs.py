"""Measured costs and wall-clock speedup of speculative sampling with n-grams (not deterministic).

Only wall times are measured here; tokens per round and α come from the speculative
experiment's table. A target call and a draft step are the pair backend's
(:class:`.backend.NGramBackend`'s ``target_call`` and ``draft_step``). Every timing is
:func:`specsim.timing.measure`'s: the median over ``cost_repeats`` interleaved repeats, with
its quartiles, a reliability verdict and the load.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from specsim import exact, timing
from specsim.ngram import Corpus, FloatArray, IntArray, NGramModel, context_ids
from specsim.pairs import speedup
from specsim.pairs.realtext.backend import NGramBackend
from specsim.pairs.realtext.rounds import NGramPair, plain_step, spec_round
from specsim.realtext_settings import Settings
from specsim.seeds import seed_for


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
    ctx = ids[starts]
    # the characters after each prompt: a call verifying k positions sees k real contexts
    text = corpus.heldout[starts[:, None] + length + np.arange(s.cost_max_positions - 1)]
    target = NGramPair(model, s.target_order, s.target_order - 1)
    pairs = {order: NGramPair(model, s.target_order, order) for order in s.draft_orders}
    # every timed callable of this batch, interleaved in one measurement
    fns: dict[str, Callable[[int], object]] = {}
    for k in range(1, s.cost_max_positions + 1):
        fns[f"T{k}"] = NGramBackend(target).target_call(ctx, text[:, : k - 1])
    fns["plain"] = lambda r: plain_step(target, ctx, u)
    for order, pair in pairs.items():
        fns[f"draft{order}"] = NGramBackend(pair).draft_step(ctx, u)
        for g in s.cost_gamma:
            u_rounds = np.random.default_rng(seed_for(seed, "costs", b, order, g)).random(
                (s.cost_rounds, 2 * g + 1, b))
            fns[f"round{order},{g}"] = lambda r, pair=pair, g=g, u_rounds=u_rounds: _rounds(
                pair, ctx, g, u_rounds)
    tm = timing.measure(fns, s.cost_repeats)
    base = {"batch": b, "repeats": s.cost_repeats, **tm.load.columns()}
    rows: list[dict[str, Any]] = []
    for k in range(1, s.cost_max_positions + 1):
        rows.append(base | {"measure": "target_call", "positions": k,
                            **timing.columns(seconds=tm[f"T{k}"],
                                             ratio=tm.ratio(f"T{k}", "T1"))})
    rows.append(base | {"measure": "plain_step", "positions": 1,
                        **timing.columns(seconds=tm["plain"], ratio=tm.ratio("plain", "T1"))})
    t1 = tm["T1"].median
    for order in s.draft_orders:
        c = tm.ratio(f"draft{order}", "T1")
        rows.append(base | {"measure": "draft_step", "draft_order": order, "positions": 1,
                            **timing.columns(seconds=tm[f"draft{order}"], ratio=c),
                            "c": c.median})
        for g in s.cost_gamma:
            key = f"round{order},{g}"
            per_round = timing.Timing.of(np.asarray(tm[key].samples) / s.cost_rounds)
            ratio = timing.paired_ratio(per_round.samples, tm["T1"].samples)
            alpha = float(spec.loc[(order, g), "accept_rate"])
            tokens = float(spec.loc[(order, g), "tokens_per_call"])
            t_verify = (tm.ratio(f"T{g + 1}", "T1").median if g + 1 <= s.cost_max_positions
                        else np.nan)
            # per repeat: plain step over one round, times the tokens a round emits
            measured = timing.paired_ratio(tokens * np.asarray(tm["plain"].samples),
                                           per_round.samples)
            rows.append(base | {
                "measure": "speculative", "draft_order": order, "gamma": g,
                "positions": g + 1, "c": c.median, "alpha": alpha,
                "tokens_per_round": tokens,
                "overhead": per_round.median / t1 - g * c.median - t_verify,
                **timing.columns(seconds=per_round, ratio=ratio, speedup_measured=measured),
                "speedup_thm38": float(exact.walltime_improvement(alpha, g, c.median)),
                "speedup_cost_model": float(speedup.cost_model(tokens, g, c.median, t_verify)),
            })
    return pd.DataFrame(rows)


def _rounds(pair: NGramPair, ctx: IntArray, gamma: int, u: FloatArray) -> None:
    """``len(u)`` speculative rounds from ``ctx`` (what the costs experiment times)."""
    for ur in u:
        ctx = spec_round(pair, ctx, gamma, "correct", ur).next_ctx
