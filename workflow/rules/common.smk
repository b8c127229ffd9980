# Everything that is not a rule: validation, the grid, target lists, wildcard constraints.
import shlex
import sys

from snakemake.utils import validate

from specsim.grid import ConfigError, build_grid
from specsim.tables import available_tables
from specsim.figures import available_figures

if not isinstance(config, dict) or not config:
    sys.exit("config error: the config must be a non-empty YAML mapping")
try:
    validate(config, "../schemas/config.schema.yaml")
    GRID = build_grid(config)
except ConfigError as err:
    sys.exit(f"config error: {err}")

# The package's CLI, run by the interpreter that runs Snakemake (venv need not be activated).
SPECSIM = f"{shlex.quote(sys.executable)} -m specsim.cli"
SHARDS = GRID.shards
TABLES = available_tables(GRID)
FIGURES = available_figures(GRID)


wildcard_constraints:
    shard=r"s\d{4}",
    table=r"[a-z][a-z0-9_]*",
    figure=r"[a-z][a-z0-9_]*",


localrules:
    grid,
    gate,


def shard_files(wildcards=None):
    return expand("results/shards/{shard}.parquet", shard=SHARDS)


def table_files(wildcards=None):
    return expand("results/tables/{table}.csv", table=TABLES)


def all_targets():
    return [
        *table_files(),
        *expand("results/figures/{figure}.pdf", figure=FIGURES),
        *expand("results/figures/{figure}.png", figure=FIGURES),
        "results/tables/checks.csv",
        "results/checks.ok",
    ]
