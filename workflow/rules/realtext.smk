# Real language models (tier 1): character n-grams trained on the English text every
# Python ships (pydoc topics + stdlib docstrings). corpus -> model -> speculative / lossless /
# costs -> figures. Included when the config has a `realtext:` section (config.yaml does; keys
# documented in the schema). Which settings each step reads: specsim.realtext_settings (imports
# nothing heavy: Snakemake reads it at every parse); the tables and figures each step writes:
# their declarations (specsim.outputs.realtext); each step: `specsim realtext STEP`, built from
# its Step entry (specsim.pairs.realtext.steps), writing its declared tables under results/.
import sys

from specsim import realtext_settings
from specsim.acceptance.latency import profile_of

RT_CONFIG = config["realtext"]
# The schema checks each key; the cross-field checks (draft orders below the target's, contexts
# long enough, costs.gamma within speculative.gamma) and the engine route's latency profile (a
# file or the roofline: it must cover its batch sizes and draft lengths) are checked here,
# naming the key, the file or the cell, before any job starts.
try:
    RT_CHECKED = realtext_settings.Settings.from_dict(RT_CONFIG)
except ValueError as err:
    sys.exit(f"config error: realtext: {err}")
try:
    profile_of(
        RT_CHECKED.engine_latency,
        RT_CHECKED.engine_roofline,
        RT_CHECKED.engine_batch,
        RT_CHECKED.engine_max_gamma,
    )
except ValueError as err:
    sys.exit(f"config error: realtext.engine: {err}")
# JSON of the config sections each step reads (so only changes to those re-run it).
RT_SETTINGS = realtext_settings.step_settings(RT_CONFIG)
RT_PAIRS = realtext_settings.trace_pairs(RT_CONFIG)
# The traces of the n-gram pairs (one file per draft order; the `trace` family reads them).
RT_TRACES = expand(realtext_settings.TRACE_PATH, pair=RT_PAIRS)
# The same pairs' traces at the other sampling temperatures of trace.temperatures (one job
# each: results/traces/<pair>_T<temperature>.parquet; trace models run at those temperatures).
RT_TEMPERED_TRACES = [
    realtext_settings.tempered_trace_path(pair, t)
    for t in realtext_settings.trace_temperatures(RT_CONFIG)
    for pair in RT_PAIRS
]
# Each pair's measured runs' acceptance counters, in vLLM's Prometheus format (the engine route).
RT_COUNTERS = expand(realtext_settings.ENGINE_COUNTERS, pair=RT_PAIRS)
# The engine route's latency profile, when the config names a file (else the roofline).
RT_LATENCY = [RT_CHECKED.engine_latency] if RT_CHECKED.engine_latency else []
# Everything the stage builds, listed by the Snakefile's `rule all` (and every intermediate:
# a deleted one is rebuilt): the declared tables (CSV, Markdown) and figures (PDF, PNG) too.
STAGE_TARGETS.extend(
    [
        "results/realtext/corpus.json",
        "results/realtext/corpus.npz",
        "results/realtext/model.npz",
        *RT_TRACES,
        *RT_TEMPERED_TRACES,
        *step_files("realtext"),
        *RT_COUNTERS,
        realtext_settings.ENGINE_CONFIG,
    ]
)


rule realtext_corpus:
    output:
        corpus="results/realtext/corpus.npz",
        meta="results/realtext/corpus.json",
    log:
        "logs/realtext/corpus.log",
    benchmark:
        "benchmarks/out/realtext_corpus.tsv"
    priority: 1  # before the point jobs: this chain runs beside them, not after
    resources:
        mem_mb=1500,
        runtime=5,
    params:
        settings=RT_SETTINGS["corpus"],
    shell:
        "specsim realtext --settings {params.settings:q} corpus --out {output.corpus:q} "
        "--meta {output.meta:q} 2> {log:q}"


rule realtext_model:
    input:
        corpus=rules.realtext_corpus.output.corpus,
    output:
        model="results/realtext/model.npz",
        tables=step_files("realtext", "model"),
    log:
        "logs/realtext/model.log",
    benchmark:
        "benchmarks/out/realtext_model.tsv"
    priority: 1  # before the point jobs: this chain runs beside them, not after
    resources:
        mem_mb=1500,
        runtime=5,
    params:
        settings=RT_SETTINGS["model"],
    shell:
        "specsim realtext --settings {params.settings:q} model --corpus {input.corpus:q} "
        "--out {output.model:q} 2> {log:q}"


