"""The n-gram pairs' traces through the analyses: predicted vs measured, optimal γ, break-even.

*Predicted* tokens per target call come from a pair's trace (:mod:`.record`) under the
positional model (:func:`specsim.traces.positional.positional_law`, rule ``correct``): exact
given the trace, with a bootstrap CI over its documents. *Measured* tokens per call come from
speculative generation with the same models (:func:`specsim.pairs.measure.measure` on the
:class:`.backend.NGramBackend`, rule ``correct``) from the trace's own prompts: ``replicas``
independent chains per prompt, each run until it has emitted ``trace.length`` characters (the
last round's tokens counted only up to that length), so a chain's rounds are exactly the target
calls that traverse one document of ``length`` positions -- the quantity the positional
model's backward DP gives. Measured = Σ tokens / Σ calls over prompts and replicas, with a
bootstrap CI over prompts.

Prompts are shared, so the difference predicted − measured has a *paired* bootstrap over
prompts (one resample of the prompts draws both ratios): ``covered`` says whether its 95%
interval contains 0, i.e. whether trace and measurement agree within what the prompts' and the
sampling's variation can resolve.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from specsim import exact
from specsim.costs import SEQUENTIAL, ConstantCost
from specsim.ngram import NGramModel
from specsim.pairs.measure import RULE, measure
from specsim.precision import covers, first_max
from specsim.realtext.backend import NGramBackend
from specsim.realtext.rounds import NGramPair
from specsim.realtext_settings import Settings
from specsim.seeds import seed_for
from specsim.traces.format import Trace
from specsim.traces.positional import (
    PositionalLaw,
    acceptance,
    bootstrap_ratio,
    paired_difference,
    positional_law,
)


def _predicted_alpha(law: PositionalLaw) -> tuple[float, float]:
    """(mean β over the drafts tested, mean β of each round's first draft) under the
    positional model: acceptance by position weighted by the expected tests."""
    rate, _, weight = law.accept_by_position()
    return float((rate * weight).sum() / weight.sum()), float(rate[0])


def pair_accept_table(model: NGramModel, traces: dict[str, Trace], s: Settings,
                      seed: int) -> pd.DataFrame:
    """One row per (pair, γ): predicted and measured tokens per call, their CIs, the paired
    difference, and acceptance where the drafts are tested (predicted and measured)."""
    rows = []
    for k, (name, trace) in zip(s.draft_orders, traces.items(), strict=True):
        if trace.meta.get("prompt_contexts") is None:
            raise ValueError(f"trace {name}: no prompt_contexts in its metadata (record it with "
                             f"specsim record ngram)")
        start = np.asarray(trace.meta["prompt_contexts"], dtype=np.int64)
        lengths = trace.doc_lengths.astype(np.float64)
        if start.size != trace.n_docs or np.any(lengths != s.trace_length):
            raise ValueError(f"trace {name} does not have {s.trace_documents} documents of "
                             f"{s.trace_length} positions (record it again)")
        pair = NGramPair(model, s.target_order, k)
        beta = acceptance(trace, RULE)
        alpha_mean = float(trace.alpha.mean())
        for g in s.gamma:
            law = positional_law(beta, trace.doc_start, g)
            pred = law.tokens_per_call
            p_lo, p_hi = law.tokens_ci(int(seed_for(seed, "pair_accept", "predicted", k, g)
                                           .generate_state(1)[0]))
            m = measure(NGramBackend(pair, name), start, s.trace_length, s.accept_replicas, g,
                        seed_for(seed, "pair_accept", "measured", k, g))
            num = lengths * s.accept_replicas
            meas = float(num.sum() / m["calls"].sum())
            m_lo, m_hi = bootstrap_ratio(num, m["calls"], int(
                seed_for(seed, "pair_accept", "measured-ci", k, g).generate_state(1)[0]))
            d_lo, d_hi, d_se = paired_difference(lengths, law.calls, num, m["calls"],
                                                 seed_for(seed, "pair_accept", "paired", k, g))
            a_pred, a1_pred = _predicted_alpha(law)
            rows.append({
                "pair": name, "draft_order": k, "gamma": g, "rule": RULE,
                "documents": trace.n_docs, "length": s.trace_length,
                "replicas": s.accept_replicas,
                "tokens_predicted": pred, "tokens_predicted_ci_low": p_lo,
                "tokens_predicted_ci_high": p_hi,
                "tokens_measured": meas, "tokens_measured_ci_low": m_lo,
                "tokens_measured_ci_high": m_hi,
                "difference": pred - meas, "difference_ci_low": d_lo,
                "difference_ci_high": d_hi, "difference_se": d_se,
                "relative_difference": (pred - meas) / meas,
                "covered": bool(covers(d_lo, d_hi, 0.0)),
                "alpha_mean": alpha_mean,
                "tokens_eq1": float(exact.expected_tokens(alpha_mean, g)),
                "alpha_tested_predicted": a_pred,
                "alpha_tested_measured": float(m["beta"].sum() / m["tested"].sum()),
                "alpha_first_predicted": a1_pred,
                "alpha_first_measured": float(m["beta_first"].sum() / m["tested_first"].sum()),
            })
    return pd.DataFrame(rows)


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
        c_star = (tokens - 1.0) / gammas
        j = first_max(c_star)
        for c in s.optimal_c:
            speedup = tokens / ConstantCost(c).total(gammas, 1, SEQUENTIAL)
            i = first_max(speedup)
            g_eq1, s_eq1 = exact.optimal_gamma(alpha_mean, c, s.optimal_gamma_max)
            rows.append({
                "pair": name, "c": c, "gamma_max": s.optimal_gamma_max,
                "gamma_opt": int(gammas[i]), "tokens_opt": float(tokens[i]),
                "speedup_opt": float(speedup[i]), "alpha_mean": alpha_mean,
                "gamma_opt_eq1": int(g_eq1), "speedup_opt_eq1": float(s_eq1),
                "speedup_at_gamma_opt_eq1": float(speedup[int(g_eq1) - 1]),
                "c_break_even": float(c_star[j]), "gamma_break_even": int(gammas[j]),
                "c_break_even_eq1": alpha_mean,
                "gains": bool(speedup[i] > 1.0),
            })
    return pd.DataFrame(rows)


def pair_costs_table(traces: dict[str, Trace], s: Settings, costs: pd.DataFrame
                     ) -> pd.DataFrame:
    """One row per (batch, pair, γ) at the *measured* costs (results/realtext/costs.csv):
    draft cost c and verify cost T(γ+1)/T(1), the trace's exact tokens per call, Thm 3.8's
    speedup E_γ/(1 + γc) and the cost model's E_γ/(γc + T(γ+1)/T(1)), each one's optimal γ
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
            thm38 = tokens / ConstantCost(c).total(gammas, 1, SEQUENTIAL)
            model = tokens / (gammas * c + verify)
            i, j = first_max(thm38), first_max(model)
            for n, g in enumerate(gammas):
                rows.append({
                    "batch": int(b), "pair": name, "gamma": int(g), "c": c,
                    "verify_ratio": verify[n],
                    "costs_reliable": step_ok and bool(at_b.loc[g + 1, "reliable"]),
                    "tokens_exact": tokens[n],
                    "speedup_thm38": thm38[n], "speedup_cost_model": model[n],
                    "optimal_thm38": bool(n == i), "optimal_cost_model": bool(n == j),
                    "c_break_even_thm38": (tokens[n] - 1.0) / g,
                    "c_break_even_cost_model": (tokens[n] - verify[n]) / g,
                })
    return pd.DataFrame(rows)
