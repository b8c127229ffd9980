"""``specsim advise``: an engine's metrics and its costs -> the best draft length per batch.

Needs no config and no LLM extra::

    specsim advise --metrics vllm_metrics.txt --runs runs.csv --out advice/ \
        [--latency latency.csv] [--batch 1 2 4 8 16] [--max-gamma 8]
    specsim advise --metrics vllm_metrics.txt --latency latency.csv --out advice/

The cost comes from the engine's measured runs (``--runs``: :mod:`specsim.acceptance.runs`,
calibrated by :mod:`specsim.acceptance.calibrate`; ``--latency`` then only shapes how the
verify pass grows with tokens) or, without runs, from forward times alone (``--latency``).
Writes ``advice/schedule.csv`` (one row per batch size and draft length, K' = 0 included,
:data:`specsim.acceptance.schedule.COLUMNS`), ``advice/schedule.md`` (the cost model's
equation, assumptions, fitted terms, uncovered cells, then the table),
``advice/engine_config.md`` (vLLM, TensorRT-LLM, SGLang, llama.cpp snippets),
``advice/measurement_plan.md`` (the commands that collect each engine's counters and runs for a
fully measured schedule: :mod:`specsim.acceptance.engines.plan`), ``advice/schedule.pdf``/
``.png``, and prints the
schedule as a short table. Every input is checked before anything is written: a malformed
metrics or latency file, or a profile that does not cover the batch sizes asked, is one line
naming the file and the problem (exit status 1).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from specsim.argtypes import output_dir, positive_int

__all__ = ["add_parser", "advise"]


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    """The ``advise`` sub-command of the ``specsim`` command line (:mod:`specsim.cli`)."""
    p = sub.add_parser("advise", help="engine counters + measured runs -> best draft length per "
                                      "batch size", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--metrics", required=True, action="append", nargs="+", metavar="FILE",
                   help="engine acceptance metrics: a /metrics scrape (vLLM, llama-server, "
                        "TensorRT-LLM), vLLM or llama.cpp log lines, per-request JSON, JSON "
                        "lines or SSE captures (vLLM, SGLang); several files are pooled per "
                        "draft length")
    p.add_argument("--format", default="auto", help="metrics format (default: detected)")
    p.add_argument("--baseline", nargs="+", default=[], metavar="FILE",
                   help="Prometheus scrapes taken before the run, one per --metrics file in "
                        "the same order: the counters' difference is used")
    p.add_argument("--label", action="append", default=[], metavar="NAME=VALUE", type=_label,
                   help="select Prometheus series by label, e.g. --label engine=0 (llama.cpp "
                        "statistics lines: --label type=draft-mtp)")
    p.add_argument("--sum-series", action="store_true",
                   help="pool every Prometheus series (replicas, data-parallel engines); "
                        "refused when their draft lengths differ")
    p.add_argument("--lines", choices=("sum", "last"), default="sum",
                   help="vLLM log lines: sum every interval's counts, or take the last line")
    p.add_argument("--draft-length", type=positive_int, metavar="K",
                   help="use the rounds that drafted K tokens (default: the largest K the "
                        "metrics carry with rounds); also SGLang's K when its histograms do "
                        "not say")
    p.add_argument("--short-drafts", action="store_true",
                   help="drafts were cut short per round under one K (confidence threshold, "
                        "n-gram misses): tokens per call stays exact, the cost and the tail "
                        "beyond K do not; without it such counters are refused, since a "
                        "draft length that changed with load biases them")
    p.add_argument("--runs", action="append", nargs="+", default=[], metavar="SPEC",
                   help="the engine's measured throughput: a CSV batch,gamma,tokens_per_second"
                        "[,tokens_per_second_low,tokens_per_second_high], or k=G:FILE for a "
                        "result JSON of vllm bench serve --save-result or sglang.bench_serving "
                        "run at draft length G (0 = speculation off); calibrates the cost")
    p.add_argument("--latency", metavar="FILE",
                   help="latency profile CSV: role,batch,tokens,seconds[,seconds_low,"
                        "seconds_high]; the whole cost without --runs, only the verify "
                        "pass's growth with them")
    p.add_argument("--out", required=True, metavar="DIR", type=output_dir,
                   help="output directory (created if missing)")
    p.add_argument("--batch", type=positive_int, nargs="+", metavar="B",
                   help="batch sizes (default: the profile's measured target batch sizes)")
    p.add_argument("--max-gamma", type=positive_int, metavar="N",
                   help="largest draft length K' (default: the engine's K; larger K' are "
                        "extrapolated and flagged)")
    p.add_argument("--method", default="draft_model",
                   help="vLLM speculative_config method for the snippet (eagle, ngram, ...)")
    p.set_defaults(run=run)
    return p


def _label(item: str) -> tuple[str, str]:
    """``--label NAME=VALUE`` (a usage error, exit status 2, when it is not)."""
    name, eq, value = item.partition("=")
    if not eq or not name:
        raise argparse.ArgumentTypeError(f"{item!r}: give NAME=VALUE, e.g. engine=0")
    return name, value


def advise(metrics: list[str], latency: str | None, out: str | Path,
           batches: list[int] | None = None, max_gamma: int | None = None,
           method: str = "draft_model", reading: Any = None,
           baseline: list[str] | None = None, runs: list[str] | None = None,
           echo: Any = None) -> Any:
    """Read, check, compute, then write: the :class:`~specsim.acceptance.schedule.Schedule`."""
    from specsim.acceptance.calibrate import cost_model
    from specsim.acceptance.engines.plan import measurement_plan
    from specsim.acceptance.figure import figure_schedule
    from specsim.acceptance.model_report import schedule_markdown
    from specsim.acceptance.readers import ReadOptions, read_counts
    from specsim.acceptance.schedule import best_by_batch, schedule
    from specsim.acceptance.snippets import render
    from specsim.io import write_table, write_text

    read = read_counts(metrics, reading or ReadOptions(), baseline or ())
    counts = read.counts
    if max_gamma is not None and max_gamma < 1:
        raise ValueError(f"--max-gamma {max_gamma}: need at least 1")
    gmax = counts.max_gamma if max_gamma is None else max_gamma
    cost, measured = cost_model(counts, runs or [], latency, gmax)
    asked = sorted(set(batches)) if batches else measured
    sched = schedule(counts, cost, asked, gmax)
    ranges = best_by_batch(counts, cost, asked[0], asked[-1], gmax)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    rounded = write_table(sched.table, out / "schedule.csv")
    write_text(out / "schedule.md", schedule_markdown(cost, rounded))
    write_text(out / "engine_config.md", render(ranges, method))
    write_text(out / "measurement_plan.md", measurement_plan(
        asked, counts.max_gamma, counts.per_position.tolist(), method, max_gamma))
    figure_schedule(sched.table, str(out / "schedule.pdf"),
                    f"{counts.source}: K = {counts.max_gamma}, {counts.rounds} rounds")
    if echo is not None:
        echo(read.summary())
    return sched


def run(args: argparse.Namespace) -> int:
    from specsim.acceptance.calibrate import CalibrationError
    from specsim.acceptance.latency import LatencyError
    from specsim.acceptance.readers import MetricsError, ReadOptions
    from specsim.acceptance.runs import RunsError

    files = [f for group in args.metrics for f in group]
    runs = [f for group in args.runs for f in group]
    try:
        opts = ReadOptions(args.format, dict(args.label), args.lines, args.draft_length,
                           args.short_drafts, args.sum_series)
        sched = advise(files, args.latency, args.out, args.batch, args.max_gamma, args.method,
                       opts, args.baseline, runs, echo=print)
    except (MetricsError, LatencyError, CalibrationError, RunsError, ValueError) as err:
        print(f"specsim advise: error: {err}", file=sys.stderr)
        return 1
    print(sched.summary())
    print(f"wrote {args.out}/schedule.csv, schedule.md, engine_config.md, measurement_plan.md, "
          "schedule.pdf/.png")
    return 0
