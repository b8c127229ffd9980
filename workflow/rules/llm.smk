# A real transformer on this CPU (tier 2, opt-in): SmolLM2-135M-Instruct as the target;
# token n-gram, int8 and layer-skipping drafts. corpus -> alpha, costs -> speculative, assisted
# (specsim's loop beside transformers' assisted generation); lossless (both loops);
# device -> intensity; figures; machine.json (the run's record). Included when the config has
# an `llm:` section -- config.yaml has none; `make llm` adds workflow/llm.yaml and installs the
# `llm` extra. Which settings each step reads: specsim.pairs.llm.settings (imports nothing heavy:
# Snakemake reads it at every parse); the tables and figures each step writes: their
# declarations (specsim.outputs.llm, .llm_pairs); each step: `specsim llm STEP`, built from its
# Step entry (specsim.pairs.llm.steps), writing its declared tables under results/.
# Every step times something or loads the 135M model: the timing steps ask for every core so
# that nothing runs beside them; the others for the torch threads they use.
import sys

from specsim.pairs.llm import settings as llm_settings

LLM_CONFIG = config["llm"]
# The schema checks each key; the cross-field checks (drafts among the drafts built) run here.
try:
    LLM = llm_settings.Settings.from_dict({**LLM_CONFIG, "seed": config["seed"]})
except ValueError as err:
    sys.exit(f"config error: llm: {err}")
# JSON of the settings each step reads (so only changes to those re-run it).
LLM_SETTINGS = llm_settings.step_settings(LLM_CONFIG, config["seed"])
# Everything the stage builds, listed by `rule all` and the `llm` target (make llm), and every
# intermediate (a deleted one is rebuilt): the declared tables and figures too.
LLM_TARGETS = [
    "results/llm/machine.json",
    "results/llm/corpus.npz",
    "results/llm/corpus.json",
    "results/llm/device.json",
    "results/llm/assisted.html",
    *step_files("llm"),
    *expand(
        "results/llm/{kind}/{pair}.{ext}",
        zip,
        kind=["traces", "pairs", "pairs"] * len(LLM.trace_pairs),
        pair=[p for p in LLM.trace_pairs for _ in range(3)],
        ext=["parquet", "csv", "md"] * len(LLM.trace_pairs),
    ),
    "results/llm/engine_counts.json",
]
STAGE_TARGETS.extend(LLM_TARGETS)


localrules:
    llm,
    llm_machine,


# `snakemake llm --configfile config.yaml workflow/llm.yaml`: the LLM tier alone (what `make llm`
# runs).
rule llm:
    input:
        LLM_TARGETS,


# The first step loads the model -- converting the GGUF file into the cache the first time
# ($SPECSIM_LLM_CACHE, default ~/.cache/specsim), so no later step converts it -- and saves the
# tier-1 corpus in its tokens for the others.
rule llm_corpus:
    output:
        corpus="results/llm/corpus.npz",
        meta="results/llm/corpus.json",
    log:
        "logs/llm/corpus.log",
    benchmark:
        "benchmarks/out/llm_corpus.tsv"
    threads: LLM.threads
    resources:
        mem_mb=3000,
        runtime=10,
    params:
        settings=LLM_SETTINGS["corpus"],
    shell:
        "specsim llm --settings {params.settings:q} corpus --out {output.corpus:q} "
        "--meta {output.meta:q} 2> {log:q}"


rule llm_device:
    output:
        device="results/llm/device.json",
        tables=step_files("llm", "device"),
    log:
        "logs/llm/device.log",
    benchmark:
        "benchmarks/out/llm_device.tsv"
    threads: all_cores
    resources:
        mem_mb=3000,
        runtime=5,
    params:
        settings=LLM_SETTINGS["device"],
    shell:
        "specsim llm --settings {params.settings:q} device --out {output.device:q} "
        "2> {log:q}"


rule llm_alpha:
    input:
        corpus=rules.llm_corpus.output.corpus,
    output:
        tables=step_files("llm", "alpha"),
    log:
        "logs/llm/alpha.log",
    benchmark:
        "benchmarks/out/llm_alpha.tsv"
    threads: LLM.threads
    resources:
        mem_mb=4000,
        runtime=20,
    params:
        settings=LLM_SETTINGS["alpha"],
    shell:
        "specsim llm --settings {params.settings:q} alpha --corpus {input.corpus:q} "
        "2> {log:q}"


