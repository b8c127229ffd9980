# Everything that is not a rule: validation, the grid, target lists, wildcard constraints.
import sys

from snakemake.io import report as report_flag

from specsim.cli import put_on_path
from specsim.config import check_config_files, load_grid
from specsim.grid import POINT_REGEX, ConfigError
from specsim.job import describe, to_arg
from specsim.outputs import available_figures, available_tables

# The JSON schema (defaults filled in) plus cross-field checks, before any job runs.
try:
    check_config_files(
        [str(path) for path in workflow.configfiles]
    )  # e.g. duplicate keys
    GRID = load_grid(config, f"{workflow.basedir}/workflow/schemas/config.schema.yaml")
except ConfigError as err:
    sys.exit(f"config error: {err}")

# Jobs run the `specsim` command installed beside the Python that runs Snakemake (the pinned
# .venv; it need not be activated). On a cluster each job starts Snakemake again, which does the
# same. No absolute path enters a rule, a parameter or the report.
put_on_path()
TABLES = available_tables(GRID)
FIGURES = available_figures(GRID)


wildcard_constraints:
    point=POINT_REGEX,
    table=r"[a-z][a-z0-9_]*",
    figure=r"[a-z][a-z0-9_]*",


localrules:
    grid,
    gate,


def point_files(wildcards=None):
    """The Monte Carlo file of every grid point (its job also writes the exact file; a job
    with a missing output reruns, so listing one of the two is enough and halves DAG work).
    """
    return [f"results/sim/{p.path}.parquet" for p in GRID.points]


def point_job(wildcards):
    """The point job's description (JSON): its identity, budget, seed, numbers version."""
    return to_arg(describe(GRID, GRID.point_at(wildcards.point)))


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


def figure_outputs(ext):
    return [
        report_flag(
            f"results/figures/{name}.{ext}",
            caption=f"../report/{name}.rst",
            category="Figures",
            labels={"figure": name, "format": ext.upper()},
        )
        for name in FIGURES
    ]


def table_outputs():
    return [
        report_flag(
            f"results/tables/{name}.csv",
            caption="../report/tables.rst",
            category="Tables",
            labels={"table": name},
        )
        for name in TABLES
    ]


def all_cores(wildcards):
    """Every core the run was given (timing jobs want nothing beside them); 1 when a command
    such as --report or --lint runs without --cores."""
    try:
        return max(1, int(workflow.cores))
    except Exception:  # Snakemake raises when no --cores was given
        return 1


def report_figures(names, ext, category):
    """results/figures/<name>.<ext> for each name, flagged for the report under ``category``
    and captioned by workflow/report/<name>.rst (stages beside the grid: real text, LLM).
    """
    return [
        report_flag(
            f"results/figures/{name}.{ext}",
            caption=f"../report/{name}.rst",
            category=category,
            labels={"figure": name, "format": ext.upper()},
        )
        for name in names
    ]
