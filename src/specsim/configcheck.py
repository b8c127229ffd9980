"""``specsim check-config [FILE ...]``: every check the workflow makes of a config, before it runs.

Snakemake loads a ``--configfile`` itself before any workflow code runs, and where it cannot it
says only "not valid JSON or YAML", naming neither file nor line. This step reads each file as
the Snakefile would (:func:`specsim.configfile.check_config_files`: strict, bounded), merges
them in order as Snakemake does (a later file's keys override, mapping by mapping), then runs
the schema, the cross-field checks and the work estimate (:func:`specsim.config.load_grid`).
A bad config exits 1 with one line, ``config error: <file>: <problem>``; a good one prints the
studies and the work, as a run does. ``make run`` runs it before Snakemake.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

SCHEMA = "workflow/schemas/config.schema.yaml"  # relative to the repository root


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """The ``check-config`` sub-command of the ``specsim`` command line (:mod:`specsim.cli`)."""
    parser = sub.add_parser("check-config", help="check config files as the workflow would",
                            description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.set_defaults(run=run)
    parser.add_argument("files", nargs="*", default=["config.yaml"], metavar="FILE",
                        help="config files, in the order given to --configfile (default: "
                             "config.yaml)")
    parser.add_argument("--schema", default=SCHEMA, metavar="YAML",
                        help=f"the config schema (default: {SCHEMA}, from the repository root)")
    return parser


def merged(configs: list[dict[str, Any]]) -> dict[str, Any]:
    """The configs merged in order as Snakemake's ``update_config`` does: a mapping in a later
    config updates the mapping under the same key, any other value replaces it."""
    out: dict[str, Any] = {}
    for config in configs:
        todo = [(out, config)]
        while todo:  # depth is bounded by the files' checks (specsim.configfile.MAX_DEPTH)
            into, update = todo.pop()
            for key, value in update.items():
                if isinstance(value, dict):
                    if not isinstance(into.get(key), dict):
                        into[key] = {}
                    todo.append((into[key], value))
                else:
                    into[key] = value
    return out


def run(args: argparse.Namespace) -> int:
    from specsim.config import load_grid
    from specsim.configfile import check_config_files, read_config
    from specsim.errors import ConfigError
    from specsim.work import summary

    names = " + ".join(args.files)
    try:
        check_config_files(args.files)
        if not Path(args.schema).is_file():
            raise ConfigError(f"{args.schema}: no such schema file; run from the repository "
                              f"root or pass --schema")
        grid = load_grid(merged([read_config(f) for f in args.files]), args.schema)
    except ConfigError as err:
        text = str(err)
        where = "" if any(text.startswith(f"{f}: ") for f in [*args.files, args.schema]) else (
            f"{names}: ")
        print(f"config error: {where}{' '.join(text.split())}", file=sys.stderr)
        return 1
    print(f"config ok: {names}\n{summary(grid)}")
    return 0
