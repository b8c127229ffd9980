# Everything that is not a rule: validation, the grid, target lists, wildcard constraints.
import gc
import json
import logging
import os
import sys

from snakemake.io import report as report_flag

from specsim import runfiles
from specsim.process import put_on_path
from specsim.config import load_grid, stale_provenance, study_sources
from specsim.configfile import check_config_files
from specsim.work import declared_mb, declared_minutes, summary
from specsim.errors import ConfigError
from specsim.io.reserve import room_to_start, run_guard
from specsim.grid import POINT_REGEX
from specsim.integrity import RERUN_ENV, snakemake_command, verify_inputs
from specsim.job import describe, to_arg
from specsim.outputs import (
    REALTEXT_TABLES,
    available_figures,
    available_tables,
    stage_figures,
    stage_tables,
    step_files,
    table,
)

# A full disk stops the run here with one line: Snakemake's own locks and logs would fail
# first, each with a traceback ("--- Logging error ---"). A disk that fills during the run ends
# the job writing with one line naming the file (specsim's CLI), which frees the room the run
# held for Snakemake's metadata (specsim.io.reserve), so the run ends as a failed run and its
# last line is the job's; Snakemake's log handler drops what it cannot write instead of
# printing tracebacks. Only the main process checks: a job's own Snakemake process (on a
# cluster) re-reads this file after the main one made its locks and logs, and would stop with no
# log.
if workflow.is_main_process:
    if no_room_here := room_to_start("."):
        sys.exit(f"specsim: {no_room_here}")
    DISK = run_guard(".")


onstart:
    DISK.start()
    # what a damage report names to rebuild, in this run's jobs too
    os.environ[RERUN_ENV] = rerun_command()
    refuse_damaged_inputs()


onsuccess:
    DISK.ended(failed=False)


onerror:
    DISK.ended(failed=True)


logging.raiseExceptions = False

# The JSON schema (defaults filled in) plus cross-field checks, before any job runs.
try:
    check_config_files(
        [str(path) for path in workflow.configfiles]
    )  # duplicate keys, ...
    GRID = load_grid(config, f"{workflow.basedir}/workflow/schemas/config.schema.yaml")
except ConfigError as err:
    sys.exit(f"config error: {err}")


def announce_studies():
    """The studies the run computes, the file each came from and the work estimate, on stderr
    once, while the DAG of the whole run is built (manifest_inputs): not for a single target
    (a bad one stops with one line naming it), nor in a job's own Snakemake process."""
    if workflow.remote_exec or workflow.subprocess_exec or ANNOUNCED:
        return
    ANNOUNCED.append(True)
    sources = study_sources([str(p) for p in workflow.configfiles], config)
    print(f"specsim: studies\n{summary(GRID, sources)}", file=sys.stderr)


ANNOUNCED = []

# Jobs run the `specsim` command installed beside the Python that runs Snakemake (the pinned
# .venv; it need not be activated). On a cluster each job starts Snakemake again, which does the
# same. No absolute path enters a rule, a parameter or the report.
put_on_path()
TABLES = available_tables(GRID)
FIGURES = available_figures(GRID)

# A 10^5-point DAG holds millions of objects that Snakemake builds once and keeps until the run
# ends (jobs, their files, wildcards, parameters). CPython's cyclic collector walks the young
# ones every 700 allocations and all of them again as they age: ~19% of a 10^5-point dry run's
# CPU time. The grid, built by now and kept as long, is frozen out of its walks, and the
# collector runs after 50,000 new objects.
gc.freeze()
gc.set_threshold(50_000, 20, 20)


wildcard_constraints:
    point=POINT_REGEX,
    table=r"[a-z][a-z0-9_]*",
    figure=r"[a-z][a-z0-9_]*",


localrules:
    all,
    grid,
    manifest,
    gate,


# Every file the stages beside the grid build (workflow/rules/stages.smk: each stage,
# included when the config enables it, adds its own).
STAGE_TARGETS = []


def point_files(wildcards=None):
    """The Monte Carlo file of every grid point (its job also writes the exact file; a job
    with a missing output reruns, so listing one of the two is enough and halves DAG work).
    """
    return [f"results/sim/{p.path}.parquet" for p in GRID.points]


