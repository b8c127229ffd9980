"""The stages' Snakemake rules are built from the steps' declarations (specsim.stage_rules):
every command is one the step's own command line accepts, every declared output is a target,
and the stage's config is refused in one line naming the key."""

from __future__ import annotations

import argparse
import re
import shlex

import pytest
import yaml
from conftest import ROOT

from specsim.config import validate_config
from specsim.declare import Stage
from specsim.outputs import stage_figures, stage_tables
from specsim.pairs.stages import STAGES
from specsim.stage_cli import add_stage_parser
from specsim.stage_rules import stage_plan


def _config() -> dict:
    """config.yaml with CI's LLM section, the schema's defaults filled in (as the DAG has it)."""
    cfg = yaml.safe_load((ROOT / "config.yaml").read_text())
    cfg["llm"] = yaml.safe_load((ROOT / "workflow/llm-ci.yaml").read_text())["llm"]
    return validate_config(cfg, ROOT / "workflow/schemas/config.schema.yaml")


@pytest.mark.parametrize("stage", STAGES, ids=lambda s: s.name)
def test_each_rule_runs_a_command_its_step_accepts(stage: Stage) -> None:
    plan = stage_plan(stage, _config())
    parser = argparse.ArgumentParser()
    add_stage_parser(parser.add_subparsers(dest="cmd"), stage)
    steps = {s.name for s in stage.steps}
    ran = set()
    for spec in plan.rules:
        if spec.name.endswith("_tables_html"):
            continue
        wildcards = {w: "x1" for w in spec.constraints}
        words = shlex.split(spec.command(wildcards))
        words = words[words.index("specsim") + 1:]
        # argparse checks files it reads exist: parse with the file types relaxed
        for action in _actions(parser):
            action.type = None if action.dest not in ("settings",) else action.type
        args = parser.parse_args(words)
        assert args.cmd == stage.name and args.step in steps, spec.name
        ran.add(args.step)
    assert ran == steps  # every step has a rule


def _actions(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    out = []
    for action in parser._actions:
        out.append(action)
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                out += _actions(sub)
    return out


@pytest.mark.parametrize("stage", STAGES, ids=lambda s: s.name)
def test_every_declared_output_is_a_target(stage: Stage) -> None:
    plan = stage_plan(stage, _config())
    declared = {p for t in stage_tables(stage.name) for p in (t.path, t.markdown)}
    declared |= {f"results/figures/{f.name}.{e}" for f in stage_figures(stage.name)
                 for e in ("pdf", "png")}
    assert declared <= set(plan.targets)
    assert not [t for t in plan.targets if "{" in t]  # every wildcard expanded


def test_wildcards_expand_over_their_group_and_constrain_to_it() -> None:
    llm = next(s for s in STAGES if s.name == "llm")
    cfg = _config()
    plan = stage_plan(llm, cfg)
    pairs = cfg["llm"]["trace_pairs"]
    trace = next(r for r in plan.rules if r.name == "llm_trace")
    assert trace.constraints == {"pair": "|".join(map(re.escape, pairs))}
    assert {f"results/llm/traces/{p}.parquet" for p in pairs} <= set(plan.targets)
    assert trace.log == "logs/llm/trace_{pair}.log"
    words = shlex.split(trace.command({"pair": "a b"}))  # each job fills, and quotes, its own
    assert words[words.index("--out") + 1] == "results/llm/traces/a b.parquet"
    assert words[words.index("--pair") + 1] == "a b"


def test_a_directory_argument_gets_the_folder_of_the_files_the_rule_tracks() -> None:
    realtext = next(s for s in STAGES if s.name == "realtext")
    plan = stage_plan(realtext, _config())
    record = next(r for r in plan.rules if r.name == "realtext_record")
    assert all(f.startswith("results/traces/") for f in record.output["out_dir"])
    assert "--out-dir results/traces" in record.template


def test_a_bad_section_is_refused_naming_the_key() -> None:
    realtext = next(s for s in STAGES if s.name == "realtext")
    cfg = _config()
    cfg["realtext"] = {**cfg["realtext"], "model": {"no_such_key": 1}}
    with pytest.raises(ValueError, match="no_such_key"):
        stage_plan(realtext, cfg)
