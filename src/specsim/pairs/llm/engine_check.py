"""The engine-metrics schedule checked against a real batched measurement.

The target (SmolLM2-135M) and one model draft (``engine_draft``) in the batched speculative
loop (:mod:`.batched`), at every batch size of ``engine_batches`` (prompts: the first b of
``max(engine_batches)`` held-out windows of ``prompt_tokens``), in three steps:

1. **as an engine reports it**: acceptance counters at one K (``engine_gamma``) from a batch of
   all the prompts (``engine_record_tokens`` new tokens each; one (sequence, round) a drafting
   round, as vLLM counts them) -> :class:`specsim.acceptance.counts.AcceptanceCounts`; and a
   latency profile (:mod:`specsim.acceptance.latency`'s CSV): one forward of the target at
   tokens 1..``engine_max_gamma`` + 1 and of the draft at 1 token per sequence, for each batch
   size, on a cache holding the prompts (``prompt_tokens`` - 1 slots), each the median over
   ``engine_latency_repeats`` interleaved repeats, quartiles as ``seconds_low``/``seconds_high``;
2. **predicted**: :func:`specsim.acceptance.schedule.schedule` -- speedup(b, K') and the best
   K' per batch for K' = 0..``engine_max_gamma`` (beyond K: extrapolated, flagged);
3. **measured**: the batched loop's throughput (tokens emitted by the whole batch per second of
   its decoding loop, wall clock) at every (b, K'), ``engine_new_tokens`` new tokens per
   sequence, all configurations interleaved within each of ``engine_repeats`` repeats
   (:func:`specsim.timing.measure`); the measured speedup is the median of the per-repeat
   ratios to K' = 0 at the same batch size (paired), with their quartiles.

The table (:data:`COLUMNS`): one row per (batch, gamma), predicted beside measured, the best
K' of each (``best_predicted``, ``best_measured``; ties to the smaller K'). The same runs also
calibrate the cost on K' = 0 and K only and test it on the other K'
(:mod:`.engine_calibration`: ``engine_calibration.csv`` and its ``_summary``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from specsim import timing
from specsim.acceptance.counts import AcceptanceCounts
from specsim.acceptance.latency import LatencyProfile
from specsim.acceptance.schedule import schedule
from specsim.pairs.llm.batched import BatchLM, batched_generate
from specsim.pairs.llm.drafts import ModelDraft
from specsim.pairs.llm.lab import Lab
from specsim.precision import first_max
from specsim.seeds import seed_for

COLUMNS = ("batch", "gamma", "tokens_per_call", "speedup_predicted", "ci_low", "ci_high",
           "extrapolated", "tokens_per_call_measured", "tokens_per_second", "speedup_measured",
           "measured_q1", "measured_q3", "best_predicted", "best_measured", "reliable",
           "load_before", "load_after", "cpus")
PROFILE_COLUMNS = ("role", "batch", "tokens", "seconds", "seconds_low", "seconds_high")


def models(lab: Lab) -> tuple[BatchLM, BatchLM]:
    draft = lab.draft(lab.s.engine_draft)
    if not isinstance(draft, ModelDraft):
        raise ValueError("engine_draft must be a model draft (int8 or skip-k)")
    return BatchLM(lab.model), BatchLM(draft.lm.model)


def prompts(lab: Lab) -> np.ndarray:
    return lab.windows(max(lab.s.engine_batches), lab.s.prompt_tokens)


def record_counts(lab: Lab, target: BatchLM, draft: BatchLM) -> AcceptanceCounts:
    """Counters at K = ``engine_gamma`` from one batch of every prompt (module docstring)."""
    s = lab.s
    rng = np.random.default_rng(seed_for(s.seed, "llm-engine-counts", s.engine_gamma))
    gen = batched_generate(target, draft, prompts(lab).tolist(), s.engine_gamma,
                           s.engine_record_tokens, rng)
    return AcceptanceCounts.from_histogram(gen.histogram().tolist(),
                                           f"batched loop, {s.engine_draft}, K={s.engine_gamma}")


def latency_profile(lab: Lab, target: BatchLM, draft: BatchLM) -> pd.DataFrame:
    """The profile CSV's rows (module docstring): target at tokens 1..K_max+1, draft at 1.
    Each (role, batch) has its own cache holding the prompts, prefilled before the timing; a
    timed call is one forward, after which the cache is cropped back (untimed work: a crop)."""
    s = lab.s
    p = prompts(lab)
    fns: dict[tuple[str, int, int], Any] = {}
    for b in s.engine_batches:
        for role, model, tokens in (("target", target.model, range(1, s.engine_max_gamma + 2)),
                                    ("draft", draft.model, (1,))):
            lm = BatchLM(model)
            lm.reset(b)
            lm.forward(p[:b, :-1])
            for k in tokens:
                fns[(role, b, k)] = _forward(lm, p[:b, -1:], k)
    tm = timing.measure(fns, s.engine_latency_repeats, min_seconds=0, retries=0)
    return pd.DataFrame([{"role": role, "batch": b, "tokens": k, "seconds": tm[key].median,
                          "seconds_low": tm[key].q25, "seconds_high": tm[key].q75,
                          "reliable": tm[key].reliable, **tm.load.columns()}
                         for key in fns for role, b, k in (key,)])


def _forward(lm: BatchLM, last: np.ndarray, k: int) -> Any:
    """One forward of k tokens a sequence on ``lm``'s cache, then the cache cropped back."""
    tokens = np.repeat(last, k, axis=1)
    drop = np.zeros(last.shape[0], dtype=np.int64)

    def run(_: int) -> None:
        lm.forward(tokens)
        lm.keep(k, drop)
    return run


