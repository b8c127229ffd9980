# Tables -> paper-style figures (vector PDF + PNG), registered in the Snakemake report.


rule figure:
    input:
        grid="results/grid.json",
        tables=table_files,
    output:
        pdf=report(
            "results/figures/{figure}.pdf",
            caption="../report/{figure}.rst",
            category="Figures",
            labels={"figure": "{figure}", "format": "PDF"},
        ),
        png=report(
            "results/figures/{figure}.png",
            caption="../report/{figure}.rst",
            category="Figures",
            labels={"figure": "{figure}", "format": "PNG"},
        ),
    log:
        "logs/figures/{figure}.log",
    shell:
        "{SPECSIM} figure --grid {input.grid:q} --tables-dir results/tables "
        "--name {wildcards.figure} --out {output.pdf:q} 2> {log:q}"
