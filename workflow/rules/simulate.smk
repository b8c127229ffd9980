# Grid -> simulation shards (Monte Carlo) and exact values, then one per-point table.


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


rule simulate:
    input:
        "results/grid.json",
    output:
        "results/shards/{shard}.parquet",
    log:
        "logs/simulate/{shard}.log",
    benchmark:
        "benchmarks/out/simulate/{shard}.tsv"
    conda:
        "../envs/specsim.yaml"
    threads: 1
    resources:
        mem_mb=500,
        runtime=30,
    params:
        specsim=SPECSIM,
    shell:
        "{params.specsim} simulate --grid {input:q} --shard {wildcards.shard} --out {output:q} 2> {log:q}"


rule exact:
    input:
        "results/grid.json",
    output:
        "results/exact/points.parquet",
    log:
        "logs/exact.log",
    benchmark:
        "benchmarks/out/exact.tsv"
    conda:
        "../envs/specsim.yaml"
    resources:
        mem_mb=1000,
        runtime=30,
    params:
        specsim=SPECSIM,
    shell:
        "{params.specsim} exact --grid {input:q} --out {output:q} 2> {log:q}"


rule collect:
    input:
        grid="results/grid.json",
        exact="results/exact/points.parquet",
        shards=shard_files,
    output:
        "results/points.parquet",
    log:
        "logs/collect.log",
    benchmark:
        "benchmarks/out/collect.tsv"
    conda:
        "../envs/specsim.yaml"
    params:
        specsim=SPECSIM,
    shell:
        "{params.specsim} collect --grid {input.grid:q} --exact {input.exact:q} --out {output:q} "
        "{input.shards:q} 2> {log:q}"
