"""``specsim realtext [--settings JSON] STEP ...``: one step of the real-text stage.

Each step is one Snakemake rule (workflow/rules/realtext.smk);
:data:`specsim.realtext_settings.STEPS` names the config sections each reads. Heavy imports
(pandas, matplotlib) happen only when a step runs, so the ``specsim`` command starts as fast as
before for every other sub-command.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

from specsim import argtypes, realtext, timing

MAX_TEMPERATURE = 100.0  # the schema's bound on realtext.trace.temperatures


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """The ``realtext`` sub-command of the ``specsim`` command line (:mod:`specsim.cli`)."""
    parser = sub.add_parser("realtext", help="real-text stage: character n-grams on real English",
                            description=realtext.__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    parser.set_defaults(run=run)
    return parser


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--settings", default="{}", type=settings_json,
                        help="JSON of config.yaml's realtext section (defaults: the schema's)")
    parser.add_argument("--seed", type=argtypes.seed, default=20221117)
    parser.add_argument("--significance", type=float, default=1e-3)
    sub = parser.add_subparsers(dest="step", required=True)
    c = sub.add_parser("corpus", help="extract the corpus from this interpreter's stdlib")
    c.add_argument("--out", required=True, help="corpus .npz")
    c.add_argument("--meta", required=True, help="corpus .json (sha256, sizes, sources)")
    m = sub.add_parser("model", help="train the model; perplexity and beta tables")
    m.add_argument("--corpus", required=True)
    m.add_argument("--out", required=True, help="model .npz (counts of every order)")
    m.add_argument("--table", required=True)
    m.add_argument("--beta-table", required=True)
    for name in ("speculative", "lossless", "costs"):
        e = sub.add_parser(name, help=f"the {name} experiment")
        e.add_argument("--corpus", required=True)
        e.add_argument("--model", required=True)
        e.add_argument("--out", required=True, help="table .csv (a .md twin is written too)")
        if name == "speculative":
            e.add_argument("--models-table", required=True, help="realtext_models.csv")
        if name == "costs":
            e.add_argument("--speculative-table", required=True,
                           help="realtext_speculative.csv (tokens per round and α)")
    r = sub.add_parser("record", help="traces of the n-gram pairs (= specsim record ngram)")
    add_record_arguments(r)
    p = sub.add_parser("pair_accept", help="predicted (trace) vs measured tokens per call")
    p.add_argument("--model", required=True)
    p.add_argument("--traces", required=True, nargs="+", help="the pairs' trace files")
    p.add_argument("--out", required=True, help="table .csv (pair_accept)")
    o = sub.add_parser("pair_optimal", help="optimal γ and break-even c from the traces")
    o.add_argument("--traces", required=True, nargs="+", help="the pairs' trace files")
    o.add_argument("--out", required=True, help="table .csv (pair_optimal)")
    o.add_argument("--costs", default=None,
                   help="with the measured costs table: the speedups at the measured c and "
                        "T(γ+1)/T(1) instead (pair_costs)")
    n = sub.add_parser("engine_counters", help="the pairs' measured runs' acceptance "
                                               "counters in vLLM's Prometheus format")
    n.add_argument("--model", required=True)
    n.add_argument("--traces", required=True, nargs="+", help="the pairs' trace files")
    n.add_argument("--out", required=True, nargs="+", help="one .prom file per pair, in order")
    e = sub.add_parser("engine", help="the counters + a latency profile -> the schedule, "
                                      "snippets, figure; the counters' shortcut on the traces")
    e.add_argument("--counters", required=True, nargs="+", help="the pairs' .prom files")
    e.add_argument("--traces", required=True, nargs="+", help="the pairs' trace files")
    e.add_argument("--schedule", required=True, help="engine_schedule .csv")
    e.add_argument("--shortcut", required=True, help="engine_shortcut .csv")
    e.add_argument("--more-traces", nargs="*", default=[],
                   help="the pairs' traces at other temperatures (<pair>_T<t>.parquet): "
                        "the shortcut table only (no counters)")
    e.add_argument("--config-md", required=True, help="the engines' snippets (.md)")
    e.add_argument("--figure", required=True, help="engine_schedule .pdf (and .png)")
    f = sub.add_parser("figures", help="realtext figures (PDF + PNG) from the tables")
    f.add_argument("--tables-dir", required=True)
    f.add_argument("--out-dir", required=True)
    f.add_argument("--costs", default=None, help="the measured-costs table (default: in tables)")


def add_record_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``specsim realtext record`` and ``specsim record ngram`` (the same step)."""
    parser.add_argument("--corpus", required=True, type=argtypes.existing_file,
                        help="corpus .npz (realtext corpus step)")
    parser.add_argument("--model", required=True, type=argtypes.existing_file,
                        help="model .npz (realtext model step)")
    parser.add_argument("--out-dir", required=True, type=argtypes.output_dir,
                        help="directory of the traces, <pair>.parquet (results/traces)")
    parser.add_argument("--temperature", type=_temperature, default=1.0,
                        help="sampling temperature of both models and of the text (default 1: "
                             "<pair>.parquet; another: <pair>_T<temperature>.parquet)")


