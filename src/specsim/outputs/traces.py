"""The trace models' own tables (:mod:`specsim.tables.traces`), declared here and gathered by
:mod:`specsim.outputs`.

Kept free of pandas and matplotlib: Snakemake imports it to plan the DAG."""

from __future__ import annotations

from specsim.declare import EQ1, Table

_KEYS = {
    "study": "the accept_curve study (a key under ``studies:`` in the config) the row belongs to",
    "model": "the trace model (a key under ``models:`` in the config)",
    "rule": "acceptance rule: correct and no_resample accept with the recorded α_t, greedy with "
            "q_t(argmax p_t)",
    "gamma": "draft length γ: tokens drafted per round",
}

TABLES = (
    Table(
        "trace_positions", needs="accept_curve/trace",
        builder="specsim.tables.traces:trace_positions",
        title="Trace models: acceptance by position within the draft",
        about="For each trace model of an accept_curve study (a real pair's recorded "
              "distributions, under the positional model): the probability that the i-th draft "
              "of a round is accepted given it is tested, averaged over round starts with their "
              "long-run frequency, and the spread of the acceptance at that draft position "
              "across round starts. Exact.",
        columns={
            **_KEYS,
            "draft_position": "i: the i-th draft token of the round (1..γ)",
            "accept_rate": "P(draft i accepted | draft i tested), over round starts weighted by "
                           "their long-run frequency and the probability that draft i is tested",
            "accept_std": "standard deviation of the per-position acceptance at draft i across "
                          "those starts (same weights): how much the pair's acceptance varies "
                          "along the text",
            "tested_per_round": "expected number of rounds testing draft i, per round (drafts "
                                "beyond a document's end are not tested)",
        }),
    Table(
        "trace_curve", needs="accept_curve/trace", builder="specsim.tables.traces:trace_curve",
        title="Trace models: tokens per target call at every draft length",
        about=f"For each trace model and rule of an accept_curve study, at every γ from 1 to the "
              f"study's largest: tokens per target call, exact under the positional model with a "
              f"bootstrap CI over the trace's documents (how much the number depends on the text "
              f"the trace followed), beside {EQ1} at the mean acceptance and the Jensen gap "
              f"between them. No rows when no study runs a trace model.",
        columns={
            **_KEYS,
            "tokens_exact": "exact tokens per target call: Σ_d T_d / Σ_d E[target calls to "
                            "traverse document d] (backward DP over positions)",
            "tokens_ci_low": "lower end of the 95% percentile bootstrap interval over documents",
            "tokens_ci_high": "upper end of that interval",
            "alpha_mean": "mean acceptance over the trace's positions (α_t, or q_t(argmax p_t) "
                          "for greedy)",
            "tokens_eq1": f"{EQ1} at alpha_mean: what a pair with the same mean acceptance at "
                          f"every position would give",
            "jensen_gap": "tokens_exact − tokens_eq1: what the spread of the acceptance along "
                          "the text (and the documents' ends) changes",
            "documents": "documents in the trace",
            "positions": "positions in the trace",
        }),
)
