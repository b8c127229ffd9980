"""The LLM tier's pairs traced, predicted and measured.

For each pair (the target with one draft of :data:`.settings.Settings.trace_pairs`):

* ``trace``: a trace of the pair (:mod:`.record`) over ``trace_documents`` held-out prompts,
  each document the target's continuation of ``trace_tokens`` tokens;
* ``pair``: speculative generation with the same models from the same prompts, ``trace_tokens``
  new tokens each -- specsim's loop (the pair stage's :func:`specsim.pairs.measure.measure` on
  the :class:`.backend.TransformersBackend`, one chain a prompt) for every draft, transformers'
  assisted generation at a fixed γ (:func:`.assisted.set_policy`) for the model drafts --
  beside plain target sampling by the same library, configurations of one prompt back to back
  (rotated): per prompt its target calls and wall time (one row per run);
* ``pairs``: two tables from the traces and the runs. ``pair_accept``
  (:mod:`specsim.pairs.accept`, one engine's runs at one γ a row): tokens per target call
  predicted by the positional law of the trace and measured, and their paired difference over
  prompts (document d is prompt d's continuation). ``speedup_explained``: the measured
  wall-clock speedup (median over prompts, each prompt a repeat interleaved with plain
  sampling, with its quartiles) beside Thm 3.8 at the trace's mean α and the draft cost c, and
  the cost model tokens / (γ c + T(γ+1)/T(1)) as a product of factors
  (:mod:`specsim.pairs.speedup`): (γ+1) x f_α x f_draft x f_verify x f_other = measured,
  f_other what the others do not explain (loop overheads, sampling, timing noise).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from specsim import exact, timing
from specsim.pairs import speedup
from specsim.pairs.accept import COLUMNS, RULE, Measured, accept_row
from specsim.pairs.llm.drafts import ModelDraft
from specsim.pairs.llm.lab import Lab
from specsim.seeds import seed_for
from specsim.traces.format import Trace
from specsim.traces.positional import acceptance, positional_law

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
    from specsim.pairs.llm.loading import GGUF_FILE, VOCAB
    from specsim.pairs.llm.record import StepRows, record_pair

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
    from specsim.pairs.llm.assisted import hf_generate, set_policy, torch_seed
    from specsim.pairs.llm.backend import TransformersBackend
    from specsim.pairs.llm.generation import plain_generate
    from specsim.pairs.measure import measure

    s = lab.s
    n = s.trace_tokens
    draft = lab.draft(name)
    backend = TransformersBackend(lab.model, draft, name)
    engines = ENGINES if isinstance(draft, ModelDraft) else ENGINES[:1]
    configs = [(e, g) for e in engines for g in (0, *s.gamma)]

    def one(engine: str, g: int, prompt: list[int], i: int, n_new: int) -> tuple[int, int]:
        seed = seed_for(s.seed, "llm-pair", name, engine, g, i)
        if engine == "specsim" and g == 0:
            gen = plain_generate(lab.target, prompt, n_new, np.random.default_rng(seed))
            return len(gen.tokens), gen.target_calls
        if engine == "specsim":  # one chain of the pair stage's measurement
            m = measure(backend, [prompt], n_new, 1, g, seed)
            return int(m["tokens"][0]), int(m["calls"][0])
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


def _costs(costs: pd.DataFrame, name: str) -> tuple[float, pd.Series]:
    """(c of draft ``name``, T(k)/T(1) of the target by k)."""
    tk = costs[costs["model"] == "target"].set_index("positions")["seconds"].sort_index()
    steps = costs[costs["measure"] == "draft_step"].set_index("model")["seconds"]
    return float(steps[name] / tk.iloc[0]), tk / tk.iloc[0]


def pair_tables(pairs: Sequence[str], traces: dict[str, Trace], runs: pd.DataFrame,
                costs: pd.DataFrame, seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(``pair_accept``, ``speedup_explained``) from each pair's trace, its runs and the costs
    table (module docstring): the first :func:`specsim.pairs.accept.accept_row`'s, the second's
    factors :func:`specsim.pairs.speedup.factors`."""
    accept_rows, speed_rows = [], []
    for name in pairs:
        trace = traces[name]
        beta = acceptance(trace, RULE)
        alpha_mean = float(trace.alpha.mean())
        c, ratio = _costs(costs, name)
        pr = runs[runs["pair"] == name]
        for engine, er in pr.groupby("engine", sort=False):
            plain = er[er["gamma"] == 0].set_index("prompt").sort_index()
            for g, gr in er[er["gamma"] > 0].groupby("gamma"):
                gr = gr.set_index("prompt").sort_index()
                g = int(g)
                if not np.array_equal(gr.index, np.arange(trace.n_docs)):
                    raise ValueError(f"pair {name}: runs on prompts {list(gr.index)} but the "
                                     f"trace has {trace.n_docs} documents")
                law = positional_law(beta, trace.doc_start, g)
                row = accept_row(trace, name, str(engine), g,
                                 Measured(gr["calls"].to_numpy(np.float64)), seed, law)
                accept_rows.append(row)
                pred, meas = row["tokens_predicted"], row["tokens_measured"]
                # speedup: per prompt, plain seconds per token over speculative seconds per token
                per_prompt = timing.paired_ratio(plain["seconds"] / plain["tokens"],
                                                 gr["seconds"] / gr["tokens"])
                # reliable: seconds per target call (the same work on every prompt) agree
                steady = all(timing.Timing.of(x["seconds"] / x["calls"]).reliable
                             for x in (plain, gr))
                verify = float(np.interp(g + 1, ratio.index.to_numpy(float), ratio.to_numpy()))
                speed_rows.append({
                    "pair": name, "engine": engine, "gamma": g,
                    "repeats": len(per_prompt.samples),
                    **timing.columns(speedup_measured=per_prompt), "reliable": steady,
                    **{k: gr[k].iloc[0].item() for k in LOAD_COLUMNS if k in gr},
                    "speedup_thm38": float(exact.walltime_improvement(alpha_mean, g, c)),
                    "speedup_predicted": float(speedup.cost_model(pred, g, c, verify)),
                    "alpha_mean": alpha_mean, "c": c, "verify_ratio": verify,
                    "tokens_predicted": pred, "tokens_measured": meas,
                    **speedup.factors(pred, g, c, verify, per_prompt.median),
                })
    return pd.DataFrame(accept_rows, columns=list(COLUMNS)), pd.DataFrame(speed_rows)
