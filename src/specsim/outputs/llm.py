"""The LLM tier's tables and figures (workflow/rules/stages.smk, opt-in), each declared once.

Its tables live in ``results/llm/`` (most hold wall-clock timings: not deterministic), each
with a Markdown twin; a table's ``step`` is the tier step writing it (``llm:<step>``, one rule
and one ``specsim llm`` sub-command each), and the rules list their outputs from these
declarations. Gathered by :mod:`specsim.outputs`.

Kept free of pandas and matplotlib: Snakemake imports it to plan the DAG.
"""

from __future__ import annotations

from specsim.declare import EQ1, TIMINGS, Figure, Table

TABLES = (
    Table(
        "llm_kernels",
        title="LLM: single-matmul timings on this CPU",
        about="``F.linear`` alone on SmolLM2-135M's three weight shapes (float32) for k input "
              "rows on this CPU: seconds per call, T(k)/T(1) and the weight bytes streamed per "
              "second, where PyTorch's matrix-vector kernel at k = 1 gives way to a "
              "matrix-matrix one from k = 2 (the step in T(k)/T(1) the roofline does not "
              "predict). Wall-clock timings: not deterministic.",
        columns={
            "matrix": "the weight shape: mlp up/gate 576->1536, mlp down 1536->576 or lm_head "
                      "576->49152",
            "weight_bytes": "bytes of the float32 weight matrix (out x in x 4)",
            "rows_k": "k: input rows (positions) of the call",
            "seconds": "wall time of one call: the median over the interleaved repeats",
            "ratio": "seconds over the same matrix's at k = 1: the median of the per-repeat "
                     "ratios (paired), T(k)/T(1)",
            "weight_gb_per_s": "weight_bytes / seconds, in GB/s: the rate the call streams the "
                               "weights at",
            "threads": "torch threads",
            "repeats": "interleaved repeats of every timing (cost_repeats)",
            **TIMINGS,
        },
        csv="results/llm/kernels.csv",
        step="llm:device"),
    Table(
        "llm_alpha",
        title="LLM: acceptance α of each draft on held-out text",
        about="Per draft of SmolLM2-135M-Instruct, the per-position acceptance α = Σ min(p, q) "
              "against the target and the cross-entropy on held-out token windows of the tier-1 "
              "corpus (positions with a full order-3 context). The int8 copy is measured token "
              "by token with its KV cache, as Alg. 1 runs it, and also in one batched pass "
              "(``int8 (batched pass)``), where its one activation scale per tensor makes it a "
              "much worse draft.",
        columns={
            "draft": "the draft: target (the target itself), ngram-k, int8, int8 (batched pass) "
                     "or skip-k (the first k decoder layers)",
            "kind": "the draft's family: target, ngram, int8 or skip",
            "positions": "held-out positions scored (int8: those of its first int8_windows "
                         "windows)",
            "alpha_heldout": "mean over the positions of α = Σ min(p, q) between the target's "
                             "next-token distribution p and the draft's q (1 for the target)",
            "alpha_p10": "10th percentile of α over the positions",
            "alpha_median": "median of α",
            "alpha_p90": "90th percentile of α",
            "cross_entropy_nats": "mean negative log-probability the model gives the held-out "
                                  "next token, in nats",
            "perplexity": "exp(cross_entropy_nats)",
        },
        csv="results/llm/alpha.csv",
        step="llm:alpha"),
    Table(
        "llm_costs",
        title="LLM: measured cost of verifying k positions",
        about="Wall time on this CPU of a KV-cached target call on k = 1..cost_max_positions new "
              "positions after a held-out context of cost_context_tokens tokens, and of one step "
              "of every draft, all timed in one interleaved measurement: the measured T(k)/T(1) "
              "and the draft cost c. Wall-clock timings: not deterministic.",
        columns={
            "model": "target, or the draft whose step was timed",
            "measure": "call (a target call on k new positions) or draft_step (a model draft's "
                       "KV-cached one-position call, an n-gram's next-token distribution and "
                       "one draw)",
            "positions": "k: new positions the call scores (1 for a draft step)",
            "seconds": "wall time of one call: the median over the interleaved repeats",
            "ratio": "seconds over the target's one-position call, the median of the "
                     "per-repeat ratios: T(k)/T(1) on the target's rows, c on a draft's",
            "threads": "torch threads",
            "repeats": "interleaved repeats of every timing (cost_repeats)",
            **TIMINGS,
        },
        csv="results/llm/costs.csv",
        step="llm:costs"),
    Table(
        "llm_intensity",
        title="LLM: arithmetic intensity against the roofline",
        about="Per k, the MACs and bytes of one KV-cached SmolLM2-135M pass (float32) over k new "
              "positions after n_ctx cached ones and their ratio beside this CPU's ridge point, "
              "and the roofline's T(k)/T(1) at its measured peak matmul rate and copy bandwidth "
              "beside the measured T(k)/T(1) of the costs table.",
        columns={
            "positions": "k: new positions of the pass (the costs table's target calls)",
            "n_ctx": "cached positions before them (cost_context_tokens)",
            "macs": "multiply-accumulates of the pass: the weight matmuls (the lm_head on every "
                    "position) and attention",
            "bytes": "bytes the pass moves: the float32 weights (the tied embedding / lm_head "
                     "table once) and the float32 KV cache read and written",
            "macs_per_byte": "macs / bytes: the pass's arithmetic intensity",
            "ridge_macs_per_byte": "this CPU's ridge point: its measured peak matmul FLOP/s / 2 "
                                   "over its copy bandwidth (the device step)",
            "roofline_seconds": "max(macs / peak MAC rate, bytes / copy bandwidth): the "
                                "roofline's time of the pass",
            "roofline_ratio": "roofline_seconds over that at k = 1: the roofline's T(k)/T(1)",
            "measured_seconds": "the costs table's median seconds of the target call on k "
                                "positions",
            "measured_ratio": "the costs table's measured T(k)/T(1) (median of per-repeat "
                              "ratios)",
            "roofline_fraction": "roofline_seconds / measured_seconds: the share of the "
                                 "measured time the roofline accounts for",
            "measured_reliable": "the costs table's reliable for that call (False: read the "
                                 "measured columns as noise)",
        },
        csv="results/llm/intensity.csv",
        step="llm:intensity"),
    Table(
        "llm_speculative",
        title="LLM: plain vs speculative generation",
        about="Plain target sampling and Leviathan Alg. 1 with KV caches per (draft, γ), from the "
              "same held-out prompts with the same number of new tokens, every configuration "
              "interleaved on every prompt: tokens per target call, the measured α, seconds per "
              "token and the measured speedup, beside Eq. 1, Thm 3.8 at the measured α and c, "
              "and the cost model with the measured T(γ+1)/T(1). Wall-clock timings: not "
              "deterministic.",
        columns={
            "prompts": "held-out prompts generated from (each a repeat of the timing)",
            "new_tokens": "new tokens asked of every generation (a speculative one emits at "
                          "least that many)",
            "load_before": "the machine's 1-minute load average before the runs",
            "load_after": "the same after them (above cpus: the runs shared the cores)",
            "cpus": "the machine's CPU count (os.cpu_count)",
            "draft": "the draft, or none (target only) for plain sampling",
            "gamma": "draft length γ: tokens drafted per round (0 for plain sampling)",
            "tokens": "new tokens generated over all prompts",
            "target_calls": "target forward calls (rounds) over all prompts",
            "tokens_per_call": "tokens / target_calls (1 for plain sampling)",
            "seconds_per_token": "wall time of a generation over its tokens: the median over "
                                 "the prompts",
            "seconds_per_token_q25": "its lower quartile over the prompts",
            "seconds_per_token_q75": "its upper quartile over the prompts",
            "speedup_measured": "plain sampling's seconds per token over this row's, per prompt "
                                "(paired): the median over the prompts",
            "speedup_measured_q25": "lower quartile of the per-prompt speedups",
            "speedup_measured_q75": "upper quartile of the per-prompt speedups",
            "reliable": "the seconds per target call (the same work on every prompt) of this row "
                        "and of plain sampling agree across the prompts (IQR / median <= "
                        "specsim.timing.TOLERANCE, at least 3 prompts); False: the timings are "
                        "noise",
            "tokens_per_call_sd": "standard deviation of the tokens emitted per round",
            "accept_rate": "drafts accepted / drafts tested (up to and including the first "
                           "rejection of each round): the measured α",
            "accept_ci_low": "lower end of the 95% Wilson interval of accept_rate",
            "accept_ci_high": "upper end of that interval",
            "alpha_heldout": "the draft's mean α = Σ min(p, q) on held-out text (llm_alpha)",
            "tokens_eq1": f"{EQ1} at accept_rate",
            "c": "the draft's step over the target's one-position call: the costs table's "
                 "medians",
            "c_in_situ": "mean draft step in this loop (drafting time / draft steps) over plain "
                         "sampling's median seconds per token",
            "verify_ratio": "T(γ+1)/T(1): the costs table's median target call on γ+1 "
                            "positions over that on 1 (empty beyond its positions)",
            "speedup_thm38": "Leviathan Thm 3.8 at accept_rate and c: Eq. 1 / (1 + γ c)",
            "speedup_cost_model": "tokens_per_call / (γ c + T(γ+1)/T(1))",
            "alpha_break_even_thm38": "smallest α whose Eq. 1 pays for a round of 1 + γ c target "
                                      "calls: Thm 3.8's break-even (empty if even α = 1 does "
                                      "not pay)",
            "alpha_break_even_measured": "the same for a round of γ c + T(γ+1)/T(1)",
            "target_share": "share of the generations' wall time spent inside target calls "
                            "(the rest: drafting and the loop's own code)",
        },
        csv="results/llm/speculative.csv",
        step="llm:speculative"),
    Table(
        "llm_lossless",
        title="LLM: lossless on the real model?",
        about="The exact law of the first token after a fixed prompt (all V cells) and of the "
              "first two (the second after the ``lossless_top`` likeliest first tokens, any "
              "other first token one cell) against counts of Alg. 1's accept / resample steps "
              "simulated on the real target's and n-gram draft's distributions, and of "
              "transformers' assisted generation with a model draft, by a G-test. A last row "
              "checks that the KV-cached generator verifies against the distributions of a "
              "cache-free forward pass.",
        columns={
            "loop": "what emitted the tokens: specsim (Alg. 1 steps, simulated), or "
                    "transformers-default / transformers-fixed (assisted generation with "
                    "transformers' default draft-length policy or a fixed γ, the policy in "
                    "parentheses); specsim on the KV-cache row",
            "rule": "acceptance rule: correct, or no_resample (a draw from p instead of the "
                    "residual after a rejection: a breakage the test must catch)",
            "test": "the law tested: the first token over all V cells, or the first two (top "
                    "first tokens + other); or the KV-cache check",
            "prompt": "the fixed prompt (lossless_prompt)",
            "draft": "the draft: lossless_draft (an n-gram) for the simulated rows, "
                     "lossless_assisted_draft (a model draft) for transformers'",
            "gamma": "draft length γ of the first round (lossless_gamma, for "
                     "transformers-default its cap; 4 on the KV-cache row)",
            "trials": "generations counted (on the KV-cache row: rounds of its generation)",
            "cells_pooled": "cells of the G-test once those expecting fewer than 5 are pooled",
            "mass_tested": "exact probability of the first tokens whose second token is tested "
                           "(1 for the first token alone)",
            "tv_mc": "total variation between the observed frequencies and the exact law",
            "tv_floor": "sampling floor: the expected tv_mc of trials draws from the exact law",
            "g_statistic": "G-test statistic of the counts against the exact law (on the "
                           "KV-cache row: the largest absolute difference of p_cached and p_full)",
            "df": "degrees of freedom of the G-test (cells_pooled - 1)",
            "p_value": "p-value of that G-test (small: the output does not follow the target's "
                       "law)",
            "verdict": "lossless or biased: the G-test at the config's significance level",
        },
        csv="results/llm/lossless.csv",
        step="llm:lossless"),
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
        csv="results/llm/assisted.csv",
        step="llm:assisted"),
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
        csv="results/llm/lossless_audit.csv",
        step="llm:audit"),
)

