# specsim: speculative decoding, exact theory beside Monte Carlo, from one DAG.
#   config.yaml -> one job per grid point (results/sim/, results/exact/) -> collect -> tables
#   -> figures -> checks
from snakemake.utils import min_version

from specsim.configfile import refuse_bad_config_files

min_version("8.0")


# `--configfile other.yaml` replaces config.yaml (it does not extend it), so a config such as
# tests/data/tiny.yaml runs alone; `--config key=value` still overrides single keys. The run
# prints the studies it computes and the file each came from. config.yaml is checked before
# Snakemake loads it (Snakemake's own loader would say only "not valid JSON or YAML"); a
# --configfile Snakemake loads before this file runs: `specsim check-config FILE` checks it.
if not workflow.overwrite_configfiles:
    refuse_bad_config_files(["config.yaml"])

    configfile: "config.yaml"


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/simulate.smk"
include: "workflow/rules/aggregate.smk"
include: "workflow/rules/figures.smk"
include: "workflow/rules/checks.smk"
# The stages beside the grid, each when the config has its section (config.yaml has
# `realtext:`; `make llm` adds workflow/llm.yaml's `llm:`): each adds its files to STAGE_TARGETS.
include: "workflow/rules/stages.smk"


# The default target, and a job of every run: it has no output, so Snakemake runs it each time,
# when nothing else is out of date too, and it checks every file under results/ against its
# sidecar (bit rot with the mtime kept, which Snakemake cannot see): a damaged file fails the run
# with one line naming it, and the last line is the command rebuilding them all.
rule all:
    default_target: True
    input:
        all_inputs,  # the gate's results/checks.ok (after every other output), missing files
    log:
        "logs/verify.log",  # on failure Snakemake prints it (show-failed-logs, profiles/default)
    shell:
        "specsim verify --results-dir results 2> {log:q}"