def point_outputs():
    """Both files of every grid point. The `all` target lists them. Snakemake rebuilds a
    missing file only for a job that runs, and `all` runs when one of its inputs is missing, so a
    deleted sim or exact file is regenerated (and what reads it rerun)."""
    return runfiles.point_outputs(GRID)


def grid_config(wildcards=None):
    """The validated config as JSON, in its own key order (the studies' order is the tables'):
    what `specsim grid` builds the grid file from."""
    return json.dumps(GRID.config, separators=(",", ":"))


def grid_point(wildcards):
    """The grid point a target names; a path that is no point of this config's grid stops the
    run with one line naming it (SystemExit: Snakemake wraps an exception from an input
    function in a traceback block, not an exit)."""
    try:
        return GRID.point_at(wildcards.point)
    except ConfigError:
        sys.exit(
            f"target error: {wildcards.point}: not a point of this config's grid (a target "
            f"results/sim/<point>.parquet or results/exact/<point>.parquet names one; its "
            f"points are listed in results/grid.json)"
        )


def point_job(wildcards):
    """The point job's description (JSON): its identity, budget, seed, numbers version."""
    return to_arg(describe(GRID, grid_point(wildcards)))


def point_mem_mb(wildcards):
    """The memory (MB) the point job declares: its estimated peak, at least 500 MB
    (specsim.work.declared_mb)."""
    return declared_mb(GRID, grid_point(wildcards))


def point_runtime(wildcards):
    """The wall-clock minutes the point job declares: twice its estimated core-seconds, at
    least 2 (specsim.work.declared_minutes)."""
    return declared_minutes(GRID, grid_point(wildcards))


def point_inputs(wildcards):
    """Files the point's model reads that a job of the DAG writes (a trace model's recorded
    trace at the point's temperature, specsim.families.Family.inputs); none for other models.
    """
    point = grid_point(wildcards)
    return list(point.family.inputs(point.spec, point.temperature))


def table_files(wildcards=None):
    return expand("results/tables/{table}.csv", table=TABLES)


def checked_stage_tables(wildcards=None):
    """Tables of the real-text stage whose claims the checks re-test (predicted vs measured
    tokens per call of each n-gram pair), when the config has that stage."""
    return ["results/tables/pair_accept.csv"] if "realtext" in config else []


def refuse_stale_results():
    """Under `--rerun-triggers` without 'params' a config edit would rerun nothing and leave
    the old config's results in place with exit status 0: stop instead (checked while the
    DAG is built, when the triggers are known)."""
    triggers = {str(t.name).lower() for t in workflow.rerun_triggers}
    stale = stale_provenance("results/grid.json", GRID.config_digest, triggers)
    if stale:
        sys.exit(f"config error: {stale}")


def refuse_damaged_inputs():
    """Before any job runs: a damaged file under results/ that a job of this run would read
    (and none rewrites) stops the run, every such file named with the command rebuilding them,
    as the final check would name them; a job reading one would name only the first it met,
    below its whole input list (specsim.integrity.verify_inputs)."""
    jobs = list(workflow.dag.needrun_jobs())
    reads = {os.path.normpath(f) for job in jobs for f in job.input}
    rebuilt = {os.path.normpath(f) for job in jobs for f in job.output}
    if verify_inputs("results", reads, rebuilt):
        sys.exit(1)


def html_files():
    """The HTML rendering of every table the run writes (what the report shows)."""
    names = [*TABLES, "checks", *(REALTEXT_TABLES if "realtext" in config else [])]
    return expand("results/tables/{table}.html", table=names)


def all_targets(points=True):
    """Every file the grid's part of the DAG writes (a deleted one is rebuilt: point_outputs)
    but the gate's and the manifest's; without the point files when ``points`` is false (what
    reads them all, results/points.parquet, waits for them)."""
    return [
        "results/grid.json",
        *(point_outputs() if points else []),
        "results/points.parquet",
        *table_files(),
        *expand("results/tables/{table}.{ext}", table=TABLES, ext=["md", "csv.sha256"]),
        *html_files(),
        *expand("results/figures/{figure}.pdf", figure=FIGURES),
        *expand("results/figures/{figure}.png", figure=FIGURES),
        *expand("results/tables/checks.{ext}", ext=["csv", "md", "csv.sha256"]),
    ]


