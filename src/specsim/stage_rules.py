"""A stage's Snakemake rules, built from its declarations (workflow/rules/stages.smk).

A stage (:class:`specsim.declare.Stage`) declares each step once: the files it reads and
writes (:class:`~specsim.declare.Arg`, with the files the DAG passes), how the DAG runs it
(:class:`~specsim.declare.Rule`: threads, memory, wildcards...), and, in
:mod:`specsim.outputs`, the tables and figures it writes. :func:`stage_plan` turns that into one
:class:`RuleSpec` per rule -- its inputs, outputs, log, parameters and the ``specsim <stage>
STEP`` command, the same flags the step's command line takes (:mod:`specsim.stage_cli`) -- and
the stage's targets (every output, wildcards expanded), so the rule file holds no list of its
own. Kept free of pandas and numpy: Snakemake calls it at every parse.
"""

from __future__ import annotations

import itertools
import os
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from specsim.declare import Arg, Rule, Stage, Step, load_builder
from specsim.outputs import stage_figures, stage_tables, step_files, table

__all__ = ["Plan", "RuleSpec", "stage_plan"]

Files = str | list[str]


@dataclass(frozen=True)
class RuleSpec:
    """One rule as Snakemake takes it; ``figures`` (their PDF and PNG), ``html`` (a table's
    page) and ``pages`` (results/tables/<name>.html of each) are flagged for the report under
    ``category`` by the rule file, which owns Snakemake's ``report()``."""

    name: str
    input: dict[str, Files]
    output: dict[str, Files]
    figures: tuple[str, ...]
    html: tuple[str, str] | None  # (table, path)
    pages: tuple[str, ...]
    category: str
    log: str
    benchmark: str
    threads: int | str  # "all": every core of the run
    resources: dict[str, int]
    priority: int
    values: dict[str, list[str]]  # wildcard -> the values its jobs take
    template: str  # the command, every file filled in; ``{wildcards.<name>[:q]}`` left
    local: bool

    @property
    def constraints(self) -> dict[str, str]:
        """Each wildcard matches its values only (none: no job)."""
        return {w: "|".join(map(re.escape, v)) or "(?!)" for w, v in self.values.items()}

    def command(self, wildcards: Any) -> str:
        """The job's command (the rule's ``params.command``: a parameter, so that a changed
        command reruns the rule, and filled per job, as a rule made in a loop must be; the
        ``wildcards`` a mapping or Snakemake's, by attribute)."""
        def value(m: re.Match[str]) -> str:
            name = m.group(1)
            v = str(wildcards[name] if isinstance(wildcards, Mapping)
                    else getattr(wildcards, name))
            return shlex.quote(v) if m.group(2) else v

        return re.sub(r"\{wildcards\.(\w+)(:q)?\}", value, self.template)


@dataclass(frozen=True)
class Plan:
    """A stage's rules and every file they build (the targets, wildcards expanded)."""

    rules: tuple[RuleSpec, ...]
    targets: tuple[str, ...]


def _resolve(value: str, groups: Mapping[str, Any]) -> Any:
    """What an ``Arg.files`` or ``Rule`` value names: ``=table``, ``@group`` or itself."""
    if value.startswith("="):
        return table(value[1:]).path
    if value.startswith("@"):
        return groups[value[1:]]
    return value


def _flat(files: Any) -> list[str]:
    return [files] if isinstance(files, str) else list(files)


def _flag(arg: Arg) -> str:
    return "--" + arg.flag.replace("_", "-")


def _quote(path: str) -> str:
    """A file in the command, quoted; a ``{wildcard}`` in it is left for the job, which quotes
    its value alone (the rest of such a path must need no quoting)."""
    if "{" not in path:
        return shlex.quote(path)
    if not re.fullmatch(r"[\w./{}+-]+", path):
        raise ValueError(f"a path with wildcards must need no shell quoting: {path!r}")
    return re.sub(r"\{(\w+)\}", r"{wildcards.\1:q}", path)


