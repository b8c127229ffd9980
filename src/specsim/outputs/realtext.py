"""The real-text stage's tables and figures (workflow/rules/stages.smk), each declared once.

A table's ``step`` is the stage step writing it (``realtext:<step>``, one rule and one
``specsim realtext`` sub-command each); the rule lists its outputs from these declarations, and
the figures step draws each figure from the declared tables. Gathered by :mod:`specsim.outputs`.

Kept free of pandas and matplotlib: Snakemake imports it to plan the DAG.
"""

from __future__ import annotations

from specsim.declare import ACCEPT, EQ1, GTEST, TIMINGS, Figure, Table

#: The columns of ``pair_accept`` in both tiers (one schema: specsim.pairs.accept.COLUMNS).
PAIR_ACCEPT = {
    "pair": "the pair (its trace: results/traces/<pair>.parquet; the LLM tier's draft, its "
            "trace results/llm/traces/<pair>.parquet)",
    "engine": "what ran the measured generation: specsim (its own loop) or "
              "transformers (assisted generation at a fixed γ)",
    "gamma": "draft length γ",
    "rule": "acceptance rule",
    "documents": "documents of the trace = prompts of the measured generation",
    "replicas": "independent measured generations per prompt",
    "tokens_per_document": "tokens (characters for the n-gram pairs) per document: what "
                           "each measured chain generates (their mean if they differ)",
    "tokens_predicted": "Σ document lengths / Σ expected target calls to traverse "
                        "them (positional model, backward DP): exact on the trace",
    "tokens_predicted_ci_low": "lower end of its 95% bootstrap CI over documents",
    "tokens_predicted_ci_high": "upper end of that interval",
    "tokens_measured": "Σ tokens / Σ target calls of speculative generation (each chain "
                       "until it has emitted its document's length)",
    "tokens_measured_ci_low": "lower end of its 95% bootstrap CI over prompts",
    "tokens_measured_ci_high": "upper end of that interval",
    "difference": "tokens_predicted − tokens_measured",
    "difference_ci_low": "lower end of its 95% paired bootstrap CI over prompts (one "
                         "resample of the prompts draws both ratios; empty below two "
                         "prompts)",
    "difference_ci_high": "upper end of that interval",
    "difference_se": "standard deviation of the paired bootstrap differences",
    "relative_difference": "difference / tokens_measured",
    "covered": "the difference's 95% CI contains 0: prediction and measurement agree",
    "alpha_mean": "mean α = Σ min(p, q) over the trace's positions",
    "tokens_eq1_mean_alpha": f"{EQ1} at alpha_mean, γ + 1 at α = 1 (ignores how α "
                             "varies and documents end)",
    "alpha_tested_predicted": "mean α over the drafts the positional model tests",
    "alpha_tested_measured": "mean Σ min(p, q) over the drafts measured generation "
                             "tested (inside the document); empty where the engine's "
                             "runs do not report their drafts (the LLM tier)",
    "alpha_first_predicted": "the same for each round's first draft only",
    "alpha_first_measured": "the same for each round's first draft only",
}