def all_inputs(wildcards):
    """results/checks.ok and, once a run has written the manifest, every file of the run that is
    missing: Snakemake rebuilds a missing intermediate only for a job that runs, and `all`
    always runs (a job waiting for the manifest would not). Only missing files are listed, so
    the job prints a short list; on a first run the manifest job waits for every file anyway.
    """
    if not os.path.exists("results/manifest.txt"):
        return ["results/checks.ok"]
    return ["results/checks.ok", *(f for f in built_files() if not os.path.exists(f))]


def built_files(points=True):
    """Every file the run builds but the manifest and results/checks.ok: what the manifest
    lists (specsim.integrity.MANIFEST); without the point files when ``points`` is false.
    """
    return [*all_targets(points), *STAGE_TARGETS]


def manifest_inputs(wildcards):
    """What the manifest job waits for: every file the run builds (the gate and `all` wait for
    the manifest, and so list one input, not thousands), the point files through
    results/points.parquet, which reads them all (so the job's input list, printed whenever it
    runs, does not name every point twice)."""
    refuse_stale_results()
    announce_studies()
    return built_files(points=False)


def figure_outputs(ext):
    return [
        report_flag(
            f"results/figures/{name}.{ext}",
            caption=f"../report/figures/{name}.rst",
            category="Figures",
            labels={"figure": name, "format": ext.upper()},
        )
        for name in FIGURES
    ]


def table_report(name, category="Tables", path=None):
    """Register table ``name`` in the report. Any rule writing the table lists the returned
    file among its outputs and writes it (specsim.report.write_html, or `specsim html` for a
    CSV another rule wrote).

    The file is the table's HTML rendering (``path``, default results/tables/<name>.html),
    which the report shows inline (a CSV it only offers as a download). Its caption is
    workflow/report/tables/<name>.rst, written by `python -m specsim.report` from the
    table's declaration in specsim.outputs, where its columns are described. The report's menu lists
    categories alphabetically: "Checks" comes first, then "Figures", "Real text", "Tables".
    """
    return report_flag(
        path or f"results/tables/{name}.html",
        caption=os.path.join(
            workflow.basedir, "workflow", "report", "tables", f"{name}.rst"
        ),
        category=category,
        labels={"table": name},
    )


def all_cores(wildcards):
    """Every core the run was given (timing jobs want nothing beside them); 1 when a command
    such as --report or --lint runs without --cores."""
    try:
        return max(1, int(workflow.cores))
    except Exception:  # Snakemake raises when no --cores was given
        return 1


def rerun_command():
    """This run's snakemake command, for a damage report's rebuild line
    (specsim.integrity.snakemake_command)."""
    return snakemake_command(
        workflow.main_snakefile,
        os.getcwd(),
        workflow.overwrite_configfiles,
        all_cores(None),
    )


def report_figures(stage, step, ext, category):
    """results/figures/<name>.<ext> of each figure a stage's step declares
    (specsim.outputs.realtext, .llm), flagged for the report under ``category`` and captioned
    by workflow/report/figures/<name>.rst (written from the declaration, as the grid's are).
    """
    return [
        report_flag(
            f"results/figures/{f.name}.{ext}",
            caption=f"../report/figures/{f.name}.rst",
            category=category,
            labels={"figure": f.name, "format": ext.upper()},
        )
        for f in stage_figures(stage, step)
    ]


def declared(name, ext=".csv"):
    """Where the declared table ``name`` lives (specsim.outputs), ``.csv`` or its ``.md``."""
    return table(name).markdown if ext == ".md" else table(name).path


def declared_inputs(stage, step):
    """The declared tables a stage's step's figures read (their declarations' ``reads``)."""
    return sorted(
        {declared(name) for f in stage_figures(stage, step) for name in f.reads}
    )
