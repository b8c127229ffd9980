"""The ``schemes`` analysis' tables (:mod:`specsim.tables.schemes`) and figures
(:mod:`specsim.figures.schemes`), declared here and gathered by :mod:`specsim.outputs`.

Kept free of pandas and matplotlib: Snakemake imports it to plan the DAG."""

from __future__ import annotations

from specsim.declare import GTEST, KEYS, C, Figure, Table

TABLES = (
    Table(
        "schemes", needs="schemes", builder="specsim.tables.schemes:schemes",
        title="Beyond the seeds: verification schemes and draft-length policies",
        about="One row per point of every ``schemes`` study: a rule of the literature (block "
              "verification, multi-draft, lenience, typical acceptance, or Algorithm 1) with its "
              "knobs, under a draft-length policy, on one model: the lossless check (exact and "
              "simulated) and tokens per target call, exact beside simulated, with the speedup at "
              "each c of the study. A round drafting γ' tokens costs 1 + γ' c target calls when "
              "drafted one after another (``speedup_*_c<c>``), 1 + γ c when k drafts of depth γ "
              "are drafted side by side (``speedup_*_batched_c<c>``).",
        columns={
            **KEYS,
            "rule": "verification rule: correct (Leviathan Alg. 1), block (Sun et al. 2024), "
                    "multi_draft (SpecInfer), lenient (Leviathan App. A.5), typical (Medusa), "
                    "spectr (SpecTr K-SEQ), multi_draft_optimal (the LP optimum per depth), "
                    "multi_draft_wor (RSD-C, drafts without replacement), "
                    "tree (SpecInfer token trees), traversal (traversal verification of "
                    "the same trees, Weng et al. 2025)",
            "drafts": "multi_draft, spectr, multi_draft_optimal, multi_draft_wor: number k of "
                      "draft sequences",
            "branches": "tree, traversal: children per node at each depth, e.g. 2x2x1 (its "
                        "depth is γ; all ones is a chain)",
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
                                 "where round starts have several closed classes, e.g. T = "
                                 "0, the limit of chains from the start; the i.i.d. stub: "
                                 "one round from the start)",
            "drafted_stationary": "exact long-run draft tokens per round",
            "tokens_per_call": "simulated tokens per target call",
            "tokens_ci_low": "lower end of its 95% confidence interval (batch means)",
            "tokens_ci_high": "upper end of that interval",
            "tokens_se": "standard error of tokens_per_call (batch means)",
            "batches": "batches of chains behind the confidence intervals",
            "covered": "whether the 95% interval covers tokens_exact (up to 1e-9 relative)",
            "drafted_exact": "exact draft tokens proposed per round over the simulated rounds "
                             "(k γ for multi_draft, the tree's nodes for tree)",
            "drafted_per_round": "simulated draft tokens proposed per round",
            "drafted_ci_low": "lower end of its 95% confidence interval",
            "drafted_ci_high": "upper end of that interval",
            "exact_method": "stationary, first_round, or mc_only (too large to enumerate)",
            "speedup_c<c>": "simulated speedup at draft cost c, drafts drafted one after "
                            "another (sequential): tokens / (rounds + c drafted), long-run sums",
            "speedup_ci_low_c<c>": "lower end of its 95% confidence interval",
            "speedup_ci_high_c<c>": "upper end of that interval",
            "speedup_exact_c<c>": "tokens_stationary / (1 + c drafted_stationary): the long run",
            "speedup_batched_c<c>": "simulated speedup with batched drafting: k drafts drafted "
                                    "side by side cost c per depth, tokens / (rounds + c "
                                    "drafted / k) (= speedup_c<c> for one draft sequence)",
            "speedup_ci_low_batched_c<c>": "lower end of its 95% confidence interval",
            "speedup_ci_high_batched_c<c>": "upper end of that interval",
            "speedup_exact_batched_c<c>": "tokens_stationary / (1 + c drafted_stationary / k): "
                                          "the long run, batched drafting",
        }),
    Table(
        "schemes_policies", needs="schemes", builder="specsim.tables.schemes:schemes_policies",
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
    Table(
        "cost_batch", needs="schemes", builder="specsim.tables.schemes:cost_batch",
        title="The best draft length against batch size, at the roofline's cost",
        about="For each model of the config's ``cost:`` section, (target, draft) shape pair of the "
              "intensity stage, device and batch size b: a round's cost from the roofline "
              "(verifying n tokens per sequence costs T_target(n, b) / T_target(1, b) target "
              "calls, a draft step over w tokens per sequence T_draft(w, b) / T_target(1, b); "
              "``specsim.costs``), the best γ of Algorithm 1 by its exact long-run tokens per "
              "call, the best k-draft point of the model's schemes studies drafting one "
              "after another and batched, its best token tree, and Sequoia's optimal tree of "
              "the best node budget.",
        columns={
            "model": "the model pair whose exact tokens per call are used (acceptance)",
            "target": "the target's transformer shape (its roofline times)",
            "draft_model": "the draft's transformer shape",
            "device": "accelerator",
            "batch": "batch size b: sequences decoded together, each its own KV cache",
            "n_ctx": "context length held in each sequence's KV cache",
            "c": "T_draft(1, b) / T_target(1, b): the draft cost c of a one-token draft step",
            "gamma_best": "the best γ in 1..gamma_max of Algorithm 1 at the roofline's cost",
            "tokens_best": "exact long-run tokens per target call at gamma_best",
            "verify_best": "T_target(gamma_best + 1, b) / T_target(1, b): the verify pass's cost",
            "speedup_best": "tokens_best / (gamma_best c + verify_best): speedup over the target "
                            "alone at batch b",
            "gamma_constant": "the best γ of the constant model 1 + γ c (verifying free) at the "
                              "same c",
            "speedup_constant": "the speedup the constant model predicts at gamma_constant",
            "speedup_at_gamma_constant": "the roofline's speedup at gamma_constant",
            "kdraft_<drafting>_rule": "the best point drafting several sequences (schemes "
                                      "studies, fixed γ): its rule; drafting sequential (k γ "
                                      "one-token draft steps) or batched (γ steps over k "
                                      "tokens per sequence); both verify k γ + 1 tokens in one "
                                      "pass",
            "kdraft_<drafting>_drafts": "its number of drafts k",
            "kdraft_<drafting>_gamma": "its draft length γ",
            "kdraft_<drafting>_speedup": "its exact speedup at the roofline's cost",
            "tree_shape": "the best token-tree point (rule tree) of the model's schemes "
                          "studies at the roofline's cost, drafted batched (one step per depth "
                          "over its nodes there): its shape, children per node at each depth",
            "tree_budget": "its drafted nodes",
            "tree_tokens": "its exact long-run tokens per call",
            "tree_speedup": "its exact speedup at the roofline's cost",
            "sequoia_budget": "the node budget n in 1..cost.tree_budget_max whose Sequoia "
                              "optimal tree (schemes.sequoia.best_tree, most tokens per call "
                              "for n nodes under the positional model) has the best exact "
                              "speedup at the roofline's cost, drafted batched; empty for the "
                              "i.i.d. stub (frozen pairs: no long run of its own)",
            "sequoia_depth": "that tree's depth (its draft steps, batched)",
            "sequoia_tokens": "its exact long-run tokens per call (the tree rule on the tables, "
                              "or on a trace's positional model)",
            "sequoia_speedup": "its exact speedup at the roofline's cost",
        }),
)
MAX_DRAFTS = 8  # schemes_trees' k-drafts: k | n, 2 <= k <= 8 (a trace's law costs ~k^2 a position)
TREE_TABLE = Table(
    "schemes_trees", needs="schemes", builder="specsim.tables.schemes_trees:schemes_trees",
    title="Draft trees against the best chain and the best k-draft of the same node budget",
    about="One row per tree point of a schemes study on a table model or a trace: its node "
          "budget n (the shape's drafted nodes, so every scheme in the row costs 1 + n c a "
          "round), the shape's exact tokens per call and Sequoia's prediction for it, Sequoia's "
          "optimal tree for n nodes (Chen et al. 2024, arXiv 2402.12374: dynamic programming "
          "over the positional acceptance vector, computed exactly over the target's stationary "
          "law, or over a trace's positions) with its predicted and exact tokens per call, the "
          "chain of γ = n and the best k-draft with k γ = n, all exact (stationary long run; a "
          "trace's positional model, on its dense rows), and traversal verification of the "
          "same trees where the study runs it.",
    columns={
        "study": KEYS["study"], "model": KEYS["model"], "alpha": KEYS["alpha"],
        "temperature": KEYS["temperature"],
        "gamma": "the tree's depth (the point's γ)",
        "branches": "the tree rule's shape: children per node at each depth",
        "nodes": "node budget n: drafted tokens per round of every scheme in the row",
        "accept_1": "positional acceptance of the first child (Algorithm 1's mean acceptance "
                    "over the target's stationary law, or over a trace's positions)",
        "tree_tokens_exact": "the shape's exact tokens per target call (the point's long run)",
        "<rule>_tokens_exact": "a rule verifying the same trees (traversal: leaf to root, "
                               "Weng et al. 2025, arXiv 2505.12398): its exact tokens per call "
                               "at the shape, from its point of the same study (empty if the "
                               "study does not run it)",
        "tree_tokens_predicted": "what Sequoia's positional model predicts for the shape",
        "sequoia_tree": "Sequoia's optimal tree for n nodes: each node's parent (-1: the root), "
                        "depth-first, children in position order",
        "sequoia_depth": "its depth",
        "sequoia_tokens_predicted": "its tokens per call under the positional model (the DP's "
                                    "value)",
        "sequoia_tokens_exact": "its exact tokens per call on the model (the tree rule's law)",
        "chain_tokens_exact": "Algorithm 1 at γ = n: exact tokens per call",
        "best_k": f"the k of the best k-draft (multi_draft with k γ = n, 2 <= k <= {MAX_DRAFTS})",
        "best_k_gamma": "its γ = n / k",
        "k_draft_tokens_exact": "its exact tokens per call",
        "best": "which of tree, sequoia, chain, k_draft emits the most tokens per call",
    })
TABLES = (*TABLES, TREE_TABLE)
FIGURES = (
    Figure(
        "schemes_speed", needs="schemes", builder="specsim.figures.schemes:schemes_speed",
        caption=(
            "Tokens per target call (left) and speedup at the study's smallest draft cost c "
            "(right) versus draft length γ for every verification scheme on one model: "
            "Algorithm 1 (``correct``), block verification (Sun et al. 2024), k independent "
            "drafts (SpecInfer's multi-step speculative sampling), Leviathan's lenience and "
            "Medusa's typical acceptance. Lines with open markers: exact (enumeration or "
            "dynamic programming, stationary long run); dots: simulation with 95% confidence "
            "intervals. A multi-draft round costs 1 + kγc target calls.")),
    Figure(
        "schemes_multidraft", needs="schemes",
        builder="specsim.figures.schemes:schemes_multidraft",
        caption=(
            "How far the k-draft verification schemes stand below the best any verification of "
            "k i.i.d. drafts can do: exact tokens per target call (lines, open markers) and "
            "simulated ± 95% CI (dots) versus draft length γ, one panel per k, for SpecInfer's "
            "recursive rejection sampling (multi_draft), SpecTr's K-SEQ (spectr) and drafts "
            "without replacement (multi_draft_wor, RSD-C: not i.i.d., so outside the bound), "
            "beside the LP optimum per depth (multi_draft_optimal, black dotted).")),
    Figure(
        "schemes_frontier", needs="schemes", builder="specsim.figures.schemes:schemes_frontier",
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
        "schemes_policies", needs="schemes", builder="specsim.figures.schemes:schemes_policies",
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
    Figure(
        "optimal_gamma_batch", needs="schemes",
        builder="specsim.figures.schemes:optimal_gamma_batch",
        caption=(
            "The best draft length against batch size, at the roofline's cost "
            "(``cost_batch.csv``). Left: the best γ of Algorithm 1 by the model's exact "
            "long-run tokens per call when verifying γ + 1 tokens costs what the roofline of "
            "the target's forward pass says at that batch size (solid), and the γ the constant "
            "model 1 + γ c picks at the same draft cost c (dotted). Right: the speedup over the "
            "target alone of the best γ (solid) and of the best k-draft point of the schemes "
            "studies, drafting one after another (dashed) or batched (dash-dot), and of its best "
            "token tree drafted batched (dash-dot-dot). Squares: Sequoia's optimal tree of the "
            "best node budget (up to ``cost.tree_budget_max``, drafted batched): its node "
            "count (left) and speedup (right). One colour per device; one panel row per "
            "model.")),
)
