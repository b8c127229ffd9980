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


# Every file the run builds, listed once (specsim.integrity.MANIFEST): the gate and `all` read
# this one file instead of depending on every output, so a failure of either names three inputs,
# not thousands; `specsim verify` names a listed file that is gone.
rule manifest:
    input:
        grid="results/grid.json",
        files=manifest_inputs,
    output:
        "results/manifest.txt",
    log:
        "logs/manifest.log",
    shell:
        "specsim manifest --grid {input.grid:q} --out {output:q} {input.files:q} 2> {log:q}"


# The gate runs after every other output (through the manifest) and writes results/checks.ok
# only when every claim passed and every file under results/ verifies (specsim.integrity).
# Its report, one line per failed claim or damaged file, is its log, which Snakemake prints when
# the gate fails (show-failed-logs, profiles/default).
rule gate:
    input:
        csv="results/tables/checks.csv",
        sha="results/tables/checks.csv.sha256",
        manifest="results/manifest.txt",
    output:
        "results/checks.ok",
    log:
        "logs/gate.log",
    shell:
        "specsim gate --checks {input.csv:q} --out {output:q} 2> {log:q}"
