"""The LLM tier's pair and engine-check tables (workflow/rules/stages.smk, steps ``pairs`` and
``engine``), each declared once; the tier's other tables and its figures are in
:mod:`specsim.outputs.llm`. Gathered by :mod:`specsim.outputs`.

Kept free of pandas and matplotlib: Snakemake imports it to plan the DAG.
"""

from __future__ import annotations

from specsim.declare import Figure, Table
from specsim.outputs.realtext import PAIR_ACCEPT

TABLES = (
    Table(
        "llm_pair_accept",
        title="LLM: your model pair, predicted vs measured tokens per target call",
        about="For each SmolLM2-135M pair of ``trace_pairs``, per engine and γ: tokens per target "
              "call predicted from the pair's trace by the positional model (exact on the trace, "
              "bootstrap CI over its documents) beside speculative generation with the same "
              "models from the same prompts (bootstrap CI over prompts), and their paired "
              "difference. ``covered``: the difference's 95% CI contains 0.",
        columns=PAIR_ACCEPT,
        csv="results/llm/pair_accept.csv",
        step="llm:pairs"),
    Table(
        "llm_speedup_explained",
        title="LLM: why the speedup is what it is",
        about="For each pair, engine and γ, the measured wall-clock speedup over plain sampling "
              "by the same engine (median over prompts) written as the product (γ+1) · f_α · "
              "f_draft · f_verify · f_other, beside Thm 3.8 at the trace's mean α and the draft "
              "cost c and the cost model tokens / (γ c + T(γ+1)/T(1)). Wall-clock timings: not "
              "deterministic.",
        columns={
            "pair": "the pair's draft (its trace and its runs)",
            "engine": "specsim (its loop) or transformers (assisted generation at a fixed γ)",
            "gamma": "draft length γ",
            "repeats": "prompts timed, each a repeat (the engine's configurations of a prompt "
                       "back to back, rotated)",
            "speedup_measured": "plain sampling's seconds per token over this row's, per prompt "
                                "(paired, same engine): the median over the prompts",
            "speedup_measured_q25": "lower quartile of the per-prompt speedups",
            "speedup_measured_q75": "upper quartile of the per-prompt speedups",
            "reliable": "the seconds per target call of this row and of the same engine's plain "
                        "sampling agree across the prompts (IQR / median <= "
                        "specsim.timing.TOLERANCE, at least 3 prompts); False: the timings are "
                        "noise",
            "load_before": "the machine's 1-minute load average before the pair's runs",
            "load_after": "the same after them (above cpus: the runs shared the cores)",
            "cpus": "the machine's CPU count (os.cpu_count)",
            "speedup_thm38": "Leviathan Thm 3.8 at alpha_mean and c",
            "speedup_predicted": "the cost model: tokens_predicted / (γ c + T(γ+1)/T(1))",
            "alpha_mean": "mean α = Σ min(p, q) over the trace's positions",
            "c": "the draft's step over the target's one-position call (costs table medians)",
            "verify_ratio": "T(γ+1)/T(1): the costs table's median target call on γ+1 "
                            "positions over that on 1 (interpolated in k)",
            "tokens_predicted": "tokens per target call predicted from the trace "
                                "(llm_pair_accept)",
            "tokens_measured": "tokens per target call measured (llm_pair_accept)",
            "factor_ideal": "γ + 1: tokens per call were every draft accepted",
            "factor_alpha": "f_α = tokens_predicted / (γ+1): what acceptance keeps",
            "factor_draft": "f_draft = 1 / (1 + γ c): what drafting costs",
            "factor_verify": "f_verify = (1 + γ c) / (γ c + T(γ+1)/T(1)): what verifying γ+1 "
                             "positions costs beyond one call",
            "factor_other": "f_other = speedup_measured / speedup_predicted: what the three do "
                            "not explain (loop overheads, sampling, timing noise)",
        },
        csv="results/llm/speedup_explained.csv",
        step="llm:pairs"),
    Table(
        "llm_engine_schedule_check",
        title="LLM: the engine schedule checked against a batched loop",
        about="The target and one model draft (``engine_draft``) in the batched speculative loop "
              "at every batch size b: the schedule's speedup(b, K') for K' = "
              "0..engine_max_gamma from acceptance counters at one K and the measured latency "
              "profile, beside the loop's measured throughput and speedup, and the best K' of "
              "each. Wall-clock timings: not deterministic.",
        columns={
            "batch": "batch size b: sequences decoded together",
            "gamma": "draft length K' (0: plain batched sampling)",
            "tokens_per_call": "T(K') from the counters at K = engine_gamma: 1 + sum_{i<=K'} "
                               "a_i / N (the tail model beyond K)",
            "speedup_predicted": "T(K') T_target(b,1) / (K' T_draft(b,1) + T_target(b,K'+1)) "
                                 "with the latency profile's times",
            "ci_low": "lower end of the predicted speedup's interval (counts and latency "
                      "spreads)",
            "ci_high": "upper end of that interval",
            "extrapolated": "K' > K: beyond what the counters identify",
            "tokens_per_call_measured": "tokens the loop emitted / (rounds x b), over the "
                                        "repeats",
            "tokens_per_second": "tokens emitted by the whole batch per second of its decoding "
                                 "loop: the median over the repeats",
            "speedup_measured": "tokens_per_second over K' = 0's at the same b, per repeat "
                                "(paired): the median over the repeats",
            "measured_q1": "lower quartile of the per-repeat speedups",
            "measured_q3": "upper quartile of the per-repeat speedups",
            "best_predicted": "the K' of largest speedup_predicted at this batch size (ties to "
                              "the smaller)",
            "best_measured": "the K' of largest speedup_measured at this batch size (ties to the "
                             "smaller)",
            "reliable": "the per-repeat speedups agree (IQR / median <= "
                        "specsim.timing.TOLERANCE, at least 3 repeats); False: read them as "
                        "noise",
            "load_before": "the machine's 1-minute load average before the throughput runs",
            "load_after": "the same after them (above cpus: the runs shared the cores)",
            "cpus": "the machine's CPU count (os.cpu_count)",
        },
        csv="results/llm/engine_schedule_check.csv",
        step="llm:engine"),
    Table(
        "llm_engine_latency",
        title="LLM: the batched loop's latency profile",
        about="Seconds of one forward of the target at 1..engine_max_gamma + 1 new tokens a "
              "sequence and of the draft at one, at every batch size, on a cache holding the "
              "prompts: the latency profile (the CSV specsim.acceptance.latency reads) the "
              "engine check reads back as a user's would be. Wall-clock timings: not "
              "deterministic.",
        columns={
            "role": "target or draft",
            "batch": "sequences in the forward",
            "tokens": "new tokens a sequence in it (K'+1 when the target verifies K' drafts; 1 "
                      "for a draft step)",
            "seconds": "wall time of one such forward: the median over engine_latency_repeats "
                       "interleaved repeats",
            "seconds_low": "its 25th percentile over the repeats",
            "seconds_high": "its 75th percentile over the repeats",
            "reliable": "the repeats agree (IQR / median <= specsim.timing.TOLERANCE, at least "
                        "3 repeats); False: read the time as noise",
            "load_before": "the machine's 1-minute load average before the forwards",
            "load_after": "the same after them (above cpus: the forwards shared the cores)",
            "cpus": "the machine's CPU count (os.cpu_count)",
        },
        csv="results/llm/engine_latency.csv",
        step="llm:engine"),
    Table(
        "llm_engine_calibration",
        title="LLM: the calibrated cost out of sample, per batch size",
        about="From the engine check's measured runs, the calibrated cost "
              "(specsim.acceptance.calibrate, fitted on K' = 0 and the counters' K only) "
              "and the forward-time latency profile, each driving the schedule at every batch "
              "size: its best K' against the measured best, the throughput its advice loses, and "
              "its speedup error on the out-of-sample K'.",
        columns={
            "model": "the cost model: forward_times (the latency profile) or calibrated (fitted "
                     "on the measured runs)",
            "batch": "batch size b",
            "best_predicted": "the schedule's best K' at b under this cost model",
            "best_measured": "the K' of largest measured speedup at b (ties to the smaller)",
            "agree": "best_predicted equals best_measured",
            "regret": "1 - measured speedup at best_predicted / at best_measured: the "
                      "throughput lost following the advice",
            "speedup_mae": "mean absolute error of the predicted speedup over the out-of-sample "
                           "K' (1..engine_max_gamma, not fitted on), the same cells for both "
                           "models",
            "speedup_max_error": "largest such error",
        },
        csv="results/llm/engine_calibration.csv",
        step="llm:engine"),
    Table(
        "llm_engine_calibration_summary",
        title="LLM: the calibrated cost out of sample, summary",
        about="Per cost model, over the engine check's batch sizes: those whose best K' agrees "
              "with the measured one, the mean and worst regret, the break-even batch size "
              "predicted and measured, and the speedup error over every out-of-sample cell.",
        columns={
            "model": "the cost model: forward_times (the latency profile) or calibrated (fitted "
                     "on the measured runs)",
            "calibration_gammas": "the K' the calibrated cost was fitted on (0 and the "
                                  "counters' K)",
            "batches": "batch sizes compared",
            "agree": "batch sizes whose best_predicted equals best_measured",
            "mean_regret": "mean regret over the batch sizes",
            "worst_regret": "largest regret",
            "break_even_predicted": "smallest batch size from which on the predicted best K' "
                                    "is 0 at every larger one (empty: speculation pays at the "
                                    "largest)",
            "break_even_measured": "the same from the measured best K'",
            "speedup_mae": "mean absolute error of the predicted speedup over every "
                           "out-of-sample cell",
            "speedup_max_error": "largest such error",
            "cells": "out-of-sample (batch, K') cells compared",
        },
        csv="results/llm/engine_calibration_summary.csv",
        step="llm:engine"),
)

