"""The LLM tier's pairs traced, predicted and measured.

For each pair (the target with one draft of :data:`.settings.Settings.trace_pairs`):

* ``trace``: a trace of the pair (:mod:`.record`) over ``trace_documents`` held-out prompts,
  each document the target's continuation of ``trace_tokens`` tokens;
* ``pair``: speculative generation with the same models from the same prompts, ``trace_tokens``
  new tokens each -- specsim's loop (:func:`.generation.speculative_generate`) for every draft,
  transformers' assisted generation at a fixed γ (:func:`.assisted.set_policy`) for the model
  drafts -- beside plain target sampling by the same library, configurations of one prompt
  back to back (rotated): per prompt its target calls and wall time (one row per run);
* ``pairs``: two tables from the traces and the runs. ``pair_accept``: tokens per target call
  per (pair, engine, γ), predicted by the positional law of the trace (Σ T / Σ E[calls], with a
  bootstrap CI over documents) and measured (Σ T / Σ calls to emit T tokens, a bootstrap CI
  over prompts); *covered* when the paired bootstrap over prompts (document d is prompt d's
  continuation) of predicted minus measured contains 0. ``speedup_explained``: the measured
  wall-clock speedup (median over prompts, each prompt a repeat interleaved with plain
  sampling, with its quartiles) beside Thm 3.8 at the trace's mean α and the draft cost c, and
  the cost model tokens / (γ c + T(γ+1)/T(1)), as a product of factors:
  (γ+1) x f_α x f_draft x f_verify x f_other = measured, where f_α = tokens predicted / (γ+1),
  f_draft = 1 / (1 + γ c), f_verify = (1 + γ c) / (γ c + T(γ+1)/T(1)) and f_other = measured /
  cost model (what the three do not explain: loop overheads, sampling, timing noise).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from specsim import exact, timing
from specsim.costs import SEQUENTIAL, ConstantCost
from specsim.llm.drafts import ModelDraft
from specsim.llm.lab import Lab
from specsim.precision import covers
from specsim.seeds import seed_for
from specsim.traces.format import Trace
from specsim.traces.positional import (
    BOOTSTRAP,
    LEVEL,
    acceptance,
    bootstrap_ratio,
    paired_difference,
    positional_law,
)

#: Engines: specsim's loop (every draft) and transformers' assisted generation (model drafts).
ENGINES = ("specsim", "transformers")
#: The load a pair's runs were timed at (its runs table's, :meth:`specsim.timing.Load.columns`).
LOAD_COLUMNS = ("load_before", "load_after", "cpus")


def trace_prompts(lab: Lab) -> list[list[int]]:
    """The prompts of the traces and of the runs: ``trace_documents`` held-out windows."""
    return [w.tolist() for w in lab.windows(lab.s.trace_documents, lab.s.prompt_tokens)]


def record_tier_pair(lab: Lab, name: str, out: str | Path) -> Trace:
    """The trace of (target, draft ``name``): the tier's own draft object, asked position by
    position as Alg. 1 asks it (:class:`.record.StepRows`)."""
    from specsim.llm.loading import GGUF_FILE, VOCAB
    from specsim.llm.record import StepRows, record_pair

    s = lab.s
    return record_pair(out, lab.model, StepRows(lab.draft(name)), trace_prompts(lab),
                       length=s.trace_tokens, top_k=s.trace_top_k, temperature=1.0,
                       seed=s.seed, meta={"pair": f"smollm2-135m/{name}", "vocab": VOCAB,
                                          "target": GGUF_FILE, "draft": name,
                                          "text": "target continuations of held-out prompts",
                                          "source": "specsim llm trace", "device": s.device,
                                          "dtype": s.dtype}, batch=s.trace_batch)


def measure_runs(lab: Lab, name: str) -> pd.DataFrame:
    """Every configuration on every prompt (module docstring): one row per run with
    ``engine, gamma, prompt, tokens, calls, seconds`` (γ 0: the target alone). ``calls`` are
    the target calls until ``trace_tokens`` tokens were emitted."""
    from specsim.llm.assisted import hf_generate, set_policy, torch_seed
    from specsim.llm.generation import plain_generate, speculative_generate

    s = lab.s
    n = s.trace_tokens
    draft = lab.draft(name)
    engines = ENGINES if isinstance(draft, ModelDraft) else ENGINES[:1]
    configs = [(e, g) for e in engines for g in (0, *s.gamma)]

    def one(engine: str, g: int, prompt: list[int], i: int, n_new: int) -> tuple[int, int]:
        seed = seed_for(s.seed, "llm-pair", name, engine, g, i)
        if engine == "specsim":
            rng = np.random.default_rng(seed)
            gen = (plain_generate(lab.target, prompt, n_new, rng) if g == 0 else
                   speculative_generate(lab.target, draft, prompt, g, n_new, rng))
            return len(gen.tokens), gen.target_calls
        assistant = None
        if g:
            assert isinstance(draft, ModelDraft)
            assistant = draft.lm.model
            set_policy(assistant, g)
        run = hf_generate(lab.model, assistant, prompt, n_new, torch_seed(seed))
        return len(run.tokens), len(run.candidates)

    prompts = trace_prompts(lab)

    def call(engine: str, g: int) -> Callable[[int], tuple[int, int]]:
        def run(r: int) -> tuple[int, int]:  # the warm-up: a few tokens from the first prompt
            if r == timing.WARMUP:
                return one(engine, g, prompts[0], -1, min(4, n))
            return one(engine, g, prompts[r], r, n)
        return run

    # one prompt a repeat, the configurations interleaved (rotated); not re-taken (too costly)
    tm = timing.measure({cfg: call(*cfg) for cfg in configs}, len(prompts), min_seconds=0,
                        retries=0)
    rows = []
    for i in range(len(prompts)):
        for engine, g in configs:
            tokens, calls = tm.results[(engine, g)][i]
            rows.append({"pair": name, "engine": engine, "gamma": g, "prompt": i,
                         "tokens": tokens, "calls": calls,
                         "seconds": tm[(engine, g)].samples[i], "threads": s.threads,
                         **tm.load.columns()})
    return pd.DataFrame(rows)


def paired_difference_ci(num: Any, den_a: Any, den_b: Any, seed: int,
                         resamples: int = BOOTSTRAP, level: float = LEVEL
                         ) -> tuple[float, float]:
    """Percentile bootstrap CI of Σ num / Σ den_a - Σ num / Σ den_b, the units (prompts)
    resampled together for both ratios (:func:`specsim.traces.positional.paired_difference`)."""
    if np.asarray(num).size < 2:
        return (float("nan"), float("nan"))
    low, high, _ = paired_difference(num, den_a, num, den_b, seed, resamples, level)
    return low, high


def _costs(costs: pd.DataFrame, name: str) -> tuple[float, pd.Series]:
    """(c of draft ``name``, T(k)/T(1) of the target by k)."""
    tk = costs[costs["model"] == "target"].set_index("positions")["seconds"].sort_index()
    steps = costs[costs["measure"] == "draft_step"].set_index("model")["seconds"]
    return float(steps[name] / tk.iloc[0]), tk / tk.iloc[0]


def pair_tables(pairs: Sequence[str], traces: dict[str, Trace], runs: pd.DataFrame,
                costs: pd.DataFrame, seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(``pair_accept``, ``speedup_explained``) from each pair's trace, its runs and the costs
    table (module docstring)."""
    accept_rows, speed_rows = [], []
    for name in pairs:
        trace = traces[name]
        beta = acceptance(trace, "correct")
        alpha_mean = float(trace.alpha.mean())
        c, ratio = _costs(costs, name)
        pr = runs[runs["pair"] == name]
        for engine, er in pr.groupby("engine", sort=False):
            plain = er[er["gamma"] == 0].set_index("prompt").sort_index()
            for g, gr in er[er["gamma"] > 0].groupby("gamma"):
                gr = gr.set_index("prompt").sort_index()
                g = int(g)
                law = positional_law(beta, trace.doc_start, g)
                key = seed_for(seed, "llm-pair-ci", name, str(engine), g)
                s_pred, s_meas, s_diff = (int(x.generate_state(1)[0])
                                          for x in key.spawn(3))
                if not np.array_equal(gr.index, np.arange(trace.n_docs)):
                    raise ValueError(f"pair {name}: runs on prompts {list(gr.index)} but the "
                                     f"trace has {trace.n_docs} documents")
                length = trace.doc_lengths.astype(np.float64)
                calls = gr["calls"].to_numpy(np.float64)
                pred = law.tokens_per_call
                meas = float(length.sum() / calls.sum())
                lo_p, hi_p = law.tokens_ci(s_pred)
                lo_m, hi_m = bootstrap_ratio(length, calls, s_meas)
                lo_d, hi_d = paired_difference_ci(length, law.calls, calls, s_diff)
                accept_rows.append({
                    "pair": name, "engine": engine, "gamma": g, "prompts": int(calls.size),
                    "tokens_per_document": int(length[0]) if np.all(length == length[0])
                    else float(length.mean()),
                    "alpha_mean": alpha_mean,
                    "tokens_eq1_mean_alpha": float(exact.expected_tokens(
                        min(alpha_mean, 1 - 1e-12), g)),
                    "tokens_predicted": pred, "tokens_predicted_ci_low": lo_p,
                    "tokens_predicted_ci_high": hi_p,
                    "tokens_measured": meas, "tokens_measured_ci_low": lo_m,
                    "tokens_measured_ci_high": hi_m,
                    "difference": pred - meas, "difference_ci_low": lo_d,
                    "difference_ci_high": hi_d,
                    "covered": bool(covers(lo_d, hi_d, 0.0)),
                })
                # speedup: per prompt, plain seconds per token over speculative seconds per token
                per_prompt = timing.paired_ratio(plain["seconds"] / plain["tokens"],
                                                 gr["seconds"] / gr["tokens"])
                med = per_prompt.median
                # reliable: seconds per target call (the same work on every prompt) agree
                steady = all(timing.Timing.of(x["seconds"] / x["calls"]).reliable
                             for x in (plain, gr))
                verify = float(np.interp(g + 1, ratio.index.to_numpy(float), ratio.to_numpy()))
                cost = ConstantCost(c)  # Thm 3.8's round: 1 + γc target calls
                drafting, thm38_round = cost.draft(g, 1, SEQUENTIAL), cost.total(g, 1, SEQUENTIAL)
                cost_model = pred / (drafting + verify)
                f_alpha, f_draft = pred / (g + 1), 1.0 / thm38_round
                f_verify = thm38_round / (drafting + verify)
                speed_rows.append({
                    "pair": name, "engine": engine, "gamma": g,
                    "repeats": len(per_prompt.samples),
                    **timing.columns(speedup_measured=per_prompt), "reliable": steady,
                    **{k: gr[k].iloc[0].item() for k in LOAD_COLUMNS if k in gr},
                    "speedup_thm38": float(exact.walltime_improvement(
                        min(alpha_mean, 1 - 1e-12), g, c)),
                    "speedup_predicted": cost_model,
                    "alpha_mean": alpha_mean, "c": c, "verify_ratio": verify,
                    "tokens_predicted": pred, "tokens_measured": meas,
                    "factor_ideal": float(g + 1), "factor_alpha": f_alpha,
                    "factor_draft": f_draft, "factor_verify": f_verify,
                    "factor_other": med / cost_model,
                })
    return pd.DataFrame(accept_rows), pd.DataFrame(speed_rows)
