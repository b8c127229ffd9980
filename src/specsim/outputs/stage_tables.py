"""Tables written by steps of their own, documented here for their HTML pages and report
captions: the checks (``specsim checks``), the real-text stage (workflow/rules/realtext.smk)
and the LLM tier's assisted-generation table (workflow/rules/llm.smk, opt-in)."""

from __future__ import annotations

from specsim.declare import ACCEPT, EQ1, GTEST, Table

TABLES = (
    Table(
        "checks",
        title="Checks: every claim of the seeds, re-tested",
        about="One row per claim the two seed documents make, re-tested with proper statistics. "
              "Every row must pass: the DAG stops (rule gate), naming the claim, when one does "
              "not.",
        columns={
            "check": "the claim and where it was tested, e.g. verdict[model/γ/T/rule]",
            "source": "which seed document (program or notebook) and which of its demos or "
                      "checks made the claim",
            "passed": "whether the claim holds",
            "observed": "what the simulation and exact theory give",
            "expected": "what the claim requires",
        }),
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
        }),
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
        }),
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
        }),
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
        }),
    Table(
        "pair_accept",
        title="Your model pair: predicted vs measured tokens per target call",
        about="For each real pair's trace: tokens per target call predicted by the positional "
              "model (exact on the trace, bootstrap CI over its documents) beside speculative "
              "generation with the same models from the same prompts (bootstrap CI over "
              "prompts), and their paired difference. ``covered``: the difference's 95% CI "
              "contains 0. One schema for every backend (specsim.pairs.accept): the n-gram "
              "pairs here, the LLM tier's pairs in results/llm/pair_accept.csv.",
        columns={
            "pair": "the pair (its trace: results/traces/<pair>.parquet)",
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
        }),
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
        }),
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
        }),
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
        }),
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
        csv="results/realtext/pair_costs.csv"),
    Table(
        "llm_assisted",
        title="LLM: specsim's loop beside transformers' assisted generation",
        about="SmolLM2-135M-Instruct on this CPU with the same draft model: specsim's speculative "
              "loop and transformers' ``generate(..., assistant_model=draft)`` (its default "
              "draft-length policy and a fixed γ), sampling at temperature 1, beside plain "
              "sampling by each; measured tokens per second and per target call against Leviathan "
              "Eq. 1 and Thm 3.8 at the measured α and draft cost. Wall-clock timings: not "
              "deterministic.",
        columns={
            "loop": "specsim (its own loop, Alg. 1 with KV caches), transformers-fixed "
                    "(assisted generation, constant γ, no confidence stop), "
                    "transformers-default (assisted generation with transformers' default "
                    "draft-length policy); specsim / transformers alone on the target-alone rows",
            "draft": "the draft model (the assistant), or target alone for plain sampling",
            "gamma": "draft length γ: tokens drafted per round (for transformers-default its "
                     "num_assistant_tokens, an upper bound; 0 for the target alone)",
            "policy": "the draft-length policy: schedule, num_assistant_tokens and the "
                      "assistant's confidence threshold (drafting stops below it)",
            "prompts": "held-out prompts generated from (the same for every row)",
            "tokens": "new tokens generated over all prompts",
            "target_calls": "target forward calls (rounds), counted with a forward hook",
            "draft_calls": "draft forward calls (draft steps)",
            "gamma_mean": "mean tokens drafted per round (below gamma where the confidence stop "
                          "or the remaining token budget cut a round short)",
            "gamma_max": "most tokens drafted in one round",
            "tokens_per_call": "tokens emitted per target call (accepted drafts + 1 per round)",
            "tokens_per_call_sd": "standard deviation of the tokens emitted per round",
            "seconds": "wall time of one generation: the median over the prompts (each "
                       "prompt a repeat, every row's generation of it interleaved: "
                       "specsim.timing)",
            "seconds_q25": "lower quartile of the generations' wall times",
            "seconds_q75": "upper quartile of the generations' wall times",
            "tokens_per_second": "tokens / seconds of one generation: the median over the prompts",
            "tokens_per_second_q25": "its lower quartile over the prompts",
            "tokens_per_second_q75": "its upper quartile over the prompts",
            "speedup_measured": "seconds per token of plain sampling by the same library (the "
                                "target-alone row of specsim or of transformers) over this row's, "
                                "per prompt (paired): the median over the prompts",
            "speedup_measured_q25": "lower quartile of the per-prompt speedups",
            "speedup_measured_q75": "upper quartile of the per-prompt speedups",
            "reliable": "the seconds per target call (the same work on every prompt) of this row "
                        "and of its library's plain row agree across the prompts (IQR / median "
                        "<= specsim.timing.TOLERANCE, at least 3 prompts); False: the timings are "
                        "noise (a busy machine: see the load)",
            "target_share": "share of the wall time spent inside target forward calls (the "
                            "rest: draft calls and each loop's own code)",
            "accept_rate": "drafts accepted / drafts tested (up to and including the first "
                           "rejection of each round): the measured α",
            "accept_ci_low": "lower end of the 95% Wilson interval of accept_rate",
            "accept_ci_high": "upper end of that interval",
            "c": "draft step / KV-cached target call of one position, from the costs table",
            "c_in_situ": "mean draft forward call in this loop over the seconds per token of "
                         "the same library's plain sampling",
            "tokens_eq1": f"{EQ1} at accept_rate, averaged over the rounds' draft lengths",
            "speedup_thm38": "Leviathan Thm 3.8 at accept_rate and c over the rounds' draft "
                             "lengths: Σ Eq. 1 / Σ (γ c + 1)",
            "speedup_cost_model": "the same with the measured T(γ+1)/T(1) of the costs table "
                                  "in place of 1: Σ Eq. 1 / Σ (γ c + T(γ+1)/T(1))",
            "threads": "torch threads",
            "load_before": "the machine's 1-minute load average before the runs",
            "load_after": "the same after them (above cpus: the runs shared the cores)",
            "cpus": "the machine's CPU count (os.cpu_count)",
        },
        csv="results/llm/assisted.csv"),
    Table(
        "llm_lossless_audit",
        title="LLM: is transformers' assisted generation lossless under sampling warpers?",
        about="transformers' ``generate(..., assistant_model=draft)`` with sampling -- its "
              "defaults and top-k / top-p / temperature warpers -- against the exact law of the "
              "first two emitted tokens computed from the models' own distributions after the "
              "same warpers: a G-test on binned counts, each verdict beside the total variation "
              "it detects with power 0.9 at the run's trials, and the law transformers "
              "implements beside a #47932-style mismatch.",
        columns={
        "setting": "the sampling setting (WARPERS): what was passed to generate beside do_sample",
        "warpers": "temperature, top_k, top_p in force (passed, else the generation config's, else "
                   "transformers' defaults)",
        "prompt": "the prompt whose first two emitted tokens are tested (audit_prompt)",
        "draft": "the assistant model (audit_draft)",
        "policy": "the assistant's draft-length policy (transformers' default; with two new "
                  "tokens the first round drafts one)",
        "trials": "assisted generate calls of two new tokens, each with its own torch seed",
        "bins": "cells of the G-test: named pairs, one 'other x2' cell per likely x1, the rest",
        "mass_named_bins": "exact probability of every cell but the last (the rest)",
        "g_statistic": "G = 2 Σ O ln(O/E) over the bins",
        "df": "degrees of freedom (bins - 1)",
        "p_value": "chi-square tail of G",
        "verdict": "lossless if p_value >= significance, else biased",
        "tv_observed": "TV between the observed bin frequencies and the exact binned law",
        "tv_ci_low": "lower end of its 95% parametric-bootstrap interval",
        "tv_ci_high": "upper end of that interval",
        "tv_floor": "expected tv_observed of trials draws from the exact law itself",
        "tv_detectable_at_power_0.9": "binned TV every alternative at or beyond which the G-test "
                                      "detects with probability >= 0.9 (noncentral χ², Pinsker)",
        "power_simulated": "simulated power of the test at that TV against the worst alternative "
                           "(a balanced tilt of the bins)",
        "power_ci_low": "lower end of its 95% Wilson interval",
        "power_ci_high": "upper end of that interval",
        "tv_implemented": "TV between the first-token law transformers implements (draft sampled "
                          "from and divided by q warped twice) and the target's warped law",
        "tv_mismatch": "the same for a #47932-style bug: sampling from q warped twice, dividing by "
                       "q warped once",
        "tv_mismatch_binned": "that TV on the test's bins (compare with the detectable TV)",
        "rejections_fraction": "trials whose first drafted token was rejected (residual drawn)",
        "rejections_ci_low": "lower end of its 95% Wilson interval",
        "rejections_ci_high": "upper end of that interval",
        "rejection_q_twice": "exact rejection probability 1 - Σ min(p_w, q) with q warped twice "
                             "(what transformers' assistant does)",
        "rejection_q_once": "the same with q warped once",
        "q_twice_covered": "the Wilson interval covers rejection_q_twice",
        "q_once_covered": "the Wilson interval covers rejection_q_once",
        "seconds_per_trial": "wall time of one generate call: the median over the trials",
        "seconds_per_trial_q25": "its lower quartile over the trials",
        "seconds_per_trial_q75": "its upper quartile over the trials",
        "reliable": "the trials' wall times agree (IQR / median <= specsim.timing.TOLERANCE)",
        "load_before": "the machine's 1-minute load average before the setting's trials",
        "load_after": "the same after them (above cpus: the trials shared the cores)",
        "cpus": "the machine's CPU count (os.cpu_count)",
        "significance": "the test's level (the config's significance)",
        "threads": "torch threads",
        },
        csv="results/llm/lossless_audit.csv"),
)
