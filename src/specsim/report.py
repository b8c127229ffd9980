"""What each table is for and what its columns mean: the one place that says so.

``TABLES`` has one entry per table the DAG writes to ``results/tables/`` (the study tables, the
checks and the real-text tables). From it come

* the HTML rendering beside each CSV (``results/tables/<name>.html``, :func:`write_html`),
  which the Snakemake report shows inline: a title, what the table answers, the table, and
  every column's meaning (also as a tooltip on its header);
* the report caption of each table, ``workflow/report/tables/<name>.rst`` (:func:`caption`),
  written by ``python -m specsim.report`` and compared with this module by the tests, so the
  caption and the HTML cannot drift apart.

Kept free of pandas and matplotlib: Snakemake imports it to plan the DAG.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd


@dataclass(frozen=True)
class TableDoc:
    title: str  # a few words, shown as the page's heading
    about: str  # what the table answers, one or two sentences (reStructuredText inline markup)
    columns: dict[str, str] = field(default_factory=dict)  # column -> meaning (see describe)
    csv: str = ""  # where the CSV lives, when not results/tables/<name>.csv

    def describe(self, column: str) -> str | None:
        """The meaning of ``column``; a key with a ``<placeholder>`` matches any text there."""
        if column in self.columns:
            return self.columns[column]
        for key, text in self.columns.items():
            if "<" in key:
                pattern = re.sub(r"<\w+>", ".+", re.escape(key).replace(r"\<", "<").replace(
                    r"\>", ">"))
                if re.fullmatch(pattern, column):
                    return text
        return None


# --- columns several tables share --------------------------------------------------------------
KEYS = {
    "study": "the study (a key under ``studies:`` in the config) the row belongs to",
    "model": "the model pair (a key under ``models:`` in the config)",
    "draft": "how the draft is made: blend, temper, noise, calibrated, identical, uniform or file",
    "knob": "the draft's own knob: blend weight, draft temperature or logit-noise σ "
            "(empty when the draft has none)",
    "alpha": "acceptance rate α an α-calibrated draft was built to have "
             "(empty for the seeds' own drafts)",
    "gamma": "draft length γ: tokens drafted per round",
    "temperature": "sampling temperature T of both models (0 = greedy)",
    "rule": "acceptance rule: correct (Leviathan Alg. 1) or a deliberate breakage "
            "(greedy, no_resample, continue)",
}
TOKENS = {
    "tokens_per_round": "simulated tokens emitted per round, i.e. per target call",
    "tokens_ci_low": "lower end of the 95% confidence interval of tokens_per_round (batch means)",
    "tokens_ci_high": "upper end of that interval",
    "tokens_se": "standard error of tokens_per_round (batch means)",
    "tokens_exact": "exact expected tokens per round over the simulated horizon (dynamic "
                    "programming; quadrature Monte Carlo for the i.i.d. stub)",
}
ACCEPT = {
    "accept_rate": "simulated acceptance rate: drafts accepted / drafts tested",
    "accept_ci_low": "lower end of the 95% confidence interval of accept_rate",
    "accept_ci_high": "upper end of that interval",
}
C = {"c": "cost of one draft step relative to one target call"}
SPEEDUP = {
    "speedup": "simulated speedup tokens_per_round / (1 + γ c) (Leviathan Thm 3.8 with the "
               "simulated tokens)",
    "speedup_ci_low": "lower end of the 95% confidence interval of speedup",
    "speedup_ci_high": "upper end of that interval",
    "speedup_exact": "tokens_exact / (1 + γ c)",
}
EQ1 = "Leviathan Eq. 1, (1 − α^(γ+1)) / (1 − α)"
GTEST = {
    "g_statistic": "G-test statistic of the simulated counts against the target's exact law",
    "p_value": "p-value of that G-test (small: the output does not follow the target's law)",
    "verdict": "lossless or biased: the G-test at the config's significance level",
}

TABLES: dict[str, TableDoc] = {
    "checks": TableDoc(
        "Checks: every claim of the seeds, re-tested",
        "One row per claim the two seed documents make, re-tested with proper statistics. "
        "Every row must pass: the DAG stops (rule gate), naming the claim, when one does not.",
        {
            "check": "the claim and where it was tested, e.g. verdict[model/γ/T/rule]",
            "source": "which seed document (program or notebook) and which of its demos or "
                      "checks made the claim",
            "passed": "whether the claim holds",
            "observed": "what the simulation and exact theory give",
            "expected": "what the claim requires",
        }),
    "equivalence": TableDoc(
        "Is speculative sampling lossless?",
        "The law of the first two emitted tokens under each acceptance rule against the "
        "target's own law: exactly (enumeration) and simulated, with the sampling floor and a "
        "G-test.",
        {
            **KEYS,
            "trials_total": "two-token generations simulated",
            "tv_exact": "exact total-variation distance between the rule's two-token law and "
                        "the target's (enumeration; ~1e-17 means zero)",
            "tv_mc": "total-variation distance between the simulated two-token frequencies and "
                     "the target's law",
            "tv_floor": "sampling floor: the expected tv_mc of trials_total draws from the "
                        "target itself",
            **GTEST,
            "g_df": "degrees of freedom of the G-test",
            "power": "probability that trials_total generations detect the rule's exact bias "
                     "at the significance level",
            "p_value_vs_exact": "G-test p-value of the simulated counts against the rule's own "
                                "exact law (the engine against theory; large is good)",
            "exact_method": "how the exact values were computed",
        }),
    "first_token": TableDoc(
        "First token: target against speculative",
        "The seed program's first-token table: the probability of each first emitted token "
        "under the target and its simulated frequency under each rule.",
        {
            **KEYS,
            "token": "the first emitted token (index into the vocabulary)",
            "target": "the target's probability of this first token",
            "speculative": "simulated frequency of this first token under the rule",
            "diff": "speculative − target",
        }),
    "accept_curve": TableDoc(
        "Tokens per target call",
        f"Simulated tokens per round (95% confidence intervals) beside the exact value and "
        f"{EQ1}, per model, α and γ.",
        {
            **KEYS,
            "family": "model family: markov (order-1 tables), iid (the notebook's stub) or "
                      "custom",
            "rounds_total": "speculative rounds simulated, all chains, after burn-in",
            **ACCEPT,
            "accept_fraction": "simulated drafts accepted per round / γ",
            **TOKENS,
            "batches": "batches behind the confidence intervals",
            "tokens_exact_se": "standard error of tokens_exact (0 when exact; the quadrature "
                               "error for the i.i.d. stub)",
            "tokens_closed_form": f"{EQ1} at alpha_exact",
            "tokens_closed_form_mc": f"{EQ1} at the simulated accept_rate",
            "jensen_gap": "tokens_exact − tokens_closed_form: what Eq. 1 at the mean acceptance "
                          "misses when acceptance varies by context",
            "covered": "whether the 95% interval of tokens_per_round contains tokens_exact "
                       "(up to 1e-9 relative, the exact value's own rounding)",
            "alpha_exact": "the configured α, or else the exact acceptance rate",
            "alpha_bar": "stationary mean over contexts of β = Σ min(p, q) (mean β for the stub)",
            "alpha_fit": "maximum-likelihood α from the simulated counts of accepted drafts "
                         "(truncated geometric law)",
            "alpha_fit_low": "lower end of its 95% likelihood-ratio interval",
            "alpha_fit_high": "upper end of that interval",
            "alpha_moment": "the α at which Eq. 1 equals the simulated tokens_per_round "
                            "(empty for the continue rule)",
            "max_tokens_observed": "most tokens emitted in one simulated round",
            "exact_method": "how tokens_exact was computed: dp_horizon or quadrature_mc(n)",
        }),
    "temperature": TableDoc(
        "Temperature and draft quality",
        "Acceptance, tokens per call and speedup as the sampling temperature and the draft's "
        "knob change; simulated with 95% intervals, and exact.",
        {
            **KEYS, **C, **ACCEPT,
            "accept_rate_exact": "exact acceptance rate over the simulated horizon",
            "accept_fraction": "simulated drafts accepted per round / γ",
            "accept_fraction_ci_low": "lower end of the 95% confidence interval of "
                                      "accept_fraction",
            "accept_fraction_ci_high": "upper end of that interval",
            **TOKENS, "speedup": SPEEDUP["speedup"], "speedup_exact": SPEEDUP["speedup_exact"],
            "alpha_bar": "stationary mean over contexts of β = Σ min(p, q)",
        }),
    "optimal_k": TableDoc(
        "Which draft length is best?",
        "The best γ per model, α, temperature and draft cost c: simulated (with the γ it "
        "cannot be told apart from), exact over the study's γ, and Thm 3.8 over γ = 1..64.",
        {
            **{k: v for k, v in KEYS.items() if k != "gamma"}, **C,
            "gammas": "the draft lengths the study simulated (;-separated)",
            "gamma_opt": "γ with the highest simulated speedup",
            "speedup_opt": "that speedup, tokens_per_round / (1 + γ c)",
            "speedup_opt_ci_low": "lower end of its 95% confidence interval",
            "speedup_opt_ci_high": "upper end of that interval",
            "gamma_tied": "the γ whose simulated speedup is within two standard errors of the "
                          "optimum: the simulation cannot tell them apart (;-separated)",
            "gamma_opt_exact": "γ with the highest exact speedup among the study's",
            "speedup_opt_exact": "that exact speedup",
            "exact_in_tied": "whether gamma_opt_exact is among gamma_tied",
            "alpha_exact": "the configured α, or else the exact acceptance rate",
            "gamma_opt_closed_form": "the best γ in 1..64 by Thm 3.8 at alpha_exact",
            "speedup_opt_closed_form": "Thm 3.8's speedup at that γ",
        }),
    "optimal_k_curve": TableDoc(
        "Speedup per draft length",
        "Speedup for every γ of the optimal_k studies (the seed program's demo 4 table), "
        "simulated with 95% intervals and exact.",
        {**KEYS, **C, "accept_rate": ACCEPT["accept_rate"], **TOKENS, **SPEEDUP}),
    "optimal_k_exact": TableDoc(
        "Exact tokens per round at every draft length",
        "The exact curves of the optimal_k figure: stationary tokens per round at every γ from "
        "1 to the largest the study simulates, per model, draft knob, α, temperature and rule.",
        {
            **KEYS,
            "tokens_stationary": "exact expected tokens per round (target call) in the long run",
            "exact_method": "how it was computed: Leviathan Eq. 1 for α-calibrated drafts, the "
                            "model family's exact method otherwise",
        }),
    "break_even": TableDoc(
        "When does a draft make decoding slower?",
        "The break-even draft cost c* = (tokens per round − 1) / γ: a draft step costing more "
        "than c* target calls makes speculative decoding slower than plain decoding.",
        {
            **KEYS,
            "tokens_per_round": TOKENS["tokens_per_round"],
            "tokens_exact": TOKENS["tokens_exact"],
            "c_star": "simulated break-even cost c* = (tokens_per_round − 1) / γ",
            "c_star_ci_low": "lower end of its 95% confidence interval",
            "c_star_ci_high": "upper end of that interval",
            "c_star_se": "standard error of c_star",
            "batches": "batches behind the confidence intervals",
            "c_star_exact": "(tokens_exact − 1) / γ",
            "c_star_closed_form": f"c* from {EQ1} at alpha_exact",
            "alpha_exact": "the configured α, or else the exact acceptance rate",
        }),
    "speedup_vs_c": TableDoc(
        "Speedup against draft cost",
        "The seed program's demo 5: the speedup at each configured draft cost c, and whether "
        "decoding got slower.",
        {
            **KEYS, **C, **SPEEDUP,
            "slower": "whether the whole 95% interval of speedup lies below 1",
        }),
    "leviathan_table1": TableDoc(
        "Leviathan et al., Thm 3.8 and Thm 3.11",
        "Walltime improvement and increase in arithmetic operations on an (α, γ) grid at the "
        "idealised draft costs c = ĉ = 0 (the analysis behind Leviathan et al.'s Fig. 4).",
        {
            "alpha": "acceptance rate α",
            "gamma": "draft length γ",
            "operations": "Thm 3.11: factor by which arithmetic operations grow (ĉ = 0)",
            "speed": "Thm 3.8: walltime improvement (c = 0)",
            "tokens_per_call": f"{EQ1}: expected tokens per target call",
        }),
    "intensity": TableDoc(
        "Arithmetic intensity of a forward pass",
        "Why extra tokens are nearly free: MACs, bytes moved and MACs per byte of one forward "
        "pass that processes tokens_in_pass tokens, with its roofline time on each device.",
        {
            "shape": "transformer shape (Llama-2 7B, 13B, 70B)",
            "tokens_in_pass": "tokens processed in one forward pass (1 + drafted tokens "
                              "verified)",
            "n_ctx": "context length held in the KV cache",
            "macs": "multiply-accumulates of the pass (1 MAC = 2 FLOPs)",
            "bytes": "bytes moved: weights and KV cache",
            "macs_per_byte": "arithmetic intensity, macs / bytes",
            "formula": "full (weights and KV cache) or seed (the seed program's demo 6 "
                       "reckoning: published parameters, no KV traffic)",
            "roofline_s[<device>]": "roofline time of the pass on the device in brackets, "
                             "max(MACs / peak MAC rate, bytes / memory bandwidth), in seconds",
        }),
    "roofline": TableDoc(
        "Ridge points: how many tokens one pass verifies for free",
        "Per model shape and device: the ridge point, the most tokens one pass can process "
        "while memory-bound, and the roofline times.",
        {
            "shape": "transformer shape (Llama-2 7B, 13B, 70B)",
            "device": "accelerator",
            "n_ctx": "context length held in the KV cache",
            "ridge_macs_per_byte": "peak MAC rate / memory bandwidth: a pass with more MACs per "
                                   "byte is compute-bound",
            "max_tokens_memory_bound": "most tokens one pass can process while still "
                                       "memory-bound",
            "time_one_token_s": "roofline time of a one-token pass, seconds",
            "time_at_max_tokens_s": "roofline time of a pass of max_tokens_memory_bound "
                                    "tokens, seconds",
            "ratio_tokens": "tokens in the pass compared in time_ratio",
            "time_ratio": "roofline time of a ratio_tokens pass / that of a one-token pass",
        }),
    "worked_example": TableDoc(
        "One round by hand",
        "The seed program's demo 1 in context 'a': target p, draft q, the probability of "
        "accepting each drafted token and the residual a rejected draft is resampled from.",
        {
            "token": "the token",
            "p": "target probability",
            "q": "draft probability",
            "accept_prob": "probability a drafted token is accepted, min(1, p / q)",
            "p_minus_q": "p − q",
            "residual": "norm(max(p − q, 0)): the law a rejection resamples from",
            "accepted_mass": "min(p, q): probability the token is drafted and accepted",
            "residual_mass": "(1 − Σ min(p, q)) × residual: probability it is emitted after a "
                             "rejection (accepted_mass + residual_mass = p)",
        }),
    # --- the real-text stage (workflow/rules/realtext.smk writes these CSVs) -------------------
    "realtext_models": TableDoc(
        "Real text: the character n-gram models",
        "The target and draft n-grams trained on the standard library's English text: size, "
        "held-out perplexity and the per-context acceptance β = Σ min(p, q) of each draft.",
        {
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
    "realtext_beta": TableDoc(
        "Real text: how acceptance varies by context",
        "Histogram of the per-context acceptance β = Σ min(p, q) over held-out contexts, per "
        "draft order: far from one number.",
        {
            "draft_order": "n-gram order of the draft",
            "bin_low": "lower edge of the β bin",
            "bin_high": "upper edge of the β bin",
            "count": "held-out contexts with β in the bin",
            "density": "count / (contexts × bin width): a probability density over β",
        }),
    "realtext_speculative": TableDoc(
        "Real text: characters per target call",
        "Speculative sampling from held-out prompts: acceptance and characters per target "
        "call with 95% intervals, beside Eq. 1 at the mean β (the gap is Jensen's).",
        {
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
    "realtext_lossless": TableDoc(
        "Real text: lossless?",
        "For fixed contexts, the exact law of the next two characters against Monte Carlo "
        "counts of speculative sampling, per rule.",
        {
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
    # --- the LLM tier (workflow/rules/llm.smk, opt-in; its other tables are not in the report) -
    "llm_assisted": TableDoc(
        "LLM: specsim's loop beside transformers' assisted generation",
        "SmolLM2-135M-Instruct on this CPU with the same draft model: specsim's speculative loop "
        "and transformers' ``generate(..., assistant_model=draft)`` (its default draft-length "
        "policy and a fixed γ), sampling at temperature 1, beside plain sampling by each; "
        "measured tokens per second and per target call against Leviathan Eq. 1 and Thm 3.8 at "
        "the measured α and draft cost. Wall-clock timings: not deterministic.",
        {
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
            "seconds": "wall time of all the row's generations",
            "tokens_per_second": "tokens / seconds",
            "speedup_measured": "tokens_per_second over that of plain sampling by the same "
                                "library (the target-alone row of specsim or of transformers)",
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
        },
        csv="results/llm/assisted.csv"),
    "schemes": TableDoc(
        "Beyond the seeds: verification schemes and draft-length policies",
        "One row per point of every ``schemes`` study: a rule of the literature (block "
        "verification, multi-draft, lenience, typical acceptance, or Algorithm 1) with its "
        "knobs, under a draft-length policy, on one model: the lossless check (exact and "
        "simulated) and tokens per target call, exact beside simulated, with the speedup at "
        "each c of the study. A round drafting γ' tokens costs 1 + γ' c target calls.",
        {
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
            "policy": "draft-length policy: fixed (γ every round), confidence, heuristic "
                      "(transformers' schedules; γ is the maximum, or the start, of the draft "
                      "length)",
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
    "schemes_policies": TableDoc(
        "Draft-length policies against the best fixed draft length",
        "For every schemes study running a policy: each Algorithm 1 point (fixed γ, "
        "confidence, heuristic) at each c of the study, and the best fixed γ in 1..32 by the "
        "exact long run.",
        {
            "study": KEYS["study"], "model": KEYS["model"], "alpha": KEYS["alpha"],
            "temperature": KEYS["temperature"], **C,
            "policy": "fixed, confidence, heuristic, or best_fixed (the exact optimum over γ)",
            "gamma": "draft length: fixed γ, the confidence policy's maximum, the heuristic's "
                     "start, or the best fixed γ",
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
        }),
}

STUDY_TABLES = tuple(n for n in TABLES if n != "checks" and not n.startswith("realtext_")
                     and not n.startswith("llm_"))
REALTEXT_TABLES = tuple(n for n in TABLES if n.startswith("realtext_"))
CAPTION_DIR = Path("workflow") / "report" / "tables"  # relative to the repository root


def doc(name: str) -> TableDoc:
    try:
        return TABLES[name]
    except KeyError:
        raise KeyError(f"no description of table {name!r} in specsim.report.TABLES; known: "
                       f"{', '.join(sorted(TABLES))}") from None


def undocumented(name: str, columns: Iterable[str]) -> list[str]:
    """The columns of table ``name`` that :data:`TABLES` does not describe."""
    d = doc(name)
    return [c for c in columns if d.describe(str(c)) is None]


def caption(name: str) -> str:
    """The report caption (reStructuredText) of table ``name``."""
    d = doc(name)
    csv = d.csv or f"results/tables/{name}.csv"
    lines = [f"**{d.title}.** {d.about}", "",
             f"Columns (the full-precision CSV is ``{csv}``):", ""]
    for col, text in d.columns.items():
        lines.append(f"- ``{col}``: {text}")
    return "\n".join(lines) + "\n"


def write_captions(out_dir: str | Path) -> list[Path]:
    """(Re)write ``<out_dir>/<name>.rst`` for every table; returns the paths written."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name in TABLES:
        path = out / f"{name}.rst"
        path.write_text(caption(name), encoding="utf-8", newline="\n")
        paths.append(path)
    return paths


def write_html(df: pd.DataFrame, name: str, path: str | Path) -> None:
    """The table as a small static HTML page (see :func:`specsim.io.write_html_table`)."""
    from specsim.io import write_html_table

    d = doc(name)
    about = d.about.replace("``", "")
    if name == "checks" and "passed" in df.columns:
        failed = int((~df["passed"].astype(bool)).sum())
        about += (f" Here: all {len(df)} passed." if not failed else
                  f" Here: {failed} of {len(df)} FAILED (marked red).")
    columns = {str(c): (d.describe(str(c)) or "").replace("``", "") for c in df.columns}
    write_html_table(df, path, title=d.title, about=about, columns=columns,
                     fail_column="passed" if name == "checks" else None)


def main(argv: list[str] | None = None) -> int:
    """``python -m specsim.report [DIR]``: rewrite the tables' report captions (default
    workflow/report/tables, run from the repository root)."""
    args = sys.argv[1:] if argv is None else argv
    out = Path(args[0]) if args else CAPTION_DIR
    for path in write_captions(out):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
