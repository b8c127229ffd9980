"""The LLM tier's tables and figures (workflow/rules/llm.smk, opt-in), each declared once.

Its tables live in ``results/llm/`` (most hold wall-clock timings: not deterministic), each
with a Markdown twin; a table's ``step`` is the tier step writing it (``llm:<step>``, one rule
and one ``specsim llm`` sub-command each), and the rules list their outputs from these
declarations. Gathered by :mod:`specsim.outputs`.

Kept free of pandas and matplotlib: Snakemake imports it to plan the DAG.
"""

from __future__ import annotations

from specsim.declare import EQ1, Figure, Table

TABLES = (
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
        builder="specsim.llm.figures:figure_costs",
        caption=(
            "SmolLM2-135M-Instruct (float32) on this CPU, measured (wall time, best of repeats; "
            "not deterministic). Left: the arithmetic intensity of one KV-cached pass over k new "
            "positions against the ridge point of this CPU (its measured peak matmul rate over "
            "its copy bandwidth): by the roofline, verifying up to ~10 positions should cost one "
            "pass. Middle: the measured T(k)/T(1) of a target call verifying k positions, beside "
            "the roofline's and proportional-to-k costs. Right: the measured wall-clock speedup "
            "of speculative sampling (Leviathan Alg. 1 with KV caches) over plain target sampling "
            "per draft and draft length γ (solid), Thm 3.8 with the measured draft cost c "
            "(dashed; it assumes T(γ+1) = T(1)) and Eq. 1 over γc + T(γ+1)/T(1) (dotted). "
            "Verification is not free here: from k = 2 PyTorch switches from a matrix-vector to a "
            "matrix-matrix kernel that streams the weights slower, so no draft pays.")),
    Figure(
        "llm_alpha", needs=None, step="llm:figures",
        reads=("llm_alpha", "llm_speculative"),
        builder="specsim.llm.figures:figure_alpha",
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
        builder="specsim.llm.figures:figure_assisted",
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
            "plain sampling by the same library, measured, Thm 3.8 at the measured α and draft "
            "cost c (dashed, which assumes T(γ+1) = T(1)) and with the measured T(γ+1)/T(1) "
            "(dotted). Wall-clock timings on a shared machine: not deterministic. Table: "
            "``results/llm/assisted.csv``.")),
    Figure(
        "llm_pair_accept", needs=None, step="llm:pairs",
        reads=("llm_pair_accept",),
        builder="specsim.llm.figures:figure_pair_accept",
        caption=(
            "Your model pair, predicted then measured: for each SmolLM2-135M pair the tier traces "
            "(the target with its int8, skip-layer and n-gram drafts), tokens per target call "
            "predicted from the pair's trace under the positional model (exact on the trace: a "
            "round from position t meets the recorded pairs t, t+1, ...; 95% bootstrap CI over "
            "the trace's documents) beside tokens per target call measured by speculative "
            "generation with the same models from the same prompts (specsim's loop, and "
            "transformers' assisted generation at a fixed γ for the model drafts), each with its "
            "95% CI over prompts. Covered: the paired bootstrap CI of the difference contains 0. "
            "Table: ``results/llm/pair_accept.csv``.")),
    Figure(
        "llm_speedup_explained", needs=None, step="llm:pairs",
        reads=("llm_speedup_explained",),
        builder="specsim.llm.figures:figure_speedup_explained",
        caption=(
            "Why the speedup is what it is: for each SmolLM2-135M pair and γ, the measured "
            "wall-clock speedup (median over prompts) written as the product (γ+1) · f_α · "
            "f_draft · f_verify · f_other -- f_α = tokens per call predicted from the trace over "
            "γ+1 (acceptance), f_draft = 1/(1+γc) (drafting, at the measured draft cost c), "
            "f_verify = (1+γc)/(γc + T(γ+1)/T(1)) (verifying γ+1 positions is not free on this "
            "CPU), f_other = measured / cost-model prediction (the loop's own overhead and load) "
            "-- beside Leviathan Thm 3.8 at the pair's measured α and c. A factor below 1 is what "
            "is lost there. Wall-clock timings on a shared machine: not deterministic. Table: "
            "``results/llm/speedup_explained.csv``.")),
)
