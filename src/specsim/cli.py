"""Command-line entry point: each pipeline step runs outside Snakemake too.

    specsim simulate  --grid results/grid.json --shard s0000 --out results/shards/s0000.parquet
    specsim exact     --grid results/grid.json --out results/exact/points.parquet
    specsim collect   --grid results/grid.json --exact ... --out results/points.parquet SHARD...
    specsim tables    --grid results/grid.json --points results/points.parquet --out-dir DIR NAME...
    specsim figures   --grid ... --tables-dir results/tables --out-dir results/figures NAME...
    specsim checks    --grid ... --tables-dir results/tables --out results/tables/checks.csv
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def _load_grid(path: str):  # type: ignore[no-untyped-def]
    from specsim.grid import Grid

    return Grid.from_json(json.loads(Path(path).read_text()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="specsim", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)

    s = sub.add_parser("simulate", help="simulate one shard of grid points")
    s.add_argument("--grid", required=True)
    s.add_argument("--shard", required=True)
    s.add_argument("--out", required=True)

    e = sub.add_parser("exact", help="exact values (closed forms, DP, enumeration) per point")
    e.add_argument("--grid", required=True)
    e.add_argument("--out", required=True)

    c = sub.add_parser("collect", help="join shards and exact values into per-point estimates")
    c.add_argument("--grid", required=True)
    c.add_argument("--exact", required=True)
    c.add_argument("--out", required=True)
    c.add_argument("shards", nargs="+")

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

    args = parser.parse_args(argv)
    if args.cmd == "gate":
        from specsim.checks import gate

        return gate(args.checks, args.out)
    grid = _load_grid(args.grid)
    if args.cmd == "simulate":
        from specsim.io import write_shard
        from specsim.simulate import simulate_shard

        if args.shard not in grid.shards:
            parser.error(f"--shard {args.shard!r} is not one of this grid's shards "
                         f"({grid.shards[0]}..{grid.shards[-1]})")
        write_shard(args.out, simulate_shard(grid, args.shard), grid.config_digest)
    elif args.cmd == "exact":
        from specsim.collect import exact_points

        exact_points(grid, args.out)
    elif args.cmd == "collect":
        from specsim.collect import collect

        collect(grid, args.shards, args.exact, args.out)
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