rule realtext_speculative:
    input:
        corpus=rules.realtext_corpus.output.corpus,
        model=rules.realtext_model.output.model,
        models=declared("realtext_models"),
    output:
        tables=step_files("realtext", "speculative"),
    log:
        "logs/realtext/speculative.log",
    benchmark:
        "benchmarks/out/realtext_speculative.tsv"
    priority: 1  # before the point jobs: this chain runs beside them, not after
    resources:
        mem_mb=1500,
        runtime=10,
    params:
        settings=RT_SETTINGS["speculative"],
        seed=config["seed"],
    shell:
        "specsim realtext --settings {params.settings:q} --seed {params.seed} speculative "
        "--corpus {input.corpus:q} --model {input.model:q} --models-table {input.models:q} "
        "2> {log:q}"


rule realtext_lossless:
    input:
        corpus=rules.realtext_corpus.output.corpus,
        model=rules.realtext_model.output.model,
    output:
        tables=step_files("realtext", "lossless"),
    log:
        "logs/realtext/lossless.log",
    benchmark:
        "benchmarks/out/realtext_lossless.tsv"
    priority: 1  # before the point jobs: this chain runs beside them, not after
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        settings=RT_SETTINGS["lossless"],
        seed=config["seed"],
        significance=config["significance"],
    shell:
        "specsim realtext --settings {params.settings:q} --seed {params.seed} "
        "--significance {params.significance} lossless --corpus {input.corpus:q} "
        "--model {input.model:q} 2> {log:q}"


# Traces of the n-gram pairs: text the target generates from held-out prompts, with the target's
# and every draft's next-character distributions at each position. Resumable: a killed job
# leaves finished blocks of documents in results/traces/<pair>.parquet.parts/, reused on rerun.
rule realtext_record:
    input:
        corpus=rules.realtext_corpus.output.corpus,
        model=rules.realtext_model.output.model,
    output:
        traces=RT_TRACES,
    log:
        "logs/realtext/record.log",
    benchmark:
        "benchmarks/out/realtext_record.tsv"
    priority: 1  # before the point jobs: this chain runs beside them, not after
    resources:
        mem_mb=realtext_settings.record_memory_mb(RT_CONFIG),
        runtime=10,
    params:
        settings=RT_SETTINGS["record"],
        seed=config["seed"],
        out_dir=trace_dir,
    shell:
        "specsim realtext --settings {params.settings:q} --seed {params.seed} record "
        "--corpus {input.corpus:q} --model {input.model:q} --out-dir {params.out_dir:q} "
        "2> {log:q}"


# The pairs' traces at another sampling temperature: both models' rows tempered, the text
# sampled from the tempered target (specsim.pairs.realtext.record). Resumable as realtext_record.
rule realtext_record_tempered:
    input:
        corpus=rules.realtext_corpus.output.corpus,
        model=rules.realtext_model.output.model,
    output:
        traces=expand(
            realtext_settings.TEMPERED_TRACE_PATH,
            pair=RT_PAIRS,
            temperature="{temperature}",
        ),
    log:
        "logs/realtext/record_T{temperature}.log",
    benchmark:
        "benchmarks/out/realtext_record_T{temperature}.tsv"
    wildcard_constraints:
        temperature="[0-9]+[.][0-9]+",
    priority: 1
    resources:
        mem_mb=realtext_settings.record_memory_mb(RT_CONFIG),
        runtime=10,
    params:
        settings=RT_SETTINGS["record"],
        seed=config["seed"],
        out_dir=trace_dir,
    shell:
        "specsim realtext --settings {params.settings:q} --seed {params.seed} record "
        "--temperature {wildcards.temperature} --corpus {input.corpus:q} "
        "--model {input.model:q} --out-dir {params.out_dir:q} 2> {log:q}"


# Predicted (the positional model on each trace) vs measured (speculative generation with the
# same models from the same prompts) tokens per target call.
rule realtext_pair_accept:
    input:
        model=rules.realtext_model.output.model,
        traces=RT_TRACES,
    output:
        tables=step_files("realtext", "pair_accept"),
    log:
        "logs/realtext/pair_accept.log",
    benchmark:
        "benchmarks/out/realtext_pair_accept.tsv"
    priority: 1  # before the point jobs: this chain runs beside them, not after
    resources:
        mem_mb=1500,
        runtime=10,
    params:
        settings=RT_SETTINGS["pair_accept"],
        seed=config["seed"],
    shell:
        "specsim realtext --settings {params.settings:q} --seed {params.seed} pair_accept "
        "--model {input.model:q} --traces {input.traces:q} 2> {log:q}"


