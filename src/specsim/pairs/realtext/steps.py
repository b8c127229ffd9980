"""The real-text stage's steps: one registry entry each (one ``specsim realtext STEP`` and
its Snakemake rule, built by :mod:`specsim.stage_rules`), and the functions they run.

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
from dataclasses import replace
from pathlib import Path
from typing import Any

from specsim import argtypes
from specsim.declare import Arg, Rule, Stage, Step
from specsim.pairs import realtext

MAX_TEMPERATURE = 100.0  # the schema's bound on realtext.trace.temperatures
Tables = dict[str, Any]  # declared table name -> DataFrame

_CORPUS = Arg("corpus", "corpus .npz (the corpus step)", files="results/realtext/corpus.npz")
_MODEL = Arg("model", "model .npz (the model step)", files="results/realtext/model.npz")
_TRACES = Arg("traces", "the pairs' trace files, in the order of model.draft_orders", "+",
              files="@traces")


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
                directory=True, files="@traces"),),
    options=((("--temperature",), {
        "type": _temperature, "default": 1.0,
        "help": "sampling temperature of both models and of the text (default 1: "
                "<pair>.parquet; another: <pair>_T<temperature>.parquet)"}),),
    # resumable: a killed job leaves finished blocks of documents in <trace>.parts/; the
    # tempered rule records the pairs at one other temperature of trace.temperatures each
    rules=(Rule(priority=1, mem_mb="@record_mb", passes=("seed",)),
           Rule("tempered", priority=1, mem_mb="@record_mb", passes=("seed",),
                wildcards={"temperature": "@temperatures"}, files={"out_dir": "@tempered"},
                options="--temperature {wildcards.temperature}")))


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


def dag(config: Any) -> tuple[dict[str, str], dict[str, Any]]:
    """The stage's section checked (with the engine route's latency profile: a file or the
    roofline, covering its batch sizes and draft lengths), each step's ``--settings`` and the
    files and numbers its rules name (:mod:`specsim.stage_rules`)."""
    from specsim import realtext_settings as rs
    from specsim.acceptance.latency import profile_of

    section = config["realtext"]
    s = rs.Settings.from_dict(section)
    try:
        profile_of(s.engine_latency, s.engine_roofline, s.engine_batch, s.engine_max_gamma)
    except ValueError as err:
        raise ValueError(f"engine: {err}") from None
    pairs = rs.trace_pairs(section)
    temperatures = [repr(t) for t in map(float, rs.trace_temperatures(section)) if t != 1.0]
    return rs.step_settings(section), {
        "traces": [rs.TRACE_PATH.format(pair=p) for p in pairs],
        "tempered": [rs.TEMPERED_TRACE_PATH.format(pair=p, temperature="{temperature}")
                     for p in pairs],
        "temperatures": temperatures,
        "tempered_traces": [rs.tempered_trace_path(p, t) for t in rs.trace_temperatures(section)
                            for p in pairs],
        "counters": [rs.ENGINE_COUNTERS.format(pair=p) for p in pairs],
        "latency": [s.engine_latency] if s.engine_latency else [],
        "record_mb": rs.record_memory_mb(section)}


_STEP = "specsim.pairs.realtext.steps:"
STAGE = Stage(
    "realtext", "real-text stage: character n-grams on real English", realtext.__doc__ or "",
    "specsim.realtext_settings:Settings",
    steps=(
        Step("corpus", "extract the corpus from this interpreter's stdlib", _STEP + "corpus",
             writes=(replace(_CORPUS, flag="out", help="corpus .npz"),
                     Arg("meta", "corpus .json (sha256, sizes, sources)",
                         files="results/realtext/corpus.json")),
             rules=(Rule(priority=1, mem_mb=1500, runtime=5),)),
        Step("model", "train the model; perplexity and beta tables", _STEP + "model",
             reads=(_CORPUS,),
             writes=(replace(_MODEL, flag="out", help="model .npz (counts of every order)"),),
             rules=(Rule(priority=1, mem_mb=1500, runtime=5),)),
        Step("speculative", "speculative sampling over held-out prompts", _STEP + "speculative",
             reads=(_CORPUS, _MODEL, Arg("models_table", "realtext_models.csv",
                                         files="=realtext_models")),
             rules=(Rule(priority=1, mem_mb=1500, passes=("seed",)),)),
        Step("lossless", "the exact law of two characters against Monte Carlo counts",
             _STEP + "lossless", reads=(_CORPUS, _MODEL),
             rules=(Rule(priority=1, mem_mb=2000, passes=("seed", "significance")),)),
        Step("costs", "wall-clock costs and speedups (not deterministic)", _STEP + "costs",
             reads=(_CORPUS, _MODEL, Arg("speculative_table", "realtext_speculative.csv "
                                         "(tokens per round and α)",
                                         files="=realtext_speculative")),
             # timings: every core, so that nothing runs beside them; their table lives in
             # results/realtext/, outside results/tables/ (byte-identical across runs)
             rules=(Rule(threads="all", env="OMP_NUM_THREADS=1", priority=1, mem_mb=1500,
                         passes=("seed",)),)),
        RECORD,
        Step("pair_accept", "predicted (trace) vs measured tokens per call",
             _STEP + "pair_accept", reads=(_MODEL, _TRACES),
             rules=(Rule(priority=1, mem_mb=1500, passes=("seed",)),)),
        Step("pair_optimal", "optimal γ and break-even c from the traces over the c grid",
             _STEP + "pair_optimal", reads=(_TRACES,)),
        Step("pair_costs", "the pairs' speedups at the measured c and T(γ+1)/T(1)",
             _STEP + "pair_costs",
             reads=(_TRACES, Arg("costs", "the measured costs table (realtext costs step)",
                                 files="=realtext_costs"))),
        Step("engine_counters", "the pairs' measured runs' acceptance counters in vLLM's "
             "Prometheus format", _STEP + "engine_counters", reads=(_MODEL, _TRACES),
             writes=(Arg("out", "one .prom file per pair, in order", "+", files="@counters"),),
             rules=(Rule(passes=("seed",)),)),
        Step("engine", "the counters + a latency profile -> the schedule, snippets, figure; "
             "the counters' shortcut on the traces", _STEP + "engine",
             reads=(Arg("counters", "the pairs' .prom files", "+", files="@counters"), _TRACES,
                    Arg("more_traces", "the pairs' traces at other temperatures "
                                       "(<pair>_T<t>.parquet): the shortcut table only", "*",
                        files="@tempered_traces")),
             writes=(Arg("config_md", "the engines' snippets (.md)",
                         files="results/engine/engine_config.md"),),
             rules=(Rule(passes=("seed",), after=("@latency",), category="Your engine"),)),
        Step("figures", "realtext figures (PDF + PNG) from the tables", _STEP + "figures",
             rules=(Rule(priority=1),)),
    ),
    options=((("--seed",), {"type": argtypes.seed, "default": 20221117,
                            "help": "the root seed"}),),
    dag=_STEP + "dag", category="Real text",
)
