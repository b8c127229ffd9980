"""The tables of the grid's studies, built by ``specsim tables`` from ``results/points.parquet``
(:mod:`specsim.tables`) or, for those that need no simulation, from exact theory and the config."""

from __future__ import annotations

from specsim.declare import ACCEPT, EQ1, GTEST, KEYS, SPEEDUP, TOKENS, C, Table

TABLES = (
    Table(
        "equivalence", needs="equivalence", builder="specsim.tables.studies:equivalence",
        title="Is speculative sampling lossless?",
        about="The law of the first two emitted tokens under each acceptance rule against the "
              "target's own law: exactly (enumeration) and simulated, with the sampling floor and "
              "a G-test.",
        columns={
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
    Table(
        "first_token", needs="equivalence", builder="specsim.tables.studies:first_token",
        title="First token: target against speculative",
        about="The seed program's first-token table: the probability of each first emitted token "
              "under the target and its simulated frequency under each rule.",
        columns={
            **KEYS,
            "token": "the first emitted token (index into the vocabulary)",
            "target": "the target's probability of this first token",
            "speculative": "simulated frequency of this first token under the rule",
            "diff": "speculative − target",
        }),
    Table(
        "accept_curve", needs="accept_curve", builder="specsim.tables.studies:accept_curve",
        title="Tokens per target call",
        about=f"Simulated tokens per round (95% confidence intervals) beside the exact value and "
              f"{EQ1}, per model, α and γ.",
        columns={
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
    Table(
        "temperature", needs="temperature", builder="specsim.tables.studies:temperature",
        title="Temperature and draft quality",
        about="Acceptance, tokens per call and speedup as the sampling temperature and the draft's "
              "knob change; simulated with 95% intervals, and exact.",
        columns={
            **KEYS, **C, **ACCEPT,
            "accept_rate_exact": "exact acceptance rate over the simulated horizon",
            "accept_fraction": "simulated drafts accepted per round / γ",
            "accept_fraction_ci_low": "lower end of the 95% confidence interval of "
                                      "accept_fraction",
            "accept_fraction_ci_high": "upper end of that interval",
            **TOKENS, "speedup": SPEEDUP["speedup"], "speedup_exact": SPEEDUP["speedup_exact"],
            "alpha_bar": "stationary mean over contexts of β = Σ min(p, q) (at T = 0: the "
                         "long-run mean of chains from the start token)",
        }),
    Table(
        "argmax_drafting", needs="drafting", builder="specsim.tables.studies:argmax_drafting",
        title="Argmax drafting against sampled drafting",
        about="What proposing the draft's argmax (vLLM's v1 drafters: a one-hot draft, accepted "
              "with p(x), still lossless) costs against drawing the draft from q, per model, "
              "temperature and γ of the drafting studies: tokens per target call of each mode, "
              "simulated with 95% intervals and exact, and their ratio. Argmax drafting wins "
              "where p(argmax q) beats Σ min(p, q): where the draft is less confident than the "
              "target at the token they agree on (a weak draft at low temperature).",
        columns={
            "study": KEYS["study"], "model": KEYS["model"], "knob": KEYS["knob"],
            "alpha": KEYS["alpha"], "gamma": KEYS["gamma"], "temperature": KEYS["temperature"],
            "rule": KEYS["rule"], "draft": "how the sampled draft is made (the argmax draft "
                                          "is its argmax)",
            **{f"{c}_{m}": f"{what} ({how})"
               for m, how in (("sample", "drafts drawn from q"),
                              ("argmax", "the draft's argmax proposed, q one-hot"))
               for c, what in (
                   ("tokens_per_round", TOKENS["tokens_per_round"]),
                   ("tokens_ci_low", "lower end of its 95% confidence interval"),
                   ("tokens_ci_high", "upper end of that interval"),
                   ("tokens_exact", "exact expected tokens per target call"),
                   ("covered", "whether that interval contains the exact value"),
                   ("alpha_bar", "mean acceptance per draft: Σ min(p, q) sampled, p(argmax q) "
                                 "argmax (stationary mean over contexts or positions)"))},
            "ratio": "tokens_per_round_argmax / tokens_per_round_sample (simulated)",
            "ratio_exact": "tokens_exact_argmax / tokens_exact_sample: above 1, argmax "
                           "drafting emits more tokens per target call",
            "winner_exact": "argmax, sample, or tie (exact values equal within 1e-9: at T = 0 "
                            "both draft the argmax)",
        }),
    Table(
        "optimal_k", needs="optimal_k", builder="specsim.tables.studies:optimal_k",
        title="Which draft length is best?",
        about="The best γ per model, α, temperature and draft cost c: simulated (with the γ it "
              "cannot be told apart from), exact over the study's γ, and Thm 3.8 over γ = 1..64.",
        columns={
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
    Table(
        "optimal_k_curve", needs="optimal_k", builder="specsim.tables.studies:optimal_k_curve",
        title="Speedup per draft length",
        about="Speedup for every γ of the optimal_k studies (the seed program's demo 4 table), "
              "simulated with 95% intervals and exact.",
        columns={**KEYS, **C, "accept_rate": ACCEPT["accept_rate"], **TOKENS, **SPEEDUP}),
    Table(
        "optimal_k_exact", needs="optimal_k", builder="specsim.tables.studies:optimal_k_exact",
        title="Exact tokens per round at every draft length",
        about="The exact curves of the optimal_k figure: stationary tokens per round at every γ "
              "from 1 to the largest the study simulates, per model, draft knob, α, temperature "
              "and rule.",
        columns={
            **KEYS,
            "tokens_stationary": "exact expected tokens per round (target call) in the long run",
            "exact_method": "how it was computed: Leviathan Eq. 1 for α-calibrated drafts, the "
                            "model family's exact method otherwise",
        }),
    Table(
        "break_even", needs="break_even", builder="specsim.tables.studies:break_even",
        title="When does a draft make decoding slower?",
        about="The break-even draft cost c* = (tokens per round − 1) / γ: a draft step costing "
              "more than c* target calls makes speculative decoding slower than plain decoding.",
        columns={
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
    Table(
        "speedup_vs_c", needs="break_even", builder="specsim.tables.studies:speedup_vs_c",
        title="Speedup against draft cost",
        about="The seed program's demo 5: the speedup at each configured draft cost c, and whether "
              "decoding got slower.",
        columns={
            **KEYS, **C, **SPEEDUP,
            "slower": "whether the whole 95% interval of speedup lies below 1",
        }),
    Table(
        "leviathan_table1", needs=None, builder="specsim.tables.studies:leviathan_table1",
        title="Leviathan et al., Thm 3.8 and Thm 3.11",
        about="Walltime improvement and increase in arithmetic operations on an (α, γ) grid at the "
              "idealised draft costs c = ĉ = 0 (the analysis behind Leviathan et al.'s Fig. 4).",
        columns={
            "alpha": "acceptance rate α",
            "gamma": "draft length γ",
            "operations": "Thm 3.11: factor by which arithmetic operations grow (ĉ = 0)",
            "speed": "Thm 3.8: walltime improvement (c = 0)",
            "tokens_per_call": f"{EQ1}: expected tokens per target call",
        }),
    Table(
        "intensity", needs=None, builder="specsim.tables.studies:intensity_table",
        title="Arithmetic intensity of a forward pass",
        about="Why extra tokens are nearly free: MACs, bytes moved and MACs per byte of one "
              "forward pass that processes tokens_in_pass tokens, with its roofline time on each "
              "device.",
        columns={
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
    Table(
        "roofline", needs=None, builder="specsim.tables.studies:roofline",
        title="Ridge points: how many tokens one pass verifies for free",
        about="Per model shape and device: the ridge point, the most tokens one pass can process "
              "while memory-bound, and the roofline times.",
        columns={
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
    Table(
        "worked_example", needs=None, builder="specsim.tables.studies:worked_example",
        title="One round by hand",
        about="The seed program's demo 1 in context 'a': target p, draft q, the probability of "
              "accepting each drafted token and the residual a rejected draft is resampled from.",
        columns={
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
)
