# Everything that is not a rule: validation, the grid, target lists, wildcard constraints.
import shlex
import sys

from snakemake.io import report as report_flag

from specsim.config import check_config_files, load_grid
from specsim.grid import PATH_KEYS, ConfigError
from specsim.job import describe, to_arg
from specsim.tables import available_tables
from specsim.figures import available_figures

# The JSON schema (defaults filled in) plus cross-field checks, before any job runs.
try:
    check_config_files([str(path) for path in workflow.configfiles])  # e.g. duplicate keys
    GRID = load_grid(config, f"{workflow.basedir}/workflow/schemas/config.schema.yaml")
except ConfigError as err:
    sys.exit(f"config error: {err}")

# The package's CLI, run by the interpreter that runs Snakemake (venv need not be activated).
SPECSIM = f"{shlex.quote(sys.executable)} -m specsim.cli"
# A point's output path, Paramspace style: model~{model}/draft~{draft}/.../measure~{measure}
POINT = "/".join(f"{key}~{{{key}}}" for key in PATH_KEYS)
TABLES = available_tables(GRID)
FIGURES = available_figures(GRID)


wildcard_constraints:
    model=r"[a-z][a-z0-9_]*",
    draft=r"[^/]+",
    alpha=r"[^/]+",
    gamma=r"\d+",
    temperature=r"[^/]+",
    rule=r"[a-z][a-z0-9_]*",
    measure=r"long_run|equivalence",
    table=r"[a-z][a-z0-9_]*",
    figure=r"[a-z][a-z0-9_]*",


localrules:
    grid,
    gate,


def point_files(wildcards=None):
    """Both files of every grid point (Monte Carlo and exact)."""
    return [
        f"results/{kind}/{p.path}.parquet"
        for p in GRID.points
        for kind in ("sim", "exact")
    ]


def point_job(wildcards):
    """The point job's description (JSON): its identity, budget, seed, numbers version."""
    point = GRID.point_at("/".join(f"{key}~{wildcards[key]}" for key in PATH_KEYS))
    return to_arg(describe(GRID, point))


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
