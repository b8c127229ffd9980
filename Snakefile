# specsim: speculative decoding, exact theory beside Monte Carlo, from one DAG.
#   config.yaml -> one job per grid point (results/sim/, results/exact/) -> collect -> tables
#   -> figures -> checks
from snakemake.utils import min_version

min_version("8.0")


# `--configfile other.yaml` replaces config.yaml (it does not extend it), so a config such as
# tests/data/tiny.yaml runs alone; `--config key=value` still overrides single keys. The run
# prints the studies it computes and the file each came from.
if not workflow.overwrite_configfiles:

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