FIGURES = (
    Figure(
        "llm_pair_accept", needs=None, step="llm:pairs",
        reads=("llm_pair_accept",),
        builder="specsim.pairs.figures:figure_llm_pair_accept",
        caption=(
            "Your model pair, predicted then measured: for each SmolLM2-135M pair the tier traces "
            "(the target with its int8, skip-layer and n-gram drafts), tokens per target call "
            "predicted from the pair's trace under the positional model (exact on the trace: a "
            "round from position t meets the recorded pairs t, t+1, ...; 95% bootstrap CI over "
            "the trace's documents) beside tokens per target call measured by speculative "
            "generation with the same models from the same prompts (specsim's loop, and "
            "transformers' assisted generation at a fixed γ for the model drafts), each with its "
            "95% CI over prompts (one marker an engine); dotted: Eq. 1 at the trace's mean α (in "
            "the legend). Right: the paired difference (predicted − measured) / measured with "
            "its 95% CI over the shared prompts; covered: that CI contains 0. The same drawing "
            "as the n-gram pairs' pair_accept figure (one schema, specsim.pairs.accept). "
            "Table: ``results/llm/pair_accept.csv``.")),
    Figure(
        "llm_speedup_explained", needs=None, step="llm:pairs",
        reads=("llm_speedup_explained",),
        builder="specsim.pairs.llm.figures:figure_speedup_explained",
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