TABLES = (
    Table(
        "realtext_models",
        title="Real text: the character n-gram models",
        about="The target and draft n-grams trained on the standard library's English text: size, "
              "held-out perplexity and the per-context acceptance β = Σ min(p, q) of each draft.",
        columns={
            "order": "n-gram order (a context of order − 1 characters)",
            "role": "target or draft",
            "contexts": "distinct contexts the model has seen",
            "heldout_chars": "held-out characters scored",
            "perplexity": "held-out perplexity per character",
            "bits_per_char": "held-out cross-entropy in bits per character",
            "beta_mean": "mean over held-out contexts of β = Σ min(p, q) between the target "
                         "and this model (1 for the target itself)",
            "beta_p10": "10th percentile of β over held-out contexts",
            "beta_median": "median of β",
            "beta_p90": "90th percentile of β",
            "corpus_sha256": "sha256 of the corpus the models were trained on",
        },
        step="realtext:model"),
    Table(
        "realtext_beta",
        title="Real text: how acceptance varies by context",
        about="Histogram of the per-context acceptance β = Σ min(p, q) over held-out contexts, per "
              "draft order: far from one number.",
        columns={
            "draft_order": "n-gram order of the draft",
            "bin_low": "lower edge of the β bin",
            "bin_high": "upper edge of the β bin",
            "count": "held-out contexts with β in the bin",
            "density": "count / (contexts × bin width): a probability density over β",
        },
        step="realtext:model"),
    Table(
        "realtext_speculative",
        title="Real text: characters per target call",
        about="Speculative sampling from held-out prompts: acceptance and characters per target "
              "call with 95% intervals, beside Eq. 1 at the mean β (the gap is Jensen's).",
        columns={
            "draft_order": "n-gram order of the draft",
            "gamma": "draft length γ",
            "rule": "acceptance rule",
            "chains": "independent chains, each from its own held-out prompt",
            "rounds": "rounds per chain",
            **ACCEPT,
            "beta_mean": "mean β = Σ min(p, q) over the positions tested",
            "tokens_per_call": "simulated characters emitted per target call",
            "tokens_ci_low": "lower end of its 95% confidence interval (batch means)",
            "tokens_ci_high": "upper end of that interval",
            "tokens_closed_form": f"{EQ1} at beta_mean",
            "jensen_gap": "tokens_closed_form − tokens_per_call: what Eq. 1 at the mean β "
                          "overstates",
            "alpha_from_tokens": "the α at which Eq. 1 equals tokens_per_call",
            "alpha_heldout": "mean β of this draft over held-out text (realtext_models)",
            "tokens_closed_form_heldout": f"{EQ1} at alpha_heldout",
        },
        step="realtext:speculative"),
    Table(
        "realtext_lossless",
        title="Real text: lossless?",
        about="For fixed contexts, the exact law of the next two characters against Monte Carlo "
              "counts of speculative sampling, per rule.",
        columns={
            "context": "the fixed context the two characters follow",
            "draft_order": "n-gram order of the draft",
            "gamma": "draft length γ",
            "rule": "acceptance rule",
            "trials": "two-character generations simulated",
            "entropy_bits": "entropy of the exact two-character law, bits",
            "tv_mc": "total-variation distance between the simulated frequencies and the exact "
                     "law",
            "tv_floor": "sampling floor: the expected tv_mc of trials draws from the exact law",
            **GTEST,
            "df": "degrees of freedom of the G-test",
        },
        step="realtext:lossless"),
    Table(
        "pair_accept",
        title="Your model pair: predicted vs measured tokens per target call",
        about="For each real pair's trace: tokens per target call predicted by the positional "
              "model (exact on the trace, bootstrap CI over its documents) beside speculative "
              "generation with the same models from the same prompts (bootstrap CI over "
              "prompts), and their paired difference. ``covered``: the difference's 95% CI "
              "contains 0. One schema for every backend (specsim.pairs.accept): the n-gram "
              "pairs here, the LLM tier's pairs in results/llm/pair_accept.csv.",
        columns=PAIR_ACCEPT,
        step="realtext:pair_accept"),
    Table(
        "pair_optimal",
        title="Your model pair: optimal γ and break-even c",
        about="From each n-gram pair's trace, the exact tokens per call E_γ (positional model) "
              "at γ = 1..gamma_max: the γ maximising Thm 3.8's speedup E_γ/(1 + γc) at each c, "
              "beside what Eq. 1 at the mean α would choose, and the largest c at which the pair "
              "still gains.",
        columns={
            "pair": "the pair (its trace: results/traces/<pair>.parquet)",
            "c": "draft cost: a draft step over a target call",
            "gamma_max": "largest γ considered",
            "gamma_opt": "γ maximising E_γ/(1 + γc) (ties to the smallest)",
            "tokens_opt": "E_γ at gamma_opt: exact tokens per call on the trace",
            "speedup_opt": "E_γ/(1 + γc) at gamma_opt",
            "alpha_mean": "mean α over the trace's positions",
            "gamma_opt_eq1": "the γ Thm 3.8 at alpha_mean chooses",
            "speedup_opt_eq1": "what Thm 3.8 at alpha_mean promises at gamma_opt_eq1",
            "speedup_at_gamma_opt_eq1": "what the trace gives at gamma_opt_eq1",
            "c_break_even": "max over γ of (E_γ − 1)/γ: below it some γ gains",
            "gamma_break_even": "the γ attaining c_break_even",
            "c_break_even_eq1": "Cor 3.9's break-even at alpha_mean: α itself",
            "gains": "speedup_opt > 1",
        },
        step="realtext:pair_optimal"),
    Table(
        "engine_schedule",
        title="Your engine: the best draft length at every batch size",
        about="From each n-gram pair's measured runs' acceptance counters at draft length K "
              "(written in vLLM's Prometheus format, results/engine/<pair>.prom, and read back "
              "as an engine's) and a latency profile (realtext.engine: a CSV, or the roofline "
              "of a shape pair on a device): speedup(b, K') = T(K') T_target(b, 1) / (K' "
              "T_draft(b, 1) + T_target(b, K'+1)) for K' = 0..max_gamma at every batch size b, "
              "the best K' per b (0: turn speculation off), intervals from the counts and the "
              "profile's spreads; K' > K extrapolated and flagged (specsim.acceptance).",
        columns={
            "pair": "the pair whose counters these are",
            "engine_gamma": "K: the draft length the counters were recorded at",
            "rounds": "N: drafting rounds behind the counters",
            "batch": "batch size b: sequences decoded together",
            "gamma": "draft length K' (0: plain decoding)",
            "tokens_per_call": "T(K') = 1 + sum_{i<=K'} a_i / N (tail model beyond K: "
                               "conditional acceptance fitted along log position)",
            "tokens_per_call_ci_low": "lower end of its 95% interval (multinomial; beyond K "
                                      "the tail model's)",
            "tokens_per_call_ci_high": "upper end of that interval",
            "speedup": "T(K') T_target(b,1) / (K' T_draft(b,1) + T_target(b,K'+1))",
            "speedup_ci_low": "lower end of its interval (counts and latency spreads)",
            "speedup_ci_high": "upper end of that interval",
            "extrapolated": "K' > K: beyond what the counters identify",
            "best": "the best K' at this batch size (ties to the smaller; an extrapolated K' "
                    "only when its speedup_ci_low beats the best identified speedup)",
            "round_seconds": "K' T_draft(b,1) + T_target(b,K'+1): one round",
            "plain_seconds": "T_target(b, 1): one plain decoding step",
            "draft_seconds": "T_draft(b, 1): one draft step",
            "verify_seconds": "T_target(b, K'+1): verifying K' drafts",
            "tokens_per_second": "b T(K') / round_seconds: the batch's throughput",
            "pays": "best, K' > 0 and the speedup's interval above 1",
            "chosen_by": "on the best row: identified (no extrapolated K' looked better), "
                         "held_back (an extrapolated K' had a larger speedup but its low end "
                         "did not beat this one) or low_bound (extrapolated: its low end beats "
                         "the best identified K')",
            "latency": "the latency profile (file, or roofline target/draft on device)",
            "cost_extrapolated": "K' beyond the draft lengths of the measured runs: the "
                                 "calibrated round cost extrapolated linearly in K' (False "
                                 "with a latency profile, which times every K')",
            "batch_interpolated": "b between two measured batch sizes: the cost terms "
                                  "interpolated linearly in b (False with a latency profile "
                                  "or at a measured b)",
        },
        step="realtext:engine"),
    Table(
        "engine_shortcut",
        title="Your engine: what the counters' shortcut costs, on the real pairs' traces",
        about="Engine counters lose which context each round started in: from a run at K they "
              "give T(K') for K' <= K as if rounds of K' started where the rounds of K did, and "
              "extrapolate beyond K (the tail model: conditional acceptance fitted along the "
              "positions). On each trace both are exact (the positional model): the counters' "
              "route from every K = 1..engine.gamma beside the exact T(K'), the error with a "
              "bootstrap interval over the trace's documents, the interval the route itself "
              "reports and whether it covers the truth, the constant tail it replaced, and the "
              "measured runs' counters' own estimate. Every trace of the run: the pairs' and "
              "their tempered ones (pair_T<t>).",
        columns={
            "pair": "the trace: results/traces/<pair>.parquet (a pair, or a pair at "
                    "temperature t: <pair>_T<t>)",
            "engine_gamma": "K: the draft length of the counters",
            "gamma": "draft length K'",
            "extrapolated": "K' > K (the tail model)",
            "tokens_exact": "exact T(K') of the positional model run at K'",
            "tokens_counters": "the counters' route from the exact expected counters at K",
            "error": "tokens_counters - tokens_exact (0 at K' = K)",
            "error_ci_low": "lower end of its 95% bootstrap interval over documents",
            "error_ci_high": "upper end of that interval",
            "relative_error": "error / tokens_exact",
            "documents": "documents of the trace",
            "tokens_counters_ci_low": "lower end of the 95% interval the route reports for "
                                      "these counters at the measured runs' size (replicas "
                                      "chains per document)",
            "tokens_counters_ci_high": "upper end of that interval",
            "covered": "that interval holds tokens_exact",
            "tokens_constant_tail": "the route with the constant tail beyond K (r_K at every "
                                    "later position; the model before the fitted one)",
            "relative_error_constant_tail": "(tokens_constant_tail - tokens_exact) / "
                                            "tokens_exact",
            "tokens_measured_counters": "the counters' route from the measured runs' counters "
                                        "(at their K; empty at the other K and traces)",
            "tokens_measured_counters_ci_low": "lower end of its 95% interval",
            "tokens_measured_counters_ci_high": "upper end of that interval",
        },
        step="realtext:engine"),
    Table(
        "realtext_costs",
        title="Real text: measured costs and wall-clock speedup",
        about="Wall time on this CPU of a target call verifying k positions, a draft step and a "
              "speculative round, per batch of prompts, hence the measured c and T(k)/T(1), and "
              "the measured speedup beside Thm 3.8 and the cost model at those costs. Timings "
              "are not deterministic: the table lives in results/realtext/, apart from the "
              "deterministic tables, and nothing asserts on it.",
        columns={
            "batch": "prompts per vectorised call",
            "repeats": "interleaved repeats of every timing",
            "measure": "what was timed: target_call (k positions), plain_step (one token of "
                       "plain sampling), draft_step, speculative (one round)",
            "positions": "positions the call scores (k; γ+1 for a round)",
            "seconds": "median wall time of one call or round",
            "ratio": "seconds over the median one-position target call (T(k)/T(1); c for a "
                     "draft step)",
            "draft_order": "n-gram order of the draft (empty for the target's rows)",
            "c": "measured draft step / target call",
            "gamma": "draft length γ of a speculative round",
            "alpha": "acceptance rate of that (draft, γ) in realtext_speculative",
            "tokens_per_round": "characters per round in realtext_speculative",
            "overhead": "round time / T(1) − γ c − T(γ+1)/T(1): what a round costs beyond "
                        "drafting and verifying",
            "speedup_measured": "median over repeats of the plain step's time times the "
                                "tokens per round, over the round's time",
            "speedup_thm38": "Leviathan Thm 3.8 at alpha and c",
            "speedup_cost_model": "tokens_per_round / (γ c + T(γ+1)/T(1))",
            **TIMINGS,
        },
        csv="results/realtext/costs.csv",
        step="realtext:costs"),
    Table(
        "pair_costs",
        title="Your model pair: speedup at the measured costs",
        about="Each n-gram pair's exact tokens per call (its trace, positional model) at the "
              "draft cost c and verify cost T(γ+1)/T(1) measured in results/realtext/costs.csv: "
              "Thm 3.8's speedup and the cost model's, their optimal γ and break-even c. Timings "
              "are not deterministic: the table lives beside them.",
        columns={
            "batch": "prompts per vectorised call in the timings",
            "pair": "the pair (its trace)",
            "gamma": "draft length γ",
            "c": "measured draft step / target call",
            "verify_ratio": "measured T(γ+1)/T(1): a target call verifying γ+1 positions",
            "costs_reliable": "c and verify_ratio come from reliable timings (their interleaved "
                              "repeats agree: specsim.timing); False: read them as noise",
            "tokens_exact": "E_γ: exact tokens per call on the trace",
            "speedup_thm38": "E_γ / (1 + γc) (Thm 3.8: verifying γ+1 positions costs one call)",
            "speedup_cost_model": "E_γ / (γc + T(γ+1)/T(1))",
            "optimal_thm38": "this γ maximises speedup_thm38 for the pair and batch",
            "optimal_cost_model": "this γ maximises speedup_cost_model",
            "c_break_even_thm38": "(E_γ − 1)/γ: the c below which this γ gains (Thm 3.8)",
            "c_break_even_cost_model": "(E_γ − T(γ+1)/T(1))/γ: the same under the cost model",
        },
        csv="results/realtext/pair_costs.csv",
        step="realtext:pair_costs"),
)

