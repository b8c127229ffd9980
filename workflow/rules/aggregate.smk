# Per-point estimates -> one tidy table per analysis (CSV for machines, Markdown for people).
# All tables come from one job: each is cheap, and one process start beats eleven.


rule tables:
    input:
        grid="results/grid.json",
        points="results/points.parquet",
    output:
        csv=table_outputs(),
        md=expand("results/tables/{table}.md", table=TABLES),
    log:
        "logs/tables.log",
    benchmark:
        "benchmarks/out/tables.tsv"
    params:
        names=TABLES,
    shell:
        "specsim tables --grid {input.grid:q} --points {input.points:q} "
        "--out-dir results/tables {params.names} 2> {log:q}"
