# Tables -> paper-style figures (vector PDF + PNG), each registered in the Snakemake report
# with its own caption. One job draws them all (matplotlib's import dominates a single figure).


rule figures:
    input:
        grid="results/grid.json",
        tables=table_files,
    output:
        pdf=figure_outputs("pdf"),
        png=figure_outputs("png"),
    log:
        "logs/figures.log",
    benchmark:
        "benchmarks/out/figures.tsv"
    params:
        names=FIGURES,
    shell:
        "specsim figures --grid {input.grid:q} --tables-dir results/tables "
        "--out-dir results/figures {params.names} 2> {log:q}"
