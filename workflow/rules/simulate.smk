# Grid -> one job per grid point (Monte Carlo + exact reference) -> one per-point table.
# A point job's only parameter is its description (specsim.job.describe): it reruns when, and
# only when, that changes. results/grid.json feeds aggregation alone.


rule grid:
    output:
        "results/grid.json",
    log:
        "logs/grid.log",
    priority: 1  # before the point jobs: collect needs it, and it takes seconds
    params:
        config=grid_config,  # the validated config: a change of it reruns aggregation
    shell:
        "specsim grid --config {params.config:q} --out {output:q} 2> {log:q}"


# One wildcard, {point} = model~<m>/draft~<d>/alpha~<a>/gamma~<g>/temperature~<t>/rule~<r>/
# policy~<p>/measure~<x> (a rule or policy with knobs spells them: rule~multi_draft+drafts=3,
# policy~confidence+threshold=0.4): every job costs Snakemake a few ms per wildcard and resource to plan, and grids run
# to 10^4 points. A point job declares the memory its estimate says it peaks at
# (specsim.work.declared_mb: at least 500 MB; a config needing more than the most a point may
# declare is refused before any job), and the runtime twice its estimated core-seconds
# (specsim.work.declared_minutes: at least 2 minutes).
rule point:
    input:
        point_inputs,  # files another job writes that the point reads (a recorded trace)
    output:
        sim="results/sim/{point}.parquet",
        exact="results/exact/{point}.parquet",
    log:
        "logs/point/{point}.log",
    threads: 1
    resources:
        mem_mb=point_mem_mb,
        runtime=point_runtime,
    params:
        job=point_job,
    shell:
        "specsim point --job {params.job:q} --sim {output.sim:q} --exact {output.exact:q} "
        "2> {log:q}"


rule collect:
    input:
        grid="results/grid.json",
        points=point_files,  # the sim files; their job writes the exact twin beside each
    output:
        "results/points.parquet",
    log:
        "logs/collect.log",
    benchmark:
        "benchmarks/out/collect.tsv"
    shell:
        "specsim collect --grid {input.grid:q} --results-dir results --out {output:q} "
        "2> {log:q}"
