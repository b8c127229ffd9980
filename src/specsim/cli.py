"""specsim: each step of the Snakemake pipeline, runnable on its own.

The pipeline (Snakefile) runs these steps, in this order:
  grid     the grid file: every point of the validated config     -> results/grid.json
  point    simulate one grid point and compute its exact reference -> results/{sim,exact}/
  collect  join every point's two files into per-point estimates  -> results/points.parquet
  tables   the analysis tables: CSV, Markdown and HTML            -> results/tables/
  figures  the figures: PDF and PNG                               -> results/figures/
  checks   re-test every claim of the seeds                       -> results/tables/checks.csv
  manifest every file the run builds                              -> results/manifest.txt
  gate     fail, naming them, when claims failed or a file under results/ is damaged
  verify   re-check every file under results/; name each damaged one and how to rebuild it
  html     the HTML rendering of tables another step wrote (the real-text tables)
  record   write traces of a draft/target pair (ngram), check trace files (check)
  advise   engine acceptance metrics + step latencies -> the best draft length per batch

`specsim <step> --help` shows a step's options. The real-model tiers run as `specsim realtext
STEP` and `specsim llm STEP` (opt-in), one rule a step. Each step ends its log (stderr) with
one line: what it did, how many, and how long it took.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from specsim.argtypes import Parser as _Parser
from specsim.errors import InputError
from specsim.process import exit_on_sigterm, hide_pandas


# --- argument types: each refuses a bad value with a one-line reason ---------------------------
def _file(path: str) -> str:
    if Path(path).is_file():
        return path
    raise argparse.ArgumentTypeError(f"no such file: {path}")


def _directory(path: str) -> str:
    if Path(path).is_dir():
        return path
    raise argparse.ArgumentTypeError(f"no such directory: {path}")


GATE = "results/checks.ok"  # relative to the working directory, as in the workflow
# steps whose parser sets the function that runs them (the tiers, record, the run's records...)
RUN_BY_ITSELF = ("realtext", "llm", "record", "check-config", "verify", "advise", "grid",
                 "manifest")


def _withdraw_gate() -> str:
    """Nothing downstream may keep claiming success over data that failed verification."""
    if os.path.exists(GATE):
        os.unlink(GATE)
        return f" ({GATE} removed)"
    return ""


def _grid(path: str) -> Any:
    """The Grid in a verified grid file (results/grid.json, :func:`read_grid_file`)."""
    from specsim.config import read_grid_file
    from specsim.io import IntegrityError

    _file(path)
    hint = "expected the results/grid.json the workflow's grid rule writes"
    try:
        return read_grid_file(path)
    except IntegrityError as err:
        raise argparse.ArgumentTypeError(f"{err}{_withdraw_gate()}") from None
    except (KeyError, TypeError, ValueError, AttributeError) as err:  # ConfigError included
        raise argparse.ArgumentTypeError(f"{path} does not hold a valid grid ({err}); {hint}"
                                         ) from None


def _parquet(path: str) -> str:
    """A file with Parquet's magic at both ends; its reader verifies it whole before decoding."""
    _file(path)
    with open(path, "rb") as fh:
        head = fh.read(4)
        fh.seek(max(os.fstat(fh.fileno()).st_size - 4, 0))
        if head != b"PAR1" or fh.read(4) != b"PAR1":
            raise argparse.ArgumentTypeError(f"{path} is not a Parquet file (no PAR1 magic)")
    return path


def _checks_csv(path: str) -> str:
    from specsim.io import IntegrityError, read_table

    _file(path)
    want = ("check", "passed", "observed", "expected")
    try:
        header = list(read_table(path).columns)  # verified against its sidecar, then parsed
    except IntegrityError as err:
        raise argparse.ArgumentTypeError(f"{err}{_withdraw_gate()}") from None
    missing = [c for c in want if c not in header]
    if missing:
        raise argparse.ArgumentTypeError(
            f"{path} is not a checks table: no column {', '.join(missing)} (expected the "
            f"results/tables/checks.csv that 'specsim checks' writes)")
    return path


