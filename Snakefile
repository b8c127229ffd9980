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
include: "workflow/rules/realtext.smk"
include: "workflow/rules/llm.smk"


rule all:
    default_target: True
    input:
        all_inputs,
        RT_TARGETS,
        LLM_TARGETS,