def _rule(stage: Stage, step: Step, rule: Rule, settings: str,
          groups: Mapping[str, Any], config: Mapping[str, Any]) -> RuleSpec:
    name = "_".join(filter(None, (stage.name, step.name, rule.suffix)))
    wild = "".join(f"_{{{w}}}" for w in rule.wildcards)
    files = {a.flag: _resolve(rule.files.get(a.flag, a.files), groups)
             for a in (*step.reads, *step.writes)}
    command = [rule.env, "specsim", stage.name, "--settings", shlex.quote(settings),
               *(f"--{p} {config[p]}" for p in rule.passes), step.name]
    inputs: dict[str, Files] = {}
    outputs: dict[str, Files] = {}
    html = None
    for arg, where in [*((a, inputs) for a in step.reads), *((a, outputs) for a in step.writes)]:
        given = _flat(files[arg.flag])
        # a directory: the command gets the folder of the files the rule tracks
        given = [os.path.dirname(given[0])] if arg.directory else given
        command.append(" ".join([_flag(arg), *map(_quote, given)]))
        if arg.flag == "html" and rule.html:
            html = (rule.html, files[arg.flag])
        else:
            where[arg.flag] = files[arg.flag]
    outputs.update({k: _resolve(v, groups) for k, v in rule.more.items()})
    tables = step_files(stage.name, step.name, figures=False)
    if tables:
        outputs["tables"] = tables
    produced = {f for v in outputs.values() for f in _flat(v)}
    figures = stage_figures(stage.name, step.name)
    read = sorted({table(t).path for f in figures for t in f.reads} - produced)
    waits = [f for a in rule.after for f in _flat(_resolve(a, groups))]
    if read or waits:
        inputs["tables" if read and not waits else "after"] = sorted({*read, *waits})
    return RuleSpec(
        name=name, input=inputs, output=outputs, figures=tuple(f.name for f in figures),
        html=html, pages=(), category=rule.category or stage.category,
        log=f"logs/{stage.name}/{step.name}{'_' + rule.suffix if rule.suffix else ''}{wild}.log",
        benchmark=f"benchmarks/out/{name}{wild}.tsv",
        threads=groups["threads"] if rule.threads == "settings" else rule.threads,
        resources={"mem_mb": int(_resolve(str(rule.mem_mb), groups)),
                   "runtime": rule.runtime},
        priority=rule.priority,
        values={w: _flat(_resolve(g, groups)) for w, g in rule.wildcards.items()},
        template=" ".join(filter(None, [*command, rule.options])),
        local=rule.local)


def _pages(stage: Stage) -> RuleSpec | None:
    """The stage's tables in results/tables/ rendered as HTML for the report, as the grid's."""
    names = tuple(t.name for t in stage_tables(stage.name)
                  if t.path.startswith("results/tables/"))
    if not names:
        return None
    return RuleSpec(
        name=f"{stage.name}_tables_html", input={"tables": [table(n).path for n in names]},
        output={}, figures=(), html=None, pages=names, category="Tables",
        log=f"logs/{stage.name}/tables_html.log", benchmark="", threads=1, resources={},
        priority=0, values={},
        template=" ".join(["specsim html --tables-dir results/tables", *names]), local=False)


def _expand(pattern: str, values: Mapping[str, Sequence[str]]) -> list[str]:
    names = [w for w in values if f"{{{w}}}" in pattern]
    return [pattern.format(**dict(zip(names, combo, strict=True)))
            for combo in itertools.product(*(values[w] for w in names))]


def stage_plan(stage: Stage, config: Mapping[str, Any]) -> Plan:
    """The rules and targets of ``stage`` under ``config`` (which has its section). A bad
    section raises ValueError naming the key (the rule file prints it and stops)."""
    settings, groups = load_builder(stage.dag)(config)
    groups = {**groups, "stage_tables": [t.path for t in stage_tables(stage.name)]}
    rules: list[RuleSpec] = []
    targets: list[str] = []
    for step in stage.steps:
        for rule in step.rules:
            spec = _rule(stage, step, rule, settings[step.name], groups, config)
            rules.append(spec)
            made = [*(f for v in spec.output.values() for f in _flat(v)),
                    *(spec.html[1:] if spec.html else ()),
                    *(f"results/figures/{f}.{ext}" for f in spec.figures
                      for ext in ("pdf", "png"))]
            targets += [f for pattern in made for f in _expand(pattern, spec.values)]
    pages = _pages(stage)
    if pages is not None:
        rules.append(pages)
        targets += [f"results/tables/{n}.html" for n in pages.pages]
    return Plan(tuple(rules), tuple(dict.fromkeys(targets)))