def settings_json(text: str) -> str:
    """``--settings``: a JSON object of realtext sections whose keys and values
    :class:`~specsim.realtext_settings.Settings` takes (those sections checked; the text is
    returned)."""
    from specsim.realtext_settings import Settings

    d = argtypes.json_object(text)
    try:
        Settings.from_dict(d, partial=True)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return text


def _temperature(text: str) -> float:
    try:
        t = float(text)
    except ValueError:
        t = math.nan
    if not 0 <= t <= MAX_TEMPERATURE:
        raise argparse.ArgumentTypeError(f"must be a number in 0..{MAX_TEMPERATURE:g} "
                                         f"(0: greedy), got {text[:40]!r}")
    return t


def record(args: argparse.Namespace) -> list[str]:
    """Record the n-gram pairs' traces (:mod:`.record`); returns the files written."""
    from specsim.ngram import NGramModel, load_corpus
    from specsim.realtext.record import record_ngram
    from specsim.realtext_settings import Settings

    s = Settings.from_dict(json.loads(args.settings), partial=True)
    done = record_ngram(NGramModel.load(args.model), args.model, load_corpus(args.corpus), s,
                        args.seed, args.out_dir, temperature=args.temperature)
    print(f"record: {done.recorded} blocks recorded, {done.reused} reused from parts",
          file=sys.stderr)
    return [str(p) for p in done.paths.values()]


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


def run(args: argparse.Namespace) -> int:
    """Run the step ``args.step``; print the seconds of its stages to stderr (the rule's log)."""
    from specsim.io import read_table, write_json, write_table
    from specsim.ngram import NGramModel, build_corpus, decode, load_corpus, save_corpus
    from specsim.realtext_settings import Settings

    s = Settings.from_dict(json.loads(args.settings), partial=True)
    stages: dict[str, float] = {}
    t0 = timing.clock()

    def done(name: str) -> None:
        stages[name] = round(timing.clock() - t0, 3)

    if args.step == "corpus":
        corpus = build_corpus(s.holdout_every)
        save_corpus(corpus, args.out)
        done("corpus")
        write_json(args.meta, {"sha256": corpus.sha256, "n_chars": corpus.n_chars,
                               "python": sys.version.split()[0], **corpus.meta,
                               "sample": decode(corpus.train[:200])})
    elif args.step == "figures":
        from specsim.realtext.figures import make_figures

        make_figures(args.tables_dir, args.out_dir, args.costs)
    elif args.step == "record":
        record(args)
    elif args.step in ("pair_accept", "pair_optimal"):
        from specsim.realtext import pairs

        traces = _traces(args.traces, s)
        if args.step == "pair_accept":
            table = pairs.pair_accept_table(NGramModel.load(args.model), traces, s, args.seed)
        elif args.costs is None:
            table = pairs.pair_optimal_table(traces, s)
        else:
            table = pairs.pair_costs_table(traces, s, read_table(args.costs))
        write_table(table, args.out)
    elif args.step in ("engine_counters", "engine"):
        from specsim.realtext import serving_engine

        traces = _traces(args.traces, s)
        if args.step == "engine_counters":
            from specsim.acceptance.readers import to_prometheus
            from specsim.io import write_text

            counts = serving_engine.counters(NGramModel.load(args.model), traces, s, args.seed)
            if len(args.out) != len(counts):
                raise ValueError(f"--out: {len(args.out)} files for {len(counts)} pairs")
            for (name, c), path in zip(counts.items(), args.out, strict=True):
                write_text(path, to_prometheus(c, {"engine": "0", "model_name": name}))
        else:
            from specsim.acceptance.readers import read_metrics
            from specsim.traces.format import read_trace

            counts = {name: read_metrics(path) for name, path in zip(traces, args.counters,
                                                                     strict=True)}
            more = {Path(p).name.removesuffix(".parquet"): read_trace(p)
                    for p in args.more_traces}
            serving_engine.write_outputs(counts, traces, s, args.seed, args.schedule,
                                         args.shortcut, args.config_md, args.figure, more)
    elif args.step == "model":
        from specsim.realtext.experiments import models_tables

        corpus = load_corpus(args.corpus)
        model = NGramModel.fit(corpus.train, s.target_order)
        done("fit")
        model.save(args.out)
        table, hist = models_tables(model, corpus, s)
        write_table(table, args.table)
        write_table(hist, args.beta_table)
    else:
        from specsim.realtext import costs, experiments

        corpus = load_corpus(args.corpus)
        model = NGramModel.load(args.model)
        if args.step == "speculative":
            models = read_table(args.models_table)
            write_table(experiments.speculative_table(model, corpus, s, args.seed, models),
                        args.out)
        elif args.step == "lossless":
            write_table(experiments.lossless_table(model, s, args.seed, args.significance),
                        args.out)
        else:
            speculative = read_table(args.speculative_table)
            write_table(costs.costs_table(model, corpus, s, args.seed, speculative), args.out)
    done(args.step)
    print(json.dumps(stages), file=sys.stderr)
    return 0