# Optimal γ and break-even c from each trace's exact tokens per call: over the config's c grid
# (deterministic, results/tables/) and at the measured costs (results/realtext/, timings).
rule realtext_pair_optimal:
    input:
        traces=RT_TRACES,
    output:
        tables=step_files("realtext", "pair_optimal"),
    log:
        "logs/realtext/pair_optimal.log",
    params:
        settings=RT_SETTINGS["pair_optimal"],
    shell:
        "specsim realtext --settings {params.settings:q} pair_optimal "
        "--traces {input.traces:q} 2> {log:q}"


# The engine route (`specsim advise` on the DAG): each pair's measured speculative runs record
# an engine's acceptance counters, written as vLLM's Prometheus text; the next rule reads them
# back as an engine's, with the latency profile, into the schedule, snippets and figure; the
# shortcut table measures the counters' route on every trace (the tempered ones too).
rule realtext_engine_counters:
    input:
        model=rules.realtext_model.output.model,
        traces=RT_TRACES,
    output:
        counters=RT_COUNTERS,
    log:
        "logs/realtext/engine_counters.log",
    params:
        settings=RT_SETTINGS["engine_counters"],
        seed=config["seed"],
    shell:
        "specsim realtext --settings {params.settings:q} --seed {params.seed} engine_counters "
        "--model {input.model:q} --traces {input.traces:q} --out {output.counters:q} "
        "2> {log:q}"


rule realtext_engine:
    input:
        counters=RT_COUNTERS,
        traces=RT_TRACES,
        tempered=RT_TEMPERED_TRACES,
        latency=RT_LATENCY,
    output:
        tables=step_files("realtext", "engine", figures=False),
        config_md=realtext_settings.ENGINE_CONFIG,
        pdf=report_figures("realtext", "engine", "pdf", "Your engine"),
        png=report_figures("realtext", "engine", "png", "Your engine"),
    log:
        "logs/realtext/engine.log",
    params:
        settings=RT_SETTINGS["engine"],
        seed=config["seed"],
    shell:
        "specsim realtext --settings {params.settings:q} --seed {params.seed} engine "
        "--counters {input.counters:q} --traces {input.traces:q} "
        "--more-traces {input.tempered:q} --config-md {output.config_md:q} 2> {log:q}"


rule realtext_pair_costs:
    input:
        traces=RT_TRACES,
        costs=declared("realtext_costs"),
    output:
        tables=step_files("realtext", "pair_costs"),
    log:
        "logs/realtext/pair_costs.log",
    params:
        settings=RT_SETTINGS["pair_costs"],
    shell:
        "specsim realtext --settings {params.settings:q} pair_costs "
        "--traces {input.traces:q} --costs {input.costs:q} 2> {log:q}"


# Wall-clock timings: the job asks for every core so that nothing else runs beside it.
# Timings are measurements, not deterministic results: their table lives in results/realtext/,
# outside results/tables/ (whose CSVs are byte-identical across runs), and nothing asserts on it.
rule realtext_costs:
    input:
        corpus=rules.realtext_corpus.output.corpus,
        model=rules.realtext_model.output.model,
        speculative=declared("realtext_speculative"),
    output:
        tables=step_files("realtext", "costs"),
    log:
        "logs/realtext/costs.log",
    benchmark:
        "benchmarks/out/realtext_costs.tsv"
    priority: 1  # before the point jobs: this chain runs beside them, not after
    threads: all_cores
    resources:
        mem_mb=1500,
        runtime=10,
    params:
        settings=RT_SETTINGS["costs"],
        seed=config["seed"],
    shell:
        "OMP_NUM_THREADS=1 specsim realtext --settings {params.settings:q} --seed {params.seed} "
        "costs --corpus {input.corpus:q} --model {input.model:q} "
        "--speculative-table {input.speculative:q} 2> {log:q}"


rule realtext_figures:
    input:
        tables=declared_inputs("realtext", "figures"),
    output:
        pdf=report_figures("realtext", "figures", "pdf", "Real text"),
        png=report_figures("realtext", "figures", "png", "Real text"),
    log:
        "logs/realtext/figures.log",
    benchmark:
        "benchmarks/out/realtext_figures.tsv"
    priority: 1  # before the point jobs: this chain runs beside them, not after
    shell:
        "specsim realtext figures 2> {log:q}"


# The stage's tables in results/tables/ (specsim.outputs.REALTEXT_TABLES, from their
# declarations) rendered as HTML for the report, as the grid's tables are.
rule realtext_tables_html:
    input:
        expand("results/tables/{table}.csv", table=REALTEXT_TABLES),
    output:
        [table_report(name) for name in REALTEXT_TABLES],
    log:
        "logs/realtext/tables_html.log",
    params:
        names=REALTEXT_TABLES,
    shell:
        "specsim html --tables-dir results/tables {params.names} 2> {log:q}"