rule llm_costs:
    input:
        corpus=rules.llm_corpus.output.corpus,
    output:
        tables=step_files("llm", "costs"),
    log:
        "logs/llm/costs.log",
    benchmark:
        "benchmarks/out/llm_costs.tsv"
    threads: all_cores
    resources:
        mem_mb=4000,
        runtime=20,
    params:
        settings=LLM_SETTINGS["costs"],
    shell:
        "specsim llm --settings {params.settings:q} costs --corpus {input.corpus:q} "
        "2> {log:q}"


rule llm_intensity:
    input:
        device=rules.llm_device.output.device,
        costs=declared("llm_costs"),
    output:
        tables=step_files("llm", "intensity"),
    log:
        "logs/llm/intensity.log",
    benchmark:
        "benchmarks/out/llm_intensity.tsv"
    resources:
        mem_mb=1000,
        runtime=5,
    params:
        settings=LLM_SETTINGS["intensity"],
    shell:
        "specsim llm --settings {params.settings:q} intensity --device {input.device:q} "
        "--costs {input.costs:q} 2> {log:q}"


rule llm_speculative:
    input:
        corpus=rules.llm_corpus.output.corpus,
        costs=declared("llm_costs"),
        alpha=declared("llm_alpha"),
    output:
        tables=step_files("llm", "speculative"),
    log:
        "logs/llm/speculative.log",
    benchmark:
        "benchmarks/out/llm_speculative.tsv"
    threads: all_cores
    resources:
        mem_mb=4000,
        runtime=30,
    params:
        settings=LLM_SETTINGS["speculative"],
    shell:
        "specsim llm --settings {params.settings:q} speculative --corpus {input.corpus:q} "
        "--costs {input.costs:q} --alpha {input.alpha:q} 2> {log:q}"


# The same target / draft pair through specsim's loop and transformers' own assisted generation
# (model.generate(..., assistant_model=draft)): its default draft-length policy and a fixed γ.
# The table is also rendered as HTML for the report (columns: its declaration in specsim.outputs).
rule llm_assisted:
    input:
        corpus=rules.llm_corpus.output.corpus,
        costs=declared("llm_costs"),
    output:
        tables=step_files("llm", "assisted"),
        html=table_report(
            "llm_assisted",
            category="LLM on this CPU",
            path="results/llm/assisted.html",
        ),
    log:
        "logs/llm/assisted.log",
    benchmark:
        "benchmarks/out/llm_assisted.tsv"
    threads: all_cores
    resources:
        mem_mb=4000,
        runtime=30,
    params:
        settings=LLM_SETTINGS["assisted"],
    shell:
        "specsim llm --settings {params.settings:q} assisted --corpus {input.corpus:q} "
        "--costs {input.costs:q} --html {output.html:q} 2> {log:q}"


rule llm_lossless:
    input:
        corpus=rules.llm_corpus.output.corpus,
    output:
        tables=step_files("llm", "lossless"),
    log:
        "logs/llm/lossless.log",
    benchmark:
        "benchmarks/out/llm_lossless.tsv"
    threads: LLM.threads
    resources:
        mem_mb=4000,
        runtime=20,
    params:
        settings=LLM_SETTINGS["lossless"],
        significance=config["significance"],
    shell:
        "specsim llm --settings {params.settings:q} --significance {params.significance} "
        "lossless --corpus {input.corpus:q} 2> {log:q}"


# transformers' assisted generation with sampling warpers (its defaults, top-k / top-p,
# temperature) against the exact law of the first two tokens, each verdict beside the TV it
# detects at power 0.9 (specsim.pairs.llm.audit).
rule llm_audit:
    input:
        corpus=rules.llm_corpus.output.corpus,
    output:
        tables=step_files("llm", "audit"),
    log:
        "logs/llm/audit.log",
    benchmark:
        "benchmarks/out/llm_audit.tsv"
    threads: LLM.threads
    resources:
        mem_mb=4000,
        runtime=30,
    params:
        settings=LLM_SETTINGS["audit"],
        significance=config["significance"],
    shell:
        "specsim llm --settings {params.settings:q} --significance {params.significance} "
        "audit --corpus {input.corpus:q} 2> {log:q}"


rule llm_figures:
    input:
        tables=declared_inputs("llm", "figures"),
    output:
        pdf=report_figures("llm", "figures", "pdf", "LLM on this CPU"),
        png=report_figures("llm", "figures", "png", "LLM on this CPU"),
    log:
        "logs/llm/figures.log",
    benchmark:
        "benchmarks/out/llm_figures.tsv"
    shell:
        "specsim llm figures 2> {log:q}"


