"""The LLM tier's rules as Snakemake schedules them (dry runs): one trace and one runs job per
pair, and CI's small config scheduling every rule (tests/unit/pairs/: the tier's code)."""

from __future__ import annotations

from pathlib import Path

from specsim.pairs.llm.settings import Settings


def test_one_trace_job_and_one_runs_job_per_pair(tmp_path: Path) -> None:
    """The DAG (dry run): a trace and a runs job per pair, each passed only the settings it
    reads -- no pair list -- so adding a pair schedules only its own two jobs."""
    import yaml
    from conftest import ROOT, snakemake

    cfg = yaml.safe_load((ROOT / "config.yaml").read_text())
    cfg["llm"] = {"trace_pairs": ["ngram-3", "int8"]}
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(cfg))
    out = snakemake(tmp_path, path, "-n", "--cores", "1", "-p",
                    "results/llm/pair_accept.csv").stdout
    for rule, files in (("llm_trace", "results/llm/traces/{}.parquet"),
                        ("llm_pair", "results/llm/pairs/{}.csv")):
        assert out.count(f"rule {rule}:") == 2, rule
        for pair in ("ngram-3", "int8"):
            assert files.format(pair) in out
    commands = [ln for ln in out.splitlines() if " trace --corpus" in ln or " pair --" in ln]
    assert len(commands) == 4 and not any("trace_pairs" in c for c in commands)


def test_ci_llm_config_runs_every_rule_and_both_engines(tmp_path: Path) -> None:
    """CI's small LLM config (.ci/run: make llm LLM_CONFIG=workflow/llm-ci.yaml) is valid and
    schedules every rule of the LLM stage (one per declared step); its pairs are an n-gram and
    a model draft (so specsim's loop and transformers' assisted generation both run), every
    kind of draft is built."""
    import yaml
    from conftest import ROOT, snakemake

    ci = yaml.safe_load((ROOT / "workflow/llm-ci.yaml").read_text())["llm"]
    s = Settings.from_dict({**ci, "seed": 1})
    kinds = {d.split("-")[0] for d in s.draft_names()}
    assert kinds == {"ngram", "int8", "skip"}
    assert {d.startswith("ngram-") for d in s.trace_pairs} == {True, False}
    cfg = yaml.safe_load((ROOT / "config.yaml").read_text())
    cfg["llm"] = ci
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(cfg))
    out = snakemake(tmp_path, path, "-n", "--cores", "1", "llm").stdout
    from specsim.pairs.llm.steps import STAGE

    rules = [f"llm_{step.name}{'_' + r.suffix if r.suffix else ''}" for step in STAGE.steps
             for r in step.rules]
    assert len(rules) >= 12
    missing = [r for r in rules if f"rule {r}:" not in out]
    assert not missing, missing

