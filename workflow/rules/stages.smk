# The stages beside the grid: character n-grams on real text (`realtext:`, in config.yaml) and
# a real transformer on this CPU (`llm:`, opt-in: `make llm` adds workflow/llm.yaml). Each
# stage is one Snakemake rule per step, built from the step's declaration
# (specsim.pairs.realtext.steps, specsim.pairs.llm.steps: the files each step reads and writes
# and how it runs; specsim.outputs: its tables and figures) by specsim.stage_rules, and run as
# `specsim <stage> STEP`. Only the stages whose section the config has are included; each adds
# every file it builds to STAGE_TARGETS (rule all) and has a target rule of its own name
# (`snakemake llm`: the LLM tier alone).
import sys

from specsim.pairs.stages import STAGES
from specsim.stage_rules import stage_plan


def stage_outputs(spec):
    """The rule's outputs, its figures and HTML pages flagged for the report."""
    out = dict(spec.output)
    if spec.figures:
        out["pdf"], out["png"] = (
            [
                report_flag(
                    f"results/figures/{name}.{ext}",
                    caption=f"../report/figures/{name}.rst",
                    category=spec.category,
                    labels={"figure": name, "format": ext.upper()},
                )
                for name in spec.figures
            ]
            for ext in ("pdf", "png")
        )
    if spec.html:
        out["html"] = table_report(spec.html[0], spec.category, spec.html[1])
    if spec.pages:
        out["pages"] = [table_report(name) for name in spec.pages]
    return out


for stage in STAGES:
    if stage.name not in config:
        continue
    try:
        plan = stage_plan(stage, config)
    except ValueError as err:
        sys.exit(f"config error: {stage.name}: {err}")
    STAGE_TARGETS.extend(plan.targets)

    rule:
        name:
            stage.name
        input:
            plan.targets,
        localrule: True

    for spec in plan.rules:

        rule:
            name:
                spec.name
            input:
                **spec.input,
            output:
                **stage_outputs(spec),
            log:
                spec.log,
            benchmark:
                spec.benchmark or f"benchmarks/out/{spec.name}.tsv"
            wildcard_constraints:
                **spec.constraints,
            priority: spec.priority
            localrule: spec.local
            threads: all_cores if spec.threads == "all" else spec.threads
            resources:
                **spec.resources,
            params:
                command=spec.command,
            shell:
                "{params.command} 2> {log:q}"
