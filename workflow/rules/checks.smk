# Every claim the seeds make, re-tested with proper statistics; the DAG fails naming any failure.


rule checks:
    input:
        grid="results/grid.json",
        tables=table_files,
        stage=checked_stage_tables,
    output:
        csv="results/tables/checks.csv",
        md="results/tables/checks.md",
        html=table_report("checks", "Checks"),
        sha="results/tables/checks.csv.sha256",
    log:
        "logs/checks.log",
    shell:
        "specsim checks --grid {input.grid:q} --tables-dir results/tables --out {output.csv:q} "
        "2> {log:q}"


# The gate runs last (it waits for every other output) and writes results/checks.ok only when
# every claim passed and every file under results/ verifies (specsim.integrity).
rule gate:
    input:
        csv="results/tables/checks.csv",
        sha="results/tables/checks.csv.sha256",
        everything=gated_files,
    output:
        "results/checks.ok",
    log:
        "logs/gate.log",
    shell:
        "specsim gate --checks {input.csv:q} --out {output:q} 2> {log:q} || (cat {log:q} >&2; exit 1)"
