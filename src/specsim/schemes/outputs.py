"""The ``schemes`` analysis' tables (:mod:`specsim.schemes.tables`) and figures
(:mod:`specsim.schemes.figures`), declared here and gathered by :mod:`specsim.outputs`.

Kept free of pandas and matplotlib: Snakemake imports it to plan the DAG."""

from __future__ import annotations

from specsim.declare import GTEST, KEYS, C, Figure, Table

TABLES = (
    Table(
        "schemes", needs="schemes", builder="specsim.schemes.tables:schemes",
        title="Beyond the seeds: verification schemes and draft-length policies",
        about="One row per point of every ``schemes`` study: a rule of the literature (block "
              "verification, multi-draft, lenience, typical acceptance, or Algorithm 1) with its "
              "knobs, under a draft-length policy, on one model: the lossless check (exact and "
              "simulated) and tokens per target call, exact beside simulated, with the speedup at "
              "each c of the study. A round drafting γ' tokens costs 1 + γ' c target calls.",
        columns={
            **KEYS,
            "rule": "verification rule: correct (Leviathan Alg. 1), block (Sun et al. 2024), "
                    "multi_draft (SpecInfer), lenient (Leviathan App. A.5), typical (Medusa)",
            "drafts": "multi_draft: number k of independent draft sequences",
            "lenience": "lenient: lenience l (1 = Algorithm 1, 0 accepts every draft p allows)",
            "epsilon": "typical: hard probability threshold ε",
            "delta": "typical: entropy-scaled threshold δ (accept iff p(x) > min(ε, δ e^(−H(p))))",
            "threshold": "confidence policy: stop drafting after a token whose draft probability "
                         "is below it",
            "cap": "heuristic policy: largest draft length the schedule reaches",
            "c": "optimal policy: the draft cost it is optimal for",
            "policy": "draft-length policy: fixed (γ every round), confidence, heuristic "
                      "(transformers' schedules; γ is the maximum, or the start, of the draft "
                      "length), optimal (the exact optimal stopping rule, at most γ drafts)",
            "lossless": "whether the rule is lossless by design (the registry's claim)",
            "trials_total": "two-token generations simulated for the lossless check",
            "tv_exact": "exact TV distance between the scheme's two-token law and the target's "
                        "(enumeration or DP; ~1e-17 means zero)",
            "tv_mc": "TV distance between the simulated two-token frequencies and the target",
            "tv_floor": "sampling floor: the expected tv_mc of trials_total draws from the target",
            **GTEST,
            "power": "probability that trials_total generations detect the exact bias",
            "p_value_vs_exact": "G-test p-value of the simulated counts against the scheme's own "
                                "exact law (simulation against theory; large is good)",
            "tokens_exact": "exact tokens per target call over exactly the simulated rounds "
                            "(table models: rounds burn_in.. of chains from the start; the "
                            "i.i.d. stub's frozen pairs: one round from the start)",
            "tokens_stationary": "exact long-run tokens per target call (stationary limit; "
                                 "the i.i.d. stub: one round from the start)",
            "drafted_stationary": "exact long-run draft tokens per round",
            "tokens_per_call": "simulated tokens per target call",
            "tokens_ci_low": "lower end of its 95% confidence interval (batch means)",
            "tokens_ci_high": "upper end of that interval",
            "tokens_se": "standard error of tokens_per_call (batch means)",
            "batches": "batches of chains behind the confidence intervals",
            "covered": "whether the 95% interval covers tokens_exact (up to 1e-9 relative)",
            "drafted_exact": "exact draft tokens proposed per round over the simulated rounds "
                             "(k γ for multi_draft)",
            "drafted_per_round": "simulated draft tokens proposed per round",
            "drafted_ci_low": "lower end of its 95% confidence interval",
            "drafted_ci_high": "upper end of that interval",
            "exact_method": "stationary, first_round, or mc_only (too large to enumerate)",
            "speedup_c<c>": "simulated speedup at draft cost c: tokens / (rounds + c drafted), "
                            "long-run sums",
            "speedup_ci_low_c<c>": "lower end of its 95% confidence interval",
            "speedup_ci_high_c<c>": "upper end of that interval",
            "speedup_exact_c<c>": "tokens_stationary / (1 + c drafted_stationary): the long run",
        }),
    Table(
        "schemes_policies", needs="schemes", builder="specsim.schemes.tables:schemes_policies",
        title="Draft-length policies against the best fixed draft length",
        about="For every schemes study running a policy: each Algorithm 1 point (fixed γ, "
              "confidence, heuristic, optimal at its own c) at each c of the study, and the best "
              "fixed γ in 1..32 by the exact long run; each set against the exact optimal "
              "draft-length policy.",
        columns={
            "study": KEYS["study"], "model": KEYS["model"], "alpha": KEYS["alpha"],
            "temperature": KEYS["temperature"], **C,
            "policy": "fixed, confidence, heuristic, optimal (the exact optimal stopping "
                      "rule for this c), or best_fixed (the exact optimum over γ)",
            "gamma": "draft length: fixed γ, the confidence or optimal policy's maximum, the "
                     "heuristic's start, or the best fixed γ",
            "threshold": "confidence policy's threshold",
            "cap": "heuristic policy's cap",
            "scheme": "legend label",
            "tokens_exact": "exact long-run tokens per target call (stationary)",
            "tokens_per_call": "simulated tokens per target call",
            "drafted_exact": "exact long-run draft tokens per round",
            "drafted_per_round": "simulated draft tokens per round",
            "speedup": "simulated speedup tokens / (rounds + c drafted)",
            "speedup_ci_low": "lower end of its 95% confidence interval",
            "speedup_ci_high": "upper end of that interval",
            "speedup_exact": "tokens_exact / (1 + c drafted_exact)",
            "best_fixed_speedup_exact": "the best fixed γ's exact speedup at this c",
            "vs_best_fixed": "speedup_exact / best_fixed_speedup_exact (> 1: the policy wins)",
            "longest_draft": "most tokens a round of this policy drafts (γ, or the cap)",
            "best_fixed_capped_speedup_exact": "the best fixed γ <= longest_draft, exact speedup",
            "optimal_gamma": "cap of the optimal policy this row is set against (same model, "
                             "α, temperature, c; the longest cap of any study)",
            "optimal_speedup_exact": "that optimal policy's exact speedup: no policy drafting "
                                     "at most optimal_gamma tokens exceeds it",
            "vs_optimal": "speedup_exact / optimal_speedup_exact (1: optimal)",
            "optimal_bound_exact": "what no policy drafting at most longest_draft tokens can "
                                   "exceed: optimal_speedup_exact, or beyond its cap a "
                                   "certified upper bound (optimal.bound)",
        }),
)
FIGURES = (
    Figure(
        "schemes_speed", needs="schemes", builder="specsim.schemes.figures:schemes_speed",
        caption=(
            "Tokens per target call (left) and speedup at the study's smallest draft cost c "
            "(right) versus draft length γ for every verification scheme on one model: "
            "Algorithm 1 (``correct``), block verification (Sun et al. 2024), k independent "
            "drafts (SpecInfer's multi-step speculative sampling), Leviathan's lenience and "
            "Medusa's typical acceptance. Lines with open markers: exact (enumeration or "
            "dynamic programming, stationary long run); dots: simulation with 95% confidence "
            "intervals. A multi-draft round costs 1 + kγc target calls.")),
    Figure(
        "schemes_frontier", needs="schemes", builder="specsim.schemes.figures:schemes_frontier",
        caption=(
            "What the lossy rules' speed costs in fidelity. Each line follows one rule as its "
            "knob varies (labels: the lenience l, or typical acceptance's ε): exact "
            "total-variation distance of the first two tokens to the target's law (log scale) "
            "against the exact speedup, one panel per draft cost c. Simulated TVs beside them "
            "(crosses: judged biased by the G-test; dots: not distinguishable from lossless); "
            "the grey band is the sampling floor, below which a simulation of this size "
            "cannot see a bias. Dashed: Algorithm 1 (lossless) at the same γ. Exact TVs below "
            "1e-6 (lossless to machine precision, e.g. lenience 1) are drawn on 1e-6.")),
    Figure(
        "schemes_policies", needs="schemes", builder="specsim.schemes.figures:schemes_policies",
        caption=(
            "Draft-length policies against the best fixed draft length, Algorithm 1 on one "
            "model. Left: exact speedup versus draft cost c (log axis) of the best fixed γ "
            "(black, labelled with that γ), of transformers' confidence policy (stop after a "
            "draft token whose draft probability is below the threshold, at most γ tokens), "
            "of its heuristic schedule (+2 after a fully accepted round, −1 otherwise) and of "
            "fixed γ; dots: simulation with 95% confidence intervals. Stars and thick lines: "
            "transformers' defaults (20 tokens with threshold 0.4; the heuristic from 5). "
            "Dotted: the exact optimal draft-length policy for each c (at most the γ shown), "
            "where a study runs it. Right: each policy's exact speedup relative to the best "
            "fixed γ's.")),
)
