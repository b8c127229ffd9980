# Grid -> one job per grid point (Monte Carlo + exact reference) -> one per-point table.
# A point job's only parameter is its description (specsim.job.describe): it reruns when, and
# only when, that changes. results/grid.json feeds aggregation alone.


rule grid:
    output:
        "results/grid.json",
    log:
        "logs/grid.log",
    conda:
        "../envs/specsim.yaml"
    params:
        digest=GRID.config_digest,
    run:
        from specsim.io import versions, write_json

        # provenance: the validated config, its digest, every point, and the software versions
        write_json(output[0], {**GRID.to_json(), "versions": versions()})


rule point:
    output:
        sim=f"results/sim/{POINT}.parquet",
        exact=f"results/exact/{POINT}.parquet",
    log:
        f"logs/point/{POINT}.log",
    conda:
        "../envs/specsim.yaml"
    threads: 1
    resources:
        mem_mb=500,
        runtime=10,
    params:
        job=point_job,
    shell:
        "{SPECSIM} point --job {params.job:q} --sim {output.sim:q} --exact {output.exact:q} "
        "2> {log:q}"


rule collect:
    input:
        grid="results/grid.json",
        points=point_files,
    output:
        "results/points.parquet",
    log:
        "logs/collect.log",
    benchmark:
        "benchmarks/out/collect.tsv"
    conda:
        "../envs/specsim.yaml"
    shell:
        "{SPECSIM} collect --grid {input.grid:q} --results-dir results --out {output:q} "
        "2> {log:q}"
