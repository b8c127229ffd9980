"""Two steps of the workflow that write the run's own records: ``specsim grid`` (the grid file,
results/grid.json, from the validated config) and ``specsim manifest`` (results/manifest.txt,
every file the run builds).

They are steps, not Snakemake ``run:`` blocks: Snakemake runs a ``run:`` block in a Snakemake
process of its own, which imports Snakemake and parses the whole workflow again (~2 CPU s, and
the manifest's is on the run's last stretch); a step is one short ``specsim`` process.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from specsim.errors import InputError


def point_outputs(grid: Any, base: str = "results") -> list[str]:
    """Both files of every grid point (the point job's outputs), Monte Carlo then exact."""
    return [str(Path(base) / kind / f"{p.path}.parquet") for p in grid.points
            for kind in ("sim", "exact")]


def add_parsers(sub: Any, grid_file: Any) -> None:
    """``grid`` and ``manifest`` on the CLI's sub-parsers (``grid_file``: its --grid type)."""
    g = sub.add_parser("grid", help="the grid file: every point of the validated config",
                       description="Write the grid file (the validated config, its digest, "
                                   "every point, the software versions, sealed) from the "
                                   "config the workflow validated.")
    g.add_argument("--config", required=True, type=_config, metavar="JSON",
                   help="the validated config, as JSON (the workflow passes it)")
    g.add_argument("--out", required=True, metavar="FILE", help="output (results/grid.json)")
    g.set_defaults(run=_grid)
    m = sub.add_parser("manifest", help="list every file the run builds (results/manifest.txt)",
                       description="Write the manifest: FILEs and both files of every point of "
                                   "--grid, one a line, sorted, sealed.")
    m.add_argument("--grid", required=True, type=grid_file, metavar="FILE",
                   help="the grid file (results/grid.json): its points' files are listed")
    m.add_argument("--out", required=True, metavar="FILE", help="output (results/manifest.txt)")
    m.add_argument("files", nargs="*", metavar="FILE", help="the run's other files")
    m.set_defaults(run=_manifest)


def _config(text: str) -> dict[str, Any]:
    try:
        config = json.loads(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"not JSON ({err})") from None
    if not isinstance(config, dict):
        raise argparse.ArgumentTypeError("not a JSON object")
    return config


def _grid(args: argparse.Namespace) -> int:
    from specsim.config import write_grid_file
    from specsim.errors import ConfigError
    from specsim.grid import build_grid

    try:
        grid = build_grid(args.config)
    except ConfigError as err:
        raise InputError(f"argument --config: {err}") from None
    write_grid_file(args.out, grid)
    print(f"done: grid, {len(grid.points)} points -> {args.out}", file=sys.stderr, flush=True)
    return 0


def _manifest(args: argparse.Namespace) -> int:
    from specsim.integrity import write_manifest

    files = [*args.files, *point_outputs(args.grid)]
    write_manifest(args.out, files)
    print(f"done: manifest, {len(set(files))} files -> {args.out}", file=sys.stderr, flush=True)
    return 0