def _job(text: str) -> dict[str, Any]:
    """A point job description (the JSON Snakemake passes as params.job)."""
    from specsim.job import point_from

    try:
        desc = json.loads(text)
    except json.JSONDecodeError as err:
        raise argparse.ArgumentTypeError(f"not JSON ({err})") from None
    try:
        point_from(desc)
    except (KeyError, TypeError, ValueError, AttributeError) as err:  # ConfigError included
        reason = f"no key {err}" if isinstance(err, KeyError) else str(err)
        raise argparse.ArgumentTypeError(
            f"not a point job description ({reason}); Snakemake builds it with "
            f"specsim.job.describe") from None
    return desc


def _name(kind: str, known: list[str]) -> Any:
    def check(name: str) -> str:
        if name not in known:
            raise argparse.ArgumentTypeError(f"unknown {kind} {name!r}; known: "
                                             f"{', '.join(known)}")
        return name

    check.__name__ = kind  # argparse names the type in some messages
    return check


def build_parser(full: bool = True) -> tuple[_Parser, dict[str, _Parser]]:
    """The parser, and each step's own parser by name; with the ``point`` step alone when
    ``full`` is false (a point job: no output declarations, no real-model tiers to load)."""
    parser = _Parser(prog="specsim", description=__doc__,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    _Parser.root = parser
    sub = parser.add_subparsers(dest="cmd", required=True, metavar="STEP",
                                title="steps (specsim STEP --help for each)")
    grid_help = "the grid file (results/grid.json, written by the workflow's grid rule)"

    s = sub.add_parser("point", help="simulate one grid point and compute its exact reference",
                       description="Simulate one grid point and compute its exact reference.")
    s.add_argument("--job", required=True, type=_job, metavar="JSON",
                   help="the point's job description (JSON; Snakemake passes params.job)")
    s.add_argument("--sim", required=True, metavar="PARQUET",
                   help="output: the Monte Carlo point file (results/sim/<point>.parquet)")
    s.add_argument("--exact", required=True, metavar="PARQUET",
                   help="output: the exact reference point file (results/exact/<point>.parquet)")

    if not full:
        return parser, dict(sub.choices)
    from specsim.outputs import FIGURE_NEEDS, TABLE_NEEDS
    from specsim.outputs import TABLES as TABLE_DOCS

    tables, figures = list(TABLE_NEEDS), list(FIGURE_NEEDS)
    c = sub.add_parser("collect", help="join every point's files into per-point estimates",
                       description="Join every grid point's Monte Carlo and exact files into "
                                   "per-point estimates with confidence intervals.")
    c.add_argument("--grid", required=True, type=_grid, metavar="JSON", help=grid_help)
    c.add_argument("--results-dir", required=True, type=_directory, metavar="DIR",
                   help="directory holding sim/ and exact/ (the point files, by point path)")
    c.add_argument("--out", required=True, metavar="PARQUET",
                   help="output: the per-point estimates (results/points.parquet)")

    t = sub.add_parser("tables", help="analysis tables (CSV, Markdown and HTML)",
                       description="Write analysis tables: <name>.csv (full precision), "
                                   "<name>.md and <name>.html (for people) in --out-dir.")
    t.add_argument("--grid", required=True, type=_grid, metavar="JSON", help=grid_help)
    t.add_argument("--points", required=True, type=_parquet, metavar="PARQUET",
                   help="the per-point estimates 'specsim collect' wrote "
                        "(results/points.parquet)")
    t.add_argument("--out-dir", required=True, metavar="DIR",
                   help="output directory (results/tables; created if missing)")
    t.add_argument("names", nargs="+", type=_name("table", tables), metavar="NAME",
                   help=f"tables to write, any of: {', '.join(tables)} (each needs a study "
                        f"of its analysis in the config, except "
                        f"{', '.join(n for n, need in TABLE_NEEDS.items() if need is None)})")

    f = sub.add_parser("figures", help="figures (PDF and PNG)",
                       description="Draw figures from the tables: <name>.pdf and <name>.png "
                                   "in --out-dir.")
    f.add_argument("--grid", required=True, type=_grid, metavar="JSON", help=grid_help)
    f.add_argument("--tables-dir", required=True, type=_directory, metavar="DIR",
                   help="directory holding the tables 'specsim tables' wrote (results/tables)")
    f.add_argument("--out-dir", required=True, metavar="DIR",
                   help="output directory (results/figures; created if missing)")
    f.add_argument("names", nargs="+", type=_name("figure", figures), metavar="NAME",
                   help=f"figures to draw, any of: {', '.join(figures)}")

    k = sub.add_parser("checks", help="re-test every claim of the seeds",
                       description="Re-test every claim of the seed documents against the "
                                   "tables; write the checks table (CSV, Markdown, HTML).")
    k.add_argument("--grid", required=True, type=_grid, metavar="JSON", help=grid_help)
    k.add_argument("--tables-dir", required=True, type=_directory, metavar="DIR",
                   help="directory holding the tables 'specsim tables' wrote (results/tables)")
    k.add_argument("--out", required=True, metavar="CSV",
                   help="output: the checks table (results/tables/checks.csv; .md and .html "
                        "beside it)")

    g = sub.add_parser("gate", help="fail, naming them, when claims in checks.csv failed",
                       description="Exit 1, naming each failed claim, when any row of the "
                                   "checks table failed; else write --out.")
    g.add_argument("--checks", required=True, type=_checks_csv, metavar="CSV",
                   help="the checks table 'specsim checks' wrote (results/tables/checks.csv)")
    g.add_argument("--out", required=True, metavar="FILE",
                   help="output, written only when every check passed and every file under "
                        "its directory verifies, as 'specsim verify' checks (results/checks.ok)")

    h = sub.add_parser("html", help="HTML renderings of tables another step wrote",
                       description="Write <name>.html beside <name>.csv in --tables-dir, for "
                                   "tables written by another step (the real-text stage).")
    h.add_argument("--tables-dir", required=True, type=_directory, metavar="DIR",
                   help="directory holding <name>.csv (results/tables); the HTML goes beside")
    h.add_argument("names", nargs="+", type=_name("table", list(TABLE_DOCS)), metavar="NAME",
                   help="tables to render (names declared in specsim.outputs)")

    # The tiers (`specsim realtext|llm STEP`), record, verify, check-config, advise.
    from specsim import runfiles
    from specsim.acceptance import cli as advise
    from specsim.configcheck import add_parser as add_check_config_parser
    from specsim.integrity import add_parser as add_verify_parser
    from specsim.pairs.stages import STAGES
    from specsim.record_cli import add_parser as add_record_parser
    from specsim.stage_cli import add_stage_parser

    for stage in STAGES:
        add_stage_parser(sub, stage)
    for add in (add_verify_parser, add_check_config_parser, advise.add_parser):
        add(sub)
    runfiles.add_parsers(sub, _grid)
    add_record_parser(sub)
    return parser, dict(sub.choices)


def _say(line: str) -> None:
    """The step's last line in its log: what it did, how many, how long."""
    print(line, file=sys.stderr, flush=True)


def _point(args: argparse.Namespace) -> int:
    hide_pandas()  # before pyarrow's first array: half a point job's start-up otherwise
    from specsim import job

    job.run(args.job, args.sim, args.exact, sys.stderr)  # prints its own "done: ..." line
    return 0


def _collect(args: argparse.Namespace, parser: _Parser) -> int:
    from specsim.collect import collect
    from specsim.runfiles import point_outputs

    missing = [f for f in point_outputs(args.grid, args.results_dir) if not Path(f).is_file()]
    if missing:
        parser.error(f"argument --results-dir: {len(missing)} of {2 * len(args.grid.points)} "
                     f"point files missing, e.g. {missing[0]} (run the point jobs first)")
    collect(args.grid, args.results_dir, args.out)
    return len(args.grid.points)


def _check_available(parser: _Parser, kind: str, names: list[str], available: list[str],
                     needs: dict[str, str | None]) -> None:
    for name in names:
        if name not in available:
            analysis, _, family = (needs[name] or "").partition("/")
            running = f" running a {family!r} model" if family else ""
            parser.error(f"{kind} {name!r} needs a study with analysis {analysis!r}{running}, "
                         f"and --grid has none; available: {', '.join(available)}")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    exit_on_sigterm()
    # A point job runs once per grid point: it builds only its own parser (the other steps'
    # need the output declarations and the tiers' ~25 sub-parsers, ~45 ms of its start-up).
    parser, steps = build_parser(full=argv[:1] != ["point"])
    args = parser.parse_args(argv)
    from specsim.io import IntegrityError, disk_full, met_full_disk

    sub = steps[args.cmd]
    try:
        if args.cmd in RUN_BY_ITSELF:
            return int(args.run(args))
        return _run(args, sub, time.perf_counter())
    except OSError as err:
        if disk_full(err):
            print(f"specsim: {met_full_disk(err)}", file=sys.stderr)  # frees the run's reserve
            return 1
        if isinstance(err, BrokenPipeError):  # `specsim ... | head`: the reader left
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 1
        if err.filename is None:
            raise
        # a path a step cannot use (a file where a directory goes, a directory where a file
        # goes, no permission): named, in one line, whichever step met it
        where = f"{err.filename}" + (f" -> {err.filename2}" if err.filename2 else "")
        print(f"{sub.prog}: error: {where}: {err.strerror or type(err).__name__}; give a "
              f"path that can be used there", file=sys.stderr)
        return 1
    except (InputError, IntegrityError) as err:  # bad input, or a damaged result
        print(f"{sub.prog}: error: {err}{_withdraw_gate()}", file=sys.stderr)
        return 1


def _run(args: argparse.Namespace, sub: _Parser, t0: float) -> int:
    def took() -> str:
        return f"{time.perf_counter() - t0:.2f} s"

    if args.cmd == "point":
        return _point(args)
    if args.cmd == "collect":
        try:
            n = _collect(args, sub)
        except RuntimeError as err:  # a corrupt, stale or foreign point file, named
            raise InputError(str(err)) from None
        _say(f"done: collect, {n} grid points joined into {args.out} in {took()}")
        return 0
    if args.cmd == "tables":
        from specsim.outputs import TABLE_NEEDS, available_tables
        from specsim.tables import write_analyses

        _check_available(sub, "table", args.names, available_tables(args.grid), TABLE_NEEDS)
        write_analyses(args.grid, args.points, args.names, args.out_dir)
        _say(f"done: tables, {len(args.names)} tables (CSV, Markdown, HTML) in {args.out_dir} "
             f"in {took()}")
        return 0
    if args.cmd == "figures":
        from specsim.figures import make_figure
        from specsim.outputs import FIGURE_NEEDS, available_figures

        _check_available(sub, "figure", args.names, available_figures(args.grid), FIGURE_NEEDS)
        for name in args.names:
            try:
                make_figure(args.grid, args.tables_dir, name, f"{args.out_dir}/{name}.pdf")
            except FileNotFoundError as err:
                sub.error(f"figure {name!r}: no such file: {err.filename} (write the tables "
                          f"first: specsim tables)")
        _say(f"done: figures, {len(args.names)} figures (PDF + PNG) in {args.out_dir} "
             f"in {took()}")
        return 0
    if args.cmd == "checks":
        from specsim.checks import run_checks
        from specsim.io import read_table
        from specsim.report import write_html

        run_checks(args.grid, args.tables_dir, args.out)
        df = read_table(args.out)
        write_html(df, "checks", Path(args.out).with_suffix(".html"))
        failed = int((~df["passed"].astype(bool)).sum())
        _say(f"done: checks, {len(df)} claims re-tested, {len(df) - failed} passed, {failed} "
             f"failed -> {args.out} in {took()}")
        return 0
    if args.cmd == "gate":
        from specsim.checks import gate
        from specsim.io import read_table

        rows = read_table(args.checks)  # verified whole before it is parsed
        status = gate(args.checks, args.out)
        failed = int((~rows["passed"].astype(bool)).sum())
        if status == 0:
            _say(f"done: gate, all {len(rows)} checks passed -> {args.out} in {took()}")
        else:
            what = f"{failed} of {len(rows)} checks failed" if failed else "damaged results"
            _say(f"failed: gate, {what} (listed above); {args.out} not written, in {took()}")
        return status
    if args.cmd == "html":
        from specsim.io import read_table
        from specsim.report import write_html

        for name in args.names:
            path = Path(args.tables_dir) / f"{name}.csv"
            if not path.is_file():
                sub.error(f"table {name!r}: no such file: {path}")
            write_html(read_table(path), name, path.with_suffix(".html"))
        _say(f"done: html, {len(args.names)} tables rendered in {args.tables_dir} in {took()}")
        return 0
    raise AssertionError(args.cmd)  # argparse refuses any other step


if __name__ == "__main__":
    sys.exit(main())
