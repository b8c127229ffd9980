"""The real-text stage's steps: one registry entry each (one Snakemake rule of
workflow/rules/realtext.smk, one ``specsim realtext STEP``), and the functions they run.

Each function takes the step's settings (:class:`specsim.realtext_settings.Settings`, from the
config sections :data:`specsim.realtext_settings.STEPS` names) and the parsed arguments, and
returns the declared tables it computed (:mod:`specsim.outputs.realtext`); the command
(:mod:`specsim.stage_cli`) writes them and draws the step's figures. Heavy imports (pandas,
matplotlib) happen only when a step runs.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any

from specsim import argtypes
from specsim.declare import Arg, Stage, Step
from specsim.pairs import realtext

MAX_TEMPERATURE = 100.0  # the schema's bound on realtext.trace.temperatures
Tables = dict[str, Any]  # declared table name -> DataFrame

_CORPUS = Arg("corpus", "corpus .npz (the corpus step)")
_MODEL = Arg("model", "model .npz (the model step)")
_TRACES = Arg("traces", "the pairs' trace files, in the order of model.draft_orders", "+")


def _temperature(text: str) -> float:
    try:
        t = float(text)
    except ValueError:
        t = math.nan
    if not 0 <= t <= MAX_TEMPERATURE:
        raise argparse.ArgumentTypeError(f"must be a number in 0..{MAX_TEMPERATURE:g} "
                                         f"(0: greedy), got {text[:40]!r}")
    return t


#: The record step's arguments (also those of ``specsim record ngram``, the same step).
RECORD = Step(
    "record", "traces of the n-gram pairs (= specsim record ngram)",
    "specsim.pairs.realtext.steps:record",
    reads=(_CORPUS, _MODEL),
    writes=(Arg("out_dir", "directory of the traces, <pair>.parquet (results/traces)",
                directory=True),),
    options=((("--temperature",), {
        "type": _temperature, "default": 1.0,
        "help": "sampling temperature of both models and of the text (default 1: "
                "<pair>.parquet; another: <pair>_T<temperature>.parquet)"}),))


def corpus(s: Any, args: argparse.Namespace) -> Tables:
    from specsim.io import write_json
    from specsim.ngram import build_corpus, decode, save_corpus

    built = build_corpus(s.holdout_every)
    save_corpus(built, args.out)
    write_json(args.meta, {"sha256": built.sha256, "n_chars": built.n_chars,
                           "python": sys.version.split()[0], **built.meta,
                           "sample": decode(built.train[:200])})
    return {}


def model(s: Any, args: argparse.Namespace) -> Tables:
    from specsim.ngram import NGramModel, load_corpus
    from specsim.pairs.realtext.experiments import models_tables

    text = load_corpus(args.corpus)
    fitted = NGramModel.fit(text.train, s.target_order)
    fitted.save(args.out)
    models, beta = models_tables(fitted, text, s)
    return {"realtext_models": models, "realtext_beta": beta}


def speculative(s: Any, args: argparse.Namespace) -> Tables:
    from specsim.io import read_table
    from specsim.ngram import NGramModel, load_corpus
    from specsim.pairs.realtext import experiments

    table = experiments.speculative_table(NGramModel.load(args.model), load_corpus(args.corpus),
                                          s, args.seed, read_table(args.models_table))
    return {"realtext_speculative": table}


def lossless(s: Any, args: argparse.Namespace) -> Tables:
    from specsim.ngram import NGramModel
    from specsim.pairs.realtext import experiments

    return {"realtext_lossless": experiments.lossless_table(NGramModel.load(args.model), s,
                                                            args.seed, args.significance)}


def costs(s: Any, args: argparse.Namespace) -> Tables:
    from specsim.io import read_table
    from specsim.ngram import NGramModel, load_corpus
    from specsim.pairs.realtext.costs import costs_table

    return {"realtext_costs": costs_table(NGramModel.load(args.model), load_corpus(args.corpus),
                                          s, args.seed, read_table(args.speculative_table))}


def record(s: Any, args: argparse.Namespace) -> Tables:
    """Record the n-gram pairs' traces (:mod:`.record`); ``args.written``: the files."""
    from specsim.ngram import NGramModel, load_corpus
    from specsim.pairs.realtext.record import record_ngram

    done = record_ngram(NGramModel.load(args.model), args.model, load_corpus(args.corpus), s,
                        args.seed, args.out_dir, temperature=args.temperature)
    print(f"record: {done.recorded} blocks recorded, {done.reused} reused from parts",
          file=sys.stderr)
    args.written = [str(p) for p in done.paths.values()]
    return {}


def _traces(paths: list[str], s: Any) -> dict[str, Any]:
    """The pairs' traces by name, in the order of the settings' draft orders."""
    from specsim.realtext_settings import trace_pairs
    from specsim.traces.format import read_trace

    traces = {}
    for path in paths:
        trace = read_trace(path)
        traces[str(trace.meta.get("pair", path))] = trace
    if list(traces) != trace_pairs(s):
        raise ValueError(f"--traces hold the pairs {list(traces)}, expected {trace_pairs(s)} "
                         f"in that order")
    return traces


