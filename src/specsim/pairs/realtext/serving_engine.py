"""The engine route on the n-gram pairs: counters written as vLLM's, read back, scheduled.

Two steps (two rules of workflow/rules/stages.smk), exactly the path a user of
``specsim advise`` takes with their engine:

* ``engine_counters``: each pair's *measured* speculative runs
  (:func:`specsim.pairs.measure.measure`, the trace's own prompts, ``engine.replicas`` chains
  each, draft length ``engine.gamma`` = K) record what an engine's counters would: rounds and
  the per-position accepted counts, written in vLLM's Prometheus text format
  (``results/engine/<pair>.prom``);
* ``engine``: those files read back through :func:`specsim.acceptance.readers.read_metrics`,
  with the latency profile (``engine.latency``, a CSV; by default the roofline of
  ``engine.roofline``'s target and draft shapes on its device), through the schedule
  (``results/tables/engine_schedule.csv``, one row per pair, batch size and K' = 0..max_gamma),
  its figure and the engines' configuration snippets of the best pair; and the counters' route
  against each trace's exact positional model (``results/tables/engine_shortcut.csv``,
  :mod:`specsim.acceptance.shortcut`) from every K = 1..``engine.gamma`` (how the tail does
  from fewer identified positions), beside the measured counters' own estimate and interval
  (at the measured K; empty at the other K).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from specsim.acceptance.counts import AcceptanceCounts
from specsim.acceptance.latency import LatencyProfile, profile_of
from specsim.ngram import NGramModel
from specsim.pairs.realtext.rounds import NGramPair
from specsim.realtext_settings import Settings
from specsim.seeds import seed_for
from specsim.traces.format import Trace

__all__ = ["best_pair", "counters", "latency_profile", "schedule_tables", "write_outputs"]


def counters(model: NGramModel, traces: dict[str, Trace], s: Settings,
             seed: int) -> dict[str, AcceptanceCounts]:
    """Each pair's measured counters at K = ``engine.gamma`` (module docstring)."""
    from specsim.pairs.measure import measure
    from specsim.pairs.realtext.backend import NGramBackend

    out = {}
    for k, (name, trace) in zip(s.draft_orders, traces.items(), strict=True):
        start = np.asarray(trace.meta["prompt_contexts"], dtype=np.int64)
        m = measure(NGramBackend(NGramPair(model, s.target_order, k), name), start, s.trace_length,
                    s.engine_replicas, s.engine_gamma, seed_for(seed, "engine", k))
        out[name] = AcceptanceCounts(int(m["calls"].sum()),
                                     tuple(int(a) for a in m["accepted_at"]), name)
    return out


def latency_profile(s: Settings) -> LatencyProfile:
    """The profile the config names: its CSV, or the roofline of ``engine.roofline``."""
    return profile_of(s.engine_latency, s.engine_roofline, s.engine_batch, s.engine_max_gamma)


def schedule_tables(counts: dict[str, AcceptanceCounts], traces: dict[str, Trace], s: Settings,
                    seed: int, profile: LatencyProfile,
                    more: dict[str, Trace] | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(engine_schedule, engine_shortcut): every pair's schedule on ``profile``, and the
    counters' route from every K = 1..``engine.gamma`` against its trace's exact positional
    model, with the measured counters beside it at their K; ``more`` traces (the pairs at other
    temperatures, by name) add shortcut rows only."""
    from specsim.acceptance.schedule import schedule

    scheds, shortcuts = [], []
    for name, c in counts.items():
        t = schedule(c, profile, s.engine_batch, s.engine_max_gamma).table
        scheds.append(t.assign(pair=name, engine_gamma=c.max_gamma, rounds=c.rounds,
                               latency=profile.source))
        for k, sc in enumerate(_shortcuts(traces[name], name, s, seed), start=1):
            if k == c.max_gamma:
                measured = [c.tokens_per_call(int(g)) for g in sc["gamma"]]
                sc["tokens_measured_counters"] = [m.mean for m in measured]
                sc["tokens_measured_counters_ci_low"] = [m.low for m in measured]
                sc["tokens_measured_counters_ci_high"] = [m.high for m in measured]
            shortcuts.append(sc)
    for name, trace in (more or {}).items():
        shortcuts += _shortcuts(trace, name, s, seed)
    sched = pd.concat(scheds, ignore_index=True)
    first = ["pair", "engine_gamma", "rounds"]
    sched = sched[first + [c for c in sched.columns if c not in first]]
    return sched, pd.concat(shortcuts, ignore_index=True)


def _shortcuts(trace: Trace, name: str, s: Settings, seed: int) -> list[pd.DataFrame]:
    """The shortcut table of ``trace`` from every K = 1..``engine.gamma``, on its positional
    laws computed once (they do not depend on K)."""
    from specsim.acceptance.shortcut import shortcut_laws, shortcut_table

    ks = range(1, s.engine_gamma + 1)
    laws = shortcut_laws(trace, [*range(1, s.engine_max_gamma + 1), *ks])
    return [shortcut_table(trace, name, k, s.engine_max_gamma,
                           seed_for(seed, "engine", "shortcut", name, k),
                           replicas=s.engine_replicas, laws=laws) for k in ks]


def best_pair(sched: pd.DataFrame) -> str:
    """The pair whose best speedup at the smallest batch size is largest (its snippets)."""
    small = sched[(sched["batch"] == sched["batch"].min()) & sched["best"]]
    return str(small.sort_values(["speedup", "pair"], ascending=[False, True])["pair"].iloc[0])


def write_outputs(counts: dict[str, AcceptanceCounts], traces: dict[str, Trace], s: Settings,
                  seed: int, config_md: str, more: dict[str, Trace] | None = None
                  ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Both tables (``more``: traces adding shortcut rows), and the best pair's engine snippets
    written to ``config_md``; returns the tables (schedule, shortcut)."""
    from specsim.acceptance.schedule import best_by_batch
    from specsim.acceptance.snippets import render
    from specsim.io import write_text

    profile = latency_profile(s)
    sched, shortcut = schedule_tables(counts, traces, s, seed, profile, more)
    name = best_pair(sched)
    ranges = best_by_batch(counts[name], profile, min(s.engine_batch),
                           max(s.engine_batch), s.engine_max_gamma)
    write_text(config_md, f"<!-- pair {name}: its counters at K = {s.engine_gamma} -->\n"
               + render(ranges, "draft_model"))
    return sched, shortcut
