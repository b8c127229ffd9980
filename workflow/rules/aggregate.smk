# Per-point estimates -> one tidy table per analysis (CSV for machines, Markdown for people).


rule table:
    input:
        grid="results/grid.json",
        points="results/points.parquet",
    output:
        csv="results/tables/{table}.csv",
        md="results/tables/{table}.md",
    log:
        "logs/tables/{table}.log",
    shell:
        "{SPECSIM} table --grid {input.grid:q} --points {input.points:q} "
        "--analysis {wildcards.table} --out {output.csv:q} 2> {log:q}"