def pair_accept(s: Any, args: argparse.Namespace) -> Tables:
    from specsim.ngram import NGramModel
    from specsim.pairs.realtext import pairs

    return {"pair_accept": pairs.pair_accept_table(NGramModel.load(args.model),
                                                   _traces(args.traces, s), s, args.seed)}


def pair_optimal(s: Any, args: argparse.Namespace) -> Tables:
    from specsim.pairs.realtext import pairs

    return {"pair_optimal": pairs.pair_optimal_table(_traces(args.traces, s), s)}


def pair_costs(s: Any, args: argparse.Namespace) -> Tables:
    from specsim.io import read_table
    from specsim.pairs.realtext import pairs

    return {"pair_costs": pairs.pair_costs_table(_traces(args.traces, s), s,
                                                 read_table(args.costs))}


def engine_counters(s: Any, args: argparse.Namespace) -> Tables:
    from specsim.acceptance.readers import to_prometheus
    from specsim.io import write_text
    from specsim.ngram import NGramModel
    from specsim.pairs.realtext import serving_engine

    counts = serving_engine.counters(NGramModel.load(args.model), _traces(args.traces, s), s,
                                     args.seed)
    if len(args.out) != len(counts):
        raise ValueError(f"--out: {len(args.out)} files for {len(counts)} pairs")
    for (name, c), path in zip(counts.items(), args.out, strict=True):
        write_text(path, to_prometheus(c, {"engine": "0", "model_name": name}))
    return {}


def engine(s: Any, args: argparse.Namespace) -> Tables:
    from specsim.acceptance.readers import read_metrics
    from specsim.pairs.realtext import serving_engine
    from specsim.traces.format import read_trace

    traces = _traces(args.traces, s)
    counts = {name: read_metrics(path) for name, path in zip(traces, args.counters,
                                                             strict=True)}
    more = {Path(p).name.removesuffix(".parquet"): read_trace(p) for p in args.more_traces}
    schedule, shortcut = serving_engine.write_outputs(counts, traces, s, args.seed,
                                                      args.config_md, more)
    return {"engine_schedule": schedule, "engine_shortcut": shortcut}


def figures(s: Any, args: argparse.Namespace) -> Tables:
    return {}  # the step's declared figures are drawn from the tables by the command


STAGE = Stage(
    "realtext", "real-text stage: character n-grams on real English", realtext.__doc__ or "",
    "specsim.realtext_settings:Settings",
    steps=(
        Step("corpus", "extract the corpus from this interpreter's stdlib",
             "specsim.pairs.realtext.steps:corpus",
             writes=(Arg("out", "corpus .npz"),
                     Arg("meta", "corpus .json (sha256, sizes, sources)"))),
        Step("model", "train the model; perplexity and beta tables",
             "specsim.pairs.realtext.steps:model", reads=(_CORPUS,),
             writes=(Arg("out", "model .npz (counts of every order)"),)),
        Step("speculative", "speculative sampling over held-out prompts",
             "specsim.pairs.realtext.steps:speculative",
             reads=(_CORPUS, _MODEL, Arg("models_table", "realtext_models.csv"))),
        Step("lossless", "the exact law of two characters against Monte Carlo counts",
             "specsim.pairs.realtext.steps:lossless", reads=(_CORPUS, _MODEL)),
        Step("costs", "wall-clock costs and speedups (not deterministic)",
             "specsim.pairs.realtext.steps:costs",
             reads=(_CORPUS, _MODEL, Arg("speculative_table", "realtext_speculative.csv "
                                                              "(tokens per round and α)"))),
        RECORD,
        Step("pair_accept", "predicted (trace) vs measured tokens per call",
             "specsim.pairs.realtext.steps:pair_accept", reads=(_MODEL, _TRACES)),
        Step("pair_optimal", "optimal γ and break-even c from the traces over the c grid",
             "specsim.pairs.realtext.steps:pair_optimal", reads=(_TRACES,)),
        Step("pair_costs", "the pairs' speedups at the measured c and T(γ+1)/T(1)",
             "specsim.pairs.realtext.steps:pair_costs",
             reads=(_TRACES, Arg("costs", "the measured costs table (realtext costs step)"))),
        Step("engine_counters", "the pairs' measured runs' acceptance counters in vLLM's "
                                "Prometheus format", "specsim.pairs.realtext.steps:engine_counters",
             reads=(_MODEL, _TRACES),
             writes=(Arg("out", "one .prom file per pair, in order", "+"),)),
        Step("engine", "the counters + a latency profile -> the schedule, snippets, figure; "
                       "the counters' shortcut on the traces",
             "specsim.pairs.realtext.steps:engine",
             reads=(Arg("counters", "the pairs' .prom files", "+"), _TRACES,
                    Arg("more_traces", "the pairs' traces at other temperatures "
                                       "(<pair>_T<t>.parquet): the shortcut table only", "*")),
             writes=(Arg("config_md", "the engines' snippets (.md)"),)),
        Step("figures", "realtext figures (PDF + PNG) from the tables",
             "specsim.pairs.realtext.steps:figures"),
    ),
    options=((("--seed",), {"type": argtypes.seed, "default": 20221117,
                            "help": "the root seed"}),),
)
