# Per-point estimates -> one tidy table per analysis: CSV for machines, Markdown and HTML for
# people (the report shows the HTML). All tables come from one job, and one process start beats
# eleven: each is cheap but schemes_trees and cost_batch on a trace model, which compute its
# exact rates for Sequoia's trees and k drafts (seconds to about a minute on the default trace).


rule tables:
    input:
        grid="results/grid.json",
        points="results/points.parquet",
    output:
        csv=table_files(),
        md=expand("results/tables/{table}.md", table=TABLES),
        sha=expand("results/tables/{table}.csv.sha256", table=TABLES),
        html=[table_report(name) for name in TABLES],
    log:
        "logs/tables.log",
    benchmark:
        "benchmarks/out/tables.tsv"
    params:
        names=TABLES,
    shell:
        "specsim tables --grid {input.grid:q} --points {input.points:q} "
        "--out-dir results/tables {params.names} 2> {log:q}"