FIGURES = (
    Figure(
        "realtext_beta", needs=None, step="realtext:figures",
        reads=("realtext_beta", "realtext_models"),
        builder="specsim.pairs.realtext.figures:figure_beta",
        caption=(
            "Real models, real text: the per-context acceptance probability β(h) = Σ\\ :sub:`x` "
            "min(p(x|h), q(x|h)) (Leviathan Def. 3.1) of the order-5 interpolated Witten-Bell "
            "character model (target) against the same family at orders 1–4 (drafts), over every "
            "context of the held-out text (every tenth document of the corpus: pydoc topics and "
            "standard-library docstrings of the running Python). Dotted lines: the means, the α "
            "each draft would have under Leviathan's i.i.d. assumption. The spread is the point: "
            "acceptance is not one number on real text.")),
    Figure(
        "realtext_tokens", needs=None, step="realtext:figures",
        reads=("realtext_speculative",),
        builder="specsim.pairs.realtext.figures:figure_tokens",
        caption=(
            "Speculative sampling with the real pair over real held-out prompts (1024 chains × 16 "
            "rounds per point by default). Left: characters emitted per target call, observed "
            "with 95% batch-means CIs (markers), beside Leviathan Eq. 1 evaluated at the mean β "
            "of the contexts actually tested (lines). Right: Jensen's gap, Eq. 1 at mean β minus "
            "the observed value (error bars: the CI of the observed value). β varies from context "
            "to context and is correlated along a round, so the closed form at the mean "
            "overstates the tokens per call once γ is large and the draft is good.")),
    Figure(
        "realtext_costs", needs=None, step="realtext:figures",
        reads=("realtext_costs",),
        builder="specsim.pairs.realtext.figures:figure_costs",
        caption=(
            "Measured costs on this CPU (wall time; not deterministic): each point is the median "
            "over interleaved repeats, its bars the quartiles, and a hollow marker flags a timing "
            "whose repeats disagree by more than the stated tolerance (``reliable`` false in the "
            "table). Left: the time of a target call verifying k positions relative to one "
            "position, T(k)/T(1), for one prompt (overhead bound: nearly flat, like a "
            "memory-bound accelerator) and for a batch of 256 prompts (compute bound: grows with "
            "k). Middle and right: the measured wall-clock speedup of speculative over plain "
            "target sampling (solid), Thm 3.8's prediction with the measured draft cost c and α "
            "(dashed; it assumes T(γ+1) = T(1)) and the same cost model with the measured T(γ+1) "
            "(dotted). The drafts here are not much cheaper than the target (c ≈ 0.2–1) and a "
            "round carries bookkeeping the theory leaves out, so speculative sampling is slower "
            "than the target alone except where T(k) is flat and c small.")),
    Figure(
        "pair_accept", needs=None, step="realtext:figures",
        reads=("pair_accept",),
        builder="specsim.pairs.figures:figure_pair_accept",
        caption=(
            "Your model pair, predicted vs measured: for each character n-gram pair (order-5 "
            "target, draft of order k), characters per target call against the draft length γ. "
            "Lines and bands: the positional model on the pair's trace (text the target generated "
            "from held-out prompts; exact given the trace, 95% bootstrap CI over its documents); "
            "dotted: Eq. 1 at the trace's mean α (in the legend). Points: speculative generation "
            "with the same models from the same prompts, each chain run until it has emitted as "
            "many characters as a document holds (95% bootstrap CI over prompts). Right: the "
            "paired difference (predicted − measured) / measured with its 95% CI over the shared "
            "prompts; a CI that contains 0 means the prediction holds to within what the budget "
            "resolves (results/tables/pair_accept.csv).")),
    Figure(
        "engine_schedule", needs=None, step="realtext:engine",
        reads=("engine_schedule",),
        builder="specsim.pairs.realtext.figures:figure_engine_schedule",
        caption=(
            "Your engine's route on the real-text pairs: each pair's measured speculative runs "
            "record an engine's acceptance counters at K = 4 (written in vLLM's Prometheus format "
            "under results/engine/ and read back as an engine's), taken with a latency profile "
            "(by default the roofline of Llama-2-70B with a Llama-2-7B draft on an H100) through "
            "speedup(b, K') = T(K') T_target(b, 1) / (K' T_draft(b, 1) + T_target(b, K'+1)). "
            "Left: the best draft length K' of each pair at each batch size (hollow: K' > K, "
            "extrapolated by the tail model); right: its speedup with the 95% interval. "
            "engine_schedule.csv has every K'; the engines' configuration snippets are in "
            "results/engine/engine_config.md.")),
)