# The run's record, written last: every setting, versions, the CPU, the model and the corpus.
rule llm_machine:
    input:
        corpus=rules.llm_corpus.output.meta,
        device=rules.llm_device.output.device,
        tables=[t.path for t in stage_tables("llm")],
    output:
        "results/llm/machine.json",
    log:
        "logs/llm/machine.log",
    params:
        settings=LLM_SETTINGS["machine"],
    shell:
        "specsim llm --settings {params.settings:q} machine --corpus-meta {input.corpus:q} "
        "--device {input.device:q} --out {output:q} 2> {log:q}"


# The pairs the tier runs, traced and measured: one trace job and one runs job per
# pair (the wildcard; an edit to the trace settings reruns each, adding a pair runs only it),
# then the two tables and their figures. The runs are timed: they ask for every core.
rule llm_trace:
    input:
        corpus=rules.llm_corpus.output.corpus,
    output:
        "results/llm/traces/{pair}.parquet",
    log:
        "logs/llm/trace_{pair}.log",
    benchmark:
        "benchmarks/out/llm_trace_{pair}.tsv"
    wildcard_constraints:
        pair="|".join(LLM.trace_pairs),
    threads: LLM.threads
    resources:
        mem_mb=4000,
        runtime=20,
    params:
        settings=LLM_SETTINGS["trace"],
    shell:
        "specsim llm --settings {params.settings:q} trace --corpus {input.corpus:q} "
        "--pair {wildcards.pair:q} --out {output:q} 2> {log:q}"


rule llm_pair:
    input:
        corpus=rules.llm_corpus.output.corpus,
    output:
        csv="results/llm/pairs/{pair}.csv",
        md="results/llm/pairs/{pair}.md",
    log:
        "logs/llm/pair_{pair}.log",
    benchmark:
        "benchmarks/out/llm_pair_{pair}.tsv"
    wildcard_constraints:
        pair="|".join(LLM.trace_pairs),
    threads: all_cores
    resources:
        mem_mb=4000,
        runtime=30,
    params:
        settings=LLM_SETTINGS["pair"],
    shell:
        "specsim llm --settings {params.settings:q} pair --corpus {input.corpus:q} "
        "--pair {wildcards.pair:q} --out {output.csv:q} 2> {log:q}"


rule llm_pairs:
    input:
        traces=expand(rules.llm_trace.output[0], pair=LLM.trace_pairs),
        runs=expand(rules.llm_pair.output.csv, pair=LLM.trace_pairs),
        costs=declared("llm_costs"),
    output:
        tables=step_files("llm", "pairs", figures=False),
        pdf=report_figures("llm", "pairs", "pdf", "LLM on this CPU"),
        png=report_figures("llm", "pairs", "png", "LLM on this CPU"),
    log:
        "logs/llm/pairs.log",
    benchmark:
        "benchmarks/out/llm_pairs.tsv"
    resources:
        mem_mb=3000,
        runtime=10,
    params:
        settings=LLM_SETTINGS["pairs"],
    shell:
        "specsim llm --settings {params.settings:q} pairs --traces-dir results/llm/traces "
        "--runs-dir results/llm/pairs --costs {input.costs:q} 2> {log:q}"


# The engine-metrics schedule checked on this CPU. The batched loop
# (specsim.pairs.llm.batched) records acceptance counters at one K and a latency profile, the schedule
# predicts the best K' per batch size, and the loop's throughput is measured at every K' and
# batch size (configurations interleaved within each repeat): specsim.pairs.llm.engine_check. The
# same runs at K' = 0 and K calibrate the cost, tested on the other K' (engine_calibration).
# Timed throughout: it asks for every core.
rule llm_engine:
    input:
        corpus=rules.llm_corpus.output.corpus,
    output:
        tables=step_files("llm", "engine"),
        counts="results/llm/engine_counts.json",
    log:
        "logs/llm/engine.log",
    benchmark:
        "benchmarks/out/llm_engine.tsv"
    threads: all_cores
    resources:
        mem_mb=4000,
        runtime=30,
    params:
        settings=LLM_SETTINGS["engine"],
    shell:
        "specsim llm --settings {params.settings:q} engine --corpus {input.corpus:q} "
        "--counts {output.counts:q} 2> {log:q}"