def measure_throughput(lab: Lab, target: BatchLM, draft: BatchLM) -> tuple[dict[Any, Any],
                                                                            timing.Timings]:
    """Every (batch, K') run once per repeat, interleaved: {key: [generations]}, timings."""
    s = lab.s
    p = prompts(lab)
    configs = [(b, g) for b in s.engine_batches for g in range(s.engine_max_gamma + 1)]

    def call(b: int, g: int) -> Any:
        def run(r: int) -> Any:
            rng = np.random.default_rng(seed_for(s.seed, "llm-engine", b, g, r))
            n = min(4, s.engine_new_tokens) if r == timing.WARMUP else s.engine_new_tokens
            return batched_generate(target, draft, p[:b].tolist(), g, n, rng)
        return run

    tm = timing.measure({c: call(*c) for c in configs}, s.engine_repeats, min_seconds=0,
                        retries=0)
    return tm.results, tm


def check_table(counts: AcceptanceCounts, profile: LatencyProfile, runs: dict[Any, Any],
                tm: timing.Timings, batches: list[int], max_gamma: int) -> pd.DataFrame:
    """Predicted (the schedule) beside measured (the runs) per (batch, gamma)."""
    sched = schedule(counts, profile, batches, max_gamma).table
    rows = []
    for r in sched.itertuples():
        b, g = int(r.batch), int(r.gamma)
        gens = runs[(b, g)]
        tps = [x.tokens_per_second for x in gens]
        base = [x.tokens_per_second for x in runs[(b, 0)]]
        ratio = timing.paired_ratio(tps, base)
        tpc = (sum(x.emitted for x in gens) / sum(x.rounds * b for x in gens))
        rows.append({"batch": b, "gamma": g, "tokens_per_call": r.tokens_per_call,
                     "speedup_predicted": r.speedup, "ci_low": r.speedup_ci_low,
                     "ci_high": r.speedup_ci_high, "extrapolated": bool(r.extrapolated),
                     "tokens_per_call_measured": tpc,
                     "tokens_per_second": float(np.median(tps)),
                     "speedup_measured": ratio.median, "measured_q1": ratio.q25,
                     "measured_q3": ratio.q75, "reliable": ratio.reliable,
                     **tm.load.columns()})
    out = pd.DataFrame(rows)
    for col, src in (("best_predicted", "speedup_predicted"),
                     ("best_measured", "speedup_measured")):
        out[col] = 0
        for idx in out.groupby("batch").groups.values():
            sub = out.loc[idx]
            out.loc[idx, col] = int(sub["gamma"].iloc[first_max(sub[src].to_numpy())])
    return out.loc[:, list(COLUMNS)]


def engine_check(lab: Lab, latency_csv: str, counts_json: str,
                 calibration_csv: str | None = None) -> pd.DataFrame:
    """The three steps (module docstring); writes the profile CSV (and its .md twin), the
    counters (JSON) and, given ``calibration_csv``, the calibration's out-of-sample tables
    (that path and ``<stem>_summary.csv``); returns the check table."""
    from specsim.io import write_json_verified, write_table
    from specsim.pairs.llm.engine_calibration import calibration_tables, measured_frame

    s = lab.s
    target, draft = models(lab)
    counts = record_counts(lab, target, draft)
    write_json_verified(counts_json, {"rounds": counts.rounds, "accepted": list(counts.accepted),
                                      "gamma": s.engine_gamma, "draft": s.engine_draft,
                                      "histogram": counts.histogram.tolist(),
                                      "source": counts.source})
    write_table(latency_profile(lab, target, draft), latency_csv)
    profile = LatencyProfile.read(latency_csv)  # what a user's profile goes through
    runs, tm = measure_throughput(lab, target, draft)
    table = check_table(counts, profile, runs, tm, list(s.engine_batches), s.engine_max_gamma)
    if calibration_csv:
        per_batch, summary = calibration_tables(counts, profile, measured_frame(runs),
                                                (0, s.engine_gamma), s.engine_max_gamma)
        write_table(per_batch, calibration_csv)
        write_table(summary, calibration_summary_path(calibration_csv))
    return table


def calibration_summary_path(calibration_csv: str) -> str:
    """Where the calibration's summary goes: beside its per-batch table."""
    return calibration_csv[: -len(".csv")] + "_summary.csv"
