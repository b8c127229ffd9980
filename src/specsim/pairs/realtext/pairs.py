"""The n-gram pairs' traces through the analyses: predicted vs measured, optimal γ, break-even.

Predicted vs measured tokens per target call is :mod:`specsim.pairs.accept`'s table; here the
n-gram backend measures it: speculative generation with the same models
(:func:`specsim.pairs.measure.measure` on :class:`.backend.NGramBackend`, rule ``correct``)
from the trace's own prompts, ``replicas``
independent chains per prompt, each run until it has emitted ``trace.length`` characters (the
last round's tokens counted only up to that length), so a chain's rounds are exactly the target
calls that traverse one document of ``length`` positions -- the quantity the positional
model's backward DP gives.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from specsim import exact
from specsim.ngram import NGramModel
from specsim.pairs import speedup
from specsim.pairs.accept import COLUMNS, Drafts, Measured, accept_row
from specsim.pairs.measure import RULE, measure
from specsim.pairs.realtext.backend import NGramBackend
from specsim.pairs.realtext.rounds import NGramPair
from specsim.precision import first_max
from specsim.realtext_settings import Settings
from specsim.seeds import seed_for
from specsim.traces.format import Trace
from specsim.traces.positional import acceptance, positional_law

#: The engine of the measured runs: specsim's own loop (:func:`.rounds.spec_round`, through
#: :class:`.backend.NGramBackend` and :func:`specsim.pairs.measure.measure`).
ENGINE = "specsim"


def pair_accept_table(model: NGramModel, traces: dict[str, Trace], s: Settings,
                      seed: int) -> pd.DataFrame:
    """One row per (pair, γ) of :func:`specsim.pairs.accept.accept_row`: specsim's loop
    (:func:`measure`) from each trace's prompts beside the trace's positional prediction."""
    rows = []
    for k, (name, trace) in zip(s.draft_orders, traces.items(), strict=True):
        if trace.meta.get("prompt_contexts") is None:
            raise ValueError(f"trace {name}: no prompt_contexts in its metadata (record it with "
                             f"specsim record ngram)")
        start = np.asarray(trace.meta["prompt_contexts"], dtype=np.int64)
        lengths = trace.doc_lengths
        if start.size != trace.n_docs or np.any(lengths != s.trace_length):
            raise ValueError(f"trace {name} does not have {s.trace_documents} documents of "
                             f"{s.trace_length} positions (record it again)")
        pair = NGramPair(model, s.target_order, k)
        beta = acceptance(trace, RULE)
        for g in s.gamma:
            m = measure(NGramBackend(pair, name), start, s.trace_length, s.accept_replicas, g,
                        seed_for(seed, "pair_accept", "measured", k, g))
            drafts = Drafts(*(float(m[x].sum()) for x in ("tested", "beta", "tested_first",
                                                          "beta_first")))
            rows.append(accept_row(trace, name, ENGINE, g,
                                   Measured(m["calls"], s.accept_replicas, drafts), seed,
                                   positional_law(beta, trace.doc_start, g)))
    return pd.DataFrame(rows, columns=list(COLUMNS))


def exact_tokens(trace: Trace, gamma_max: int) -> np.ndarray:
    """Exact tokens per call (positional model, rule ``correct``) at γ = 1..gamma_max."""
    beta = acceptance(trace, RULE)
    return np.array([positional_law(beta, trace.doc_start, g).tokens_per_call
                     for g in range(1, gamma_max + 1)])


def pair_optimal_table(traces: dict[str, Trace], s: Settings) -> pd.DataFrame:
    """One row per (pair, c): the γ in 1..gamma_max maximising Thm 3.8's speedup E_γ/(1 + γc)
    with the trace's exact E_γ, beside the γ Eq. 1 at the mean α would choose; and the pair's
    break-even c: the largest c at which some γ still gains, max_γ (E_γ − 1)/γ."""
    rows = []
    gammas = np.arange(1, s.optimal_gamma_max + 1)
    for name, trace in traces.items():
        tokens = exact_tokens(trace, s.optimal_gamma_max)
        alpha_mean = float(trace.alpha.mean())
        c_star = speedup.break_even(tokens, gammas)
        j = first_max(c_star)
        for c in s.optimal_c:
            gain = speedup.thm38(tokens, gammas, c)
            i = first_max(gain)
            g_eq1, s_eq1 = exact.optimal_gamma(alpha_mean, c, s.optimal_gamma_max)
            rows.append({
                "pair": name, "c": c, "gamma_max": s.optimal_gamma_max,
                "gamma_opt": int(gammas[i]), "tokens_opt": float(tokens[i]),
                "speedup_opt": float(gain[i]), "alpha_mean": alpha_mean,
                "gamma_opt_eq1": int(g_eq1), "speedup_opt_eq1": float(s_eq1),
                "speedup_at_gamma_opt_eq1": float(gain[int(g_eq1) - 1]),
                "c_break_even": float(c_star[j]), "gamma_break_even": int(gammas[j]),
                "c_break_even_eq1": alpha_mean,
                "gains": bool(gain[i] > 1.0),
            })
    return pd.DataFrame(rows)


def pair_costs_table(traces: dict[str, Trace], s: Settings, costs: pd.DataFrame
                     ) -> pd.DataFrame:
    """One row per (batch, pair, γ) at the *measured* costs (results/realtext/costs.csv):
    draft cost c and verify cost T(γ+1)/T(1), the trace's exact tokens per call, Thm 3.8's
    speedup E_γ/(1 + γc) and the cost model's E_γ/(γc + T(γ+1)/T(1)) (:mod:`specsim.pairs.
    speedup`), each one's optimal γ
    and break-even c (the c below which that γ gains). γ runs to gamma_max or as far as the
    costs table timed T(γ+1)."""
    calls = costs[costs["measure"] == "target_call"]
    steps = costs[costs["measure"] == "draft_step"]
    rows = []
    for k, (name, trace) in zip(s.draft_orders, traces.items(), strict=True):
        for b in sorted(calls["batch"].unique()):
            at_b = calls[calls["batch"] == b].set_index("positions")
            t_k = at_b["ratio"]
            step = steps[(steps["batch"] == b) & (steps["draft_order"] == k)]
            if step.empty:
                raise ValueError(f"the costs table has no draft_step of order {k} at batch {b}")
            c = float(step["c"].iloc[0])
            step_ok = bool(step["reliable"].iloc[0])
            g_top = min(s.optimal_gamma_max, int(t_k.index.max()) - 1)
            gammas = np.arange(1, g_top + 1)
            tokens = exact_tokens(trace, g_top)
            verify = np.array([float(t_k[g + 1]) for g in gammas])
            thm38 = speedup.thm38(tokens, gammas, c)
            model = speedup.cost_model(tokens, gammas, c, verify)
            even_thm38 = speedup.break_even(tokens, gammas)
            even_model = speedup.break_even(tokens, gammas, verify)
            i, j = first_max(thm38), first_max(model)
            for n, g in enumerate(gammas):
                rows.append({
                    "batch": int(b), "pair": name, "gamma": int(g), "c": c,
                    "verify_ratio": verify[n],
                    "costs_reliable": step_ok and bool(at_b.loc[g + 1, "reliable"]),
                    "tokens_exact": tokens[n],
                    "speedup_thm38": thm38[n], "speedup_cost_model": model[n],
                    "optimal_thm38": bool(n == i), "optimal_cost_model": bool(n == j),
                    "c_break_even_thm38": even_thm38[n],
                    "c_break_even_cost_model": even_model[n],
                })
    return pd.DataFrame(rows)
