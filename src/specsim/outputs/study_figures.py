"""The figures of the grid's studies, drawn by ``specsim figures`` (:mod:`specsim.figures`)
from the tables; each caption is its report caption."""

from __future__ import annotations

from specsim.declare import Figure

FIGURES = (
    Figure(
        "equivalence", needs="equivalence", builder="specsim.figures.lossless:equivalence",
        caption=(
            "Is speculative sampling lossless? (program demo 2, notebook check 1). "
            "Total-variation distance between the law of the first two emitted tokens and the "
            "target's own law, per model and verification rule, on a log scale. Bars: exact "
            "TV from enumeration (triangles: exactly zero to machine precision, drawn at the "
            "axis floor); markers: Monte Carlo TV from the configured number of generations, "
            "a circle where the G-test judged the rule lossless and a cross where it judged "
            "it biased. Grey band: the sampling floor, the expected TV of that many draws "
            "from the target itself. The correct rule sits on the floor; the broken rules sit "
            "at their exact bias, far above.")),
    Figure(
        "accept_curve", needs="accept_curve", builder="specsim.figures.tokens:accept_curve",
        caption=(
            "Expected tokens per target call versus draft length γ (the notebook's left "
            "panel). Lines: Leviathan Eq. 1, (1 − α^(γ+1))/(1 − α), for each configured α. "
            "Open markers: exact values (dynamic programming; quadrature Monte Carlo for the "
            "i.i.d. stub whose (p, q) is shared by a round); dots: simulation with 95% "
            "confidence intervals, narrower than the markers. Coloured markers are "
            "α-calibrated drafts (acceptance exactly α in every context); grey ones are the "
            "seeds' own drafts at their mean acceptance ᾱ. Bottom: simulated minus exact, "
            "with the 95% CI.")),
    Figure(
        "jensen", needs="accept_curve", builder="specsim.figures.tokens:jensen",
        caption=(
            "Where Eq. 1 holds and where Jensen's gap opens. Top: exact E[tokens per round] "
            "subtracted from Eq. 1 evaluated at the draft's long-run mean acceptance ᾱ "
            "(symlog axis; grey band: the linear zone around zero). For α-calibrated drafts "
            "the gap is zero to rounding at every γ and α; for the seed drafts, whose "
            "acceptance varies by context, Eq. 1 overestimates by ~10⁻⁴ tokens; for the "
            "notebook's stub, which draws one (p, q) pair per round, the per-round acceptance "
            "varies and the gap grows with γ (error bars: 95% CI of the quadrature Monte "
            "Carlo). Bottom: the notebook's own check, Eq. 1 at the simulated acceptance α̂ "
            "minus the simulated tokens per round, with 95% CIs; only the stub's gap is large "
            "enough to be resolved by the simulation budget.")),
    Figure(
        "temperature", needs="temperature", builder="specsim.figures.tokens:temperature",
        caption=(
            "Acceptance decides everything (program demo 3, Leviathan §2.2). Top row: "
            "acceptance rate (simulated: filled; exact long-run ᾱ = Σ π(s) β(s): open). "
            "Bottom row: tokens per target call with 95% CIs and exact values; the right axis "
            "gives the speedup E[tokens]/(1 + γc) at the study's γ and c, and the dotted line "
            "is break-even. (a) draft quality: the draft blends the target with another table "
            "(weight 1 = perfect draft, 0 = junk); (b) the same table as draft at a "
            "mismatched temperature (1 = matched); (c) the sampling temperature of both "
            "models, including greedy T = 0, for a seed draft and an α-calibrated one (whose "
            "acceptance is α at every T).")),
    Figure(
        "optimal_k", needs="optimal_k", builder="specsim.figures.draft_length:optimal_k",
        caption=(
            "How many tokens to draft (program demo 4, Leviathan §3.5). Speedup E[tokens]/(1 "
            "+ γc) versus draft length γ, one panel per draft cost c. Lines: exact, from "
            "``optimal_k_exact.csv`` (Eq. 1 for α-calibrated drafts, the model family's exact "
            "method -- the renewal DP for Markov tables -- for the seed draft), open circles "
            "at the simulated γ grid. Stars: the simulated optimum with its 95% CI. A tick "
            "marks the exact optimum where it falls between the simulated γ values. Per-γ "
            "simulated points are added when an ``optimal_k_curve`` table exists.")),
    Figure(
        "optimal_k_heatmap", needs=None, builder="specsim.figures.draft_length:optimal_k_heatmap",
        caption=(
            "Leviathan et al. Fig. 3 as a map. Colour: the integer γ in 1..64 that maximises "
            "the walltime improvement (1 − α^(γ+1))/((1 − α)(1 + γc)) (Thm 3.8), over "
            "acceptance α in [0.5, 0.99] and draft cost c in [0, 0.5]; at c = 0 the optimum "
            "is unbounded and capped at 64. White contours: the improvement at that optimum. "
            "Circles: the (α, c) points of the optimal_k study, labelled with the simulated "
            "optimal γ.")),
    Figure(
        "break_even", needs="break_even", builder="specsim.figures.draft_length:break_even",
        caption=(
            "When does a draft make decoding slower? (program demo 5). Speedup E[tokens]/(1 + "
            "γc) versus the draft's per-token cost c (log–log), per model. Lines: exact; "
            "markers: simulated with 95% CIs. Ticks on the 1× line: the simulated break-even "
            "cost c* = (E[tokens] − 1)/γ with its CI (the legend gives the exact c*). Below "
            "1× (grey) speculative decoding is slower than the target alone; annotated: the "
            "study's ``expect_slower`` claims (in config.yaml the program's quarter-size poor "
            "draft at c = 0.25), each tested in checks.csv.")),
    Figure(
        "wallclock", needs="accept_curve", builder="specsim.figures.tokens:wallclock",
        caption=(
            "The notebook's toy wall-clock chart, for each configured (target latency, draft "
            "latency) pair. Bars: tokens per second, target alone (1/t_target) and "
            "speculative (E[tokens per round]/(t_target + γ t_draft)) at γ = 4, using "
            "simulated tokens per round with 95% CIs for α-calibrated drafts and for the "
            "seeds' own drafts. Labels: speedup over the target alone.")),
    Figure(
        "roofline", needs=None, builder="specsim.figures.roofline:roofline",
        caption=(
            "Why verifying γ + 1 tokens costs about as much as decoding one (program demo 6). "
            "Arithmetic intensity (MACs per byte moved) of one forward pass versus the number "
            "of new tokens it processes, after 512 cached tokens, for Llama-2-7B/13B/70B "
            "shapes. Solid: full count (GQA attention, SwiGLU MLP, lm_head at every position, "
            "KV-cache reads and writes); dashed: the seed program's simpler formula. The "
            "three sizes' lines overlap: a pass reads each weight once and uses it once per "
            "token, so MACs per byte are about (tokens in the pass) / (bytes per weight) "
            "whatever the model's size -- the full counts differ by at most a few percent "
            "(the figure's legend gives the largest gap). So that none hides another, each "
            "size is drawn at its own values (no offset), one on top of the other, each "
            "narrower than the one beneath and with its own marker (7B: wide line, large "
            "circle; 13B: square; 70B: narrow line, small triangle). Horizontal lines: each "
            "device's ridge point (peak MAC/s over memory bandwidth); ticks: the largest "
            "token count a pass can verify while still memory-bound, so extra verified tokens "
            "are nearly free below it (grey).")),
)