FIGURES = (
    Figure(
        "llm_costs", needs=None, step="llm:figures",
        reads=("llm_intensity", "llm_speculative"),
        builder="specsim.pairs.llm.figures:figure_costs",
        caption=(
            "SmolLM2-135M-Instruct (float32) on this CPU, measured (wall time, best of repeats; "
            "not deterministic). Left: the arithmetic intensity of one KV-cached pass over k new "
            "positions against the ridge point of this CPU (its measured peak matmul rate over "
            "its copy bandwidth): by the roofline, verifying up to ~10 positions should cost one "
            "pass. Middle: the measured T(k)/T(1) of a target call verifying k positions, beside "
            "the roofline's and proportional-to-k costs. Right: the measured wall-clock speedup "
            "of speculative sampling (Leviathan Alg. 1 with KV caches) over plain target sampling "
            "per draft and draft length γ (solid: the median over prompts, bars its quartiles, "
            "hollow where the timing is unreliable), Thm 3.8 with the measured draft cost c "
            "(dashed; it assumes T(γ+1) = T(1)) and Eq. 1 over γc + T(γ+1)/T(1) (dotted). "
            "Verification is not free here: from k = 2 PyTorch switches from a matrix-vector to a "
            "matrix-matrix kernel that streams the weights slower, so no draft pays.")),
    Figure(
        "llm_alpha", needs=None, step="llm:figures",
        reads=("llm_alpha", "llm_speculative"),
        builder="specsim.pairs.llm.figures:figure_alpha",
        caption=(
            "SmolLM2-135M-Instruct as the target: the per-position acceptance α = Σ min(p, q) of "
            "each draft over held-out token windows of the tier-1 corpus (bars: mean; whiskers: "
            "median and the 10-90% range) and the acceptance rate observed in speculative "
            "sampling (diamonds, one per γ). Drafts: token n-grams (orders 1-3) trained on the "
            "target's tokenisation of the corpus, an int8 copy of the target (measured token by "
            "token, as Alg. 1 runs it, and as one batched pass, where its per-tensor activation "
            "scale makes it a much worse draft), and copies that keep the first k of the 30 "
            "decoder layers.")),
    Figure(
        "llm_assisted", needs=None, step="llm:figures",
        reads=("llm_assisted",),
        builder="specsim.pairs.llm.figures:figure_assisted",
        caption=(
            "SmolLM2-135M-Instruct on this CPU, the same target / draft pair (the int8 copy of "
            "the target by default) through specsim's speculative loop (Leviathan Alg. 1 with KV "
            "caches) and through transformers' own assisted generation, ``model.generate(..., "
            "assistant_model=draft)``, with a fixed draft length γ (constant schedule, no "
            "confidence stop) and with the installed transformers' default policy (20 tokens, "
            "constant schedule, drafting stops when the draft's own probability of its token "
            "falls below 0.4: placed at its mean draft length). All sample at temperature 1 from "
            "the full distribution, from the same held-out prompts. Left: tokens per target call "
            "(target calls counted with a forward hook) against Eq. 1 at the measured α. Middle: "
            "tokens per second, with plain sampling by each library (dotted). Right: speedup over "
            "plain sampling by the same library, measured (median, quartiles; hollow where the "
            "timing is unreliable), Thm 3.8 at the measured α and draft "
            "cost c (dashed, which assumes T(γ+1) = T(1)) and with the measured T(γ+1)/T(1) "
            "(dotted). Wall-clock timings on a shared machine: not deterministic. Table: "
            "``results/llm/assisted.csv``.")),
)
