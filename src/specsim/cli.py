"""Command-line entry point: each pipeline step runs outside Snakemake too.

    specsim point     --job JSON --sim results/sim/<point>.parquet --exact results/exact/<...>
    specsim collect   --grid results/grid.json --results-dir results --out results/points.parquet
    specsim tables    --grid results/grid.json --points results/points.parquet --out-dir DIR NAME...
    specsim figures   --grid ... --tables-dir results/tables --out-dir results/figures NAME...
    specsim checks    --grid ... --tables-dir results/tables --out results/tables/checks.csv
    specsim realtext  --settings JSON [--seed N] STEP ...   (the real-text stage, one rule a step)
    specsim llm       --settings JSON STEP ...              (the opt-in LLM tier, one rule a step)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path


def _load_grid(path: str):  # type: ignore[no-untyped-def]
    from specsim.grid import Grid

    return Grid.from_json(json.loads(Path(path).read_text()))


def put_on_path() -> None:
    """Put the directory of the running interpreter -- where pip installed the ``specsim``
    command beside it -- first on PATH, so Snakemake's shell jobs run this installation's
    ``specsim`` whether or not the venv is activated, and no absolute path enters a rule."""
    here = os.path.dirname(sys.executable)
    if os.environ.get("PATH", "").split(os.pathsep)[0] != here:
        os.environ["PATH"] = os.pathsep.join([here, os.environ.get("PATH", "")])


class _NoPandas:
    """Import finder that reports pandas as absent (see :func:`_without_pandas`)."""

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if name == "pandas" or name.startswith("pandas."):
            raise ModuleNotFoundError(f"pandas is not loaded in point jobs ({name})", name=name)


def _without_pandas() -> None:
    """A point job writes two one-row Parquet files and never needs pandas, but pyarrow's
    pandas shim imports it on the first ``pa.array`` call when it is installed -- about half
    of a point job's start-up. Point jobs run one per grid point, so they hide it."""
    if "pandas" not in sys.modules:
        sys.meta_path.insert(0, _NoPandas())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="specsim", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)

    s = sub.add_parser("point", help="simulate one grid point and compute its exact reference")
    s.add_argument("--job", required=True,
                   help="the point's job description (JSON, as Snakemake's params.job)")
    s.add_argument("--sim", required=True, help="output: the Monte Carlo point file")
    s.add_argument("--exact", required=True, help="output: the exact reference point file")

    c = sub.add_parser("collect", help="join every point's files into per-point estimates")
    c.add_argument("--grid", required=True, help="results/grid.json")
    c.add_argument("--results-dir", required=True,
                   help="directory holding sim/ and exact/ (point files by path)")
    c.add_argument("--out", required=True, help="output: results/points.parquet")

    t = sub.add_parser("tables", help="analysis tables (CSV + Markdown)")
    t.add_argument("--grid", required=True)
    t.add_argument("--points", required=True)
    t.add_argument("--out-dir", required=True)
    t.add_argument("names", nargs="+")

    f = sub.add_parser("figures", help="figures (PDF + PNG)")
    f.add_argument("--grid", required=True)
    f.add_argument("--tables-dir", required=True)
    f.add_argument("--out-dir", required=True)
    f.add_argument("names", nargs="+")

    k = sub.add_parser("checks", help="re-test every claim of the seeds")
    k.add_argument("--grid", required=True)
    k.add_argument("--tables-dir", required=True)
    k.add_argument("--out", required=True)

    g = sub.add_parser("gate", help="fail, naming them, when claims in checks.csv failed")
    g.add_argument("--checks", required=True)
    g.add_argument("--out", required=True)

    # The real-model tiers: `specsim realtext STEP ...`, `specsim llm STEP ...` (one rule each).
    from specsim.llm.cli import add_parser as add_llm_parser
    from specsim.realtext.cli import add_parser as add_realtext_parser

    add_realtext_parser(sub)
    add_llm_parser(sub)

    args = parser.parse_args(argv)
    if args.cmd in ("realtext", "llm"):
        return int(args.run(args))
    if args.cmd == "gate":
        from specsim.checks import gate

        return gate(args.checks, args.out)
    if args.cmd == "point":
        _without_pandas()
        from specsim import job

        try:
            desc = json.loads(args.job)
        except json.JSONDecodeError as err:
            parser.error(f"--job is not JSON ({err})")
        job.run(desc, args.sim, args.exact, sys.stderr)
        return 0
    grid = _load_grid(args.grid)
    if args.cmd == "collect":
        from specsim.collect import collect

        collect(grid, args.results_dir, args.out)
    elif args.cmd == "tables":
        from specsim.tables import write_analyses

        write_analyses(grid, args.points, args.names, args.out_dir)
    elif args.cmd == "figures":
        from specsim.figures import make_figure

        for name in args.names:
            make_figure(grid, args.tables_dir, name, f"{args.out_dir}/{name}.pdf")
    elif args.cmd == "checks":
        from specsim.checks import run_checks

        run_checks(grid, args.tables_dir, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
