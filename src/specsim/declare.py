"""How a table or figure is declared: one :class:`Table` or :class:`Figure` per output.

A declaration names the output, the analysis whose points it needs, what it answers (a table's
title, about and column meanings; a figure's caption) and its builder, as ``"module:function"``
(imported only when the output is built). :mod:`specsim.outputs` gathers the declarations;
Snakemake plans the DAG from them, ``specsim tables``/``specsim figures`` build them, the
report's captions and HTML pages are written from them (:mod:`specsim.report`).

Also here: the meanings of columns several tables share, for declarations anywhere (the core's
in :mod:`specsim.outputs`, a package's own such as :mod:`specsim.outputs.schemes`).

Kept free of pandas and matplotlib: Snakemake imports it to plan the DAG.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "ACCEPT",
    "EQ1",
    "GTEST",
    "KEYS",
    "SPEEDUP",
    "TIMINGS",
    "TOKENS",
    "C",
    "Figure",
    "Rule",
    "Table",
    "load_builder",
]


def load_builder(path: str) -> Callable[..., Any]:
    """The function a ``"package.module:function"`` path names."""
    module, _, name = path.partition(":")
    if not module or not name:
        raise ValueError(f"a builder is 'module:function', not {path!r}")
    built: Callable[..., Any] = getattr(importlib.import_module(module), name)
    return built


@dataclass(frozen=True)
class Table:
    """A table: ``results/tables/<name>.csv`` (or ``csv``), with its HTML page and caption.

    ``builder`` ``(grid, points) -> DataFrame`` is run by ``specsim tables`` when the config has
    a study of analysis ``needs`` (``needs`` None: always; ``<analysis>/<family>``: a study of
    that analysis running a model of that family). A table without a builder is written by a
    step of its own: ``step`` names it, ``"<stage>:<step>"`` for a stage's (``realtext:model``,
    ``llm:pairs``; the workflow lists the step's outputs from these declarations) or the core
    step (``checks``).
    """

    name: str
    title: str  # a few words, shown as the page's heading
    about: str  # what the table answers, one or two sentences (reStructuredText inline markup)
    columns: Mapping[str, str] = field(default_factory=dict)  # column -> meaning (describe)
    needs: str | None = None
    builder: str = ""
    csv: str = ""  # where the CSV lives, when not results/tables/<name>.csv
    step: str = ""  # the step writing it, when no builder: "<stage>:<step>" or a core step

    @property
    def path(self) -> str:
        """Where the CSV lives (its Markdown twin beside it, ``.md``)."""
        return self.csv or f"results/tables/{self.name}.csv"

    @property
    def markdown(self) -> str:
        """Where its Markdown twin lives (beside the CSV)."""
        return self.path.removesuffix(".csv") + ".md"

    @property
    def stage(self) -> str:
        """The stage whose step writes it (``realtext``, ``llm``), or ``""``."""
        return self.step.partition(":")[0] if ":" in self.step else ""

    def describe(self, column: str) -> str | None:
        """The meaning of ``column``; a key with a ``<placeholder>`` matches any text there."""
        if column in self.columns:
            return self.columns[column]
        for key, text in self.columns.items():
            if "<" in key:
                pattern = re.sub(r"<\w+>", ".+", re.escape(key).replace(r"\<", "<").replace(
                    r"\>", ">"))
                if re.fullmatch(pattern, column):
                    return text
        return None

    def build(self) -> Callable[..., Any]:
        """The builder function (imports its module)."""
        if not self.builder:
            raise ValueError(f"table {self.name!r} is written by a step of its own, not built")
        return load_builder(self.builder)


@dataclass(frozen=True)
class Figure:
    """A figure: ``results/figures/<name>.pdf`` and ``.png``, drawn from tables by ``builder``
    ``(grid, tables_dir) -> matplotlib Figure`` when the config has a study of analysis
    ``needs`` (None: always); ``caption`` (reStructuredText) is its report caption.

    A stage's figure names the stage step drawing it (``step``, ``"<stage>:<step>"``) and the
    declared tables it reads (``reads``: the step's rule waits for those); its builder is
    ``(read) -> matplotlib Figure``, ``read(name)`` the DataFrame of one of them
    (:func:`specsim.figures.draw_stage_figures`), and ``needs`` is None."""

    name: str
    needs: str | None
    builder: str
    caption: str
    step: str = ""
    reads: tuple[str, ...] = ()

    @property
    def stage(self) -> str:
        """The stage whose step draws it (``realtext``, ``llm``), or ``""`` (the grid's)."""
        return self.step.partition(":")[0] if ":" in self.step else ""

    def build(self) -> Callable[..., Any]:
        """The drawing function (imports its module, and so matplotlib)."""
        return load_builder(self.builder)


# --- columns several tables share --------------------------------------------------------------
KEYS = {
    "study": "the study (a key under ``studies:`` in the config) the row belongs to",
    "model": "the model pair (a key under ``models:`` in the config)",
    "draft": "how the draft is made: blend, temper, noise, calibrated, identical, uniform or file",
    "knob": "the draft's own knob: blend weight, draft temperature or logit-noise σ "
            "(empty when the draft has none)",
    "alpha": "acceptance rate α an α-calibrated draft was built to have "
             "(empty for the seeds' own drafts)",
    "gamma": "draft length γ: tokens drafted per round",
    "temperature": "sampling temperature T of both models (0 = greedy)",
    "rule": "acceptance rule: correct (Leviathan Alg. 1) or a deliberate breakage "
            "(greedy, no_resample, continue)",
}
TOKENS = {
    "tokens_per_round": "simulated tokens emitted per round, i.e. per target call",
    "tokens_ci_low": "lower end of the 95% confidence interval of tokens_per_round (batch means)",
    "tokens_ci_high": "upper end of that interval",
    "tokens_se": "standard error of tokens_per_round (batch means)",
    "tokens_exact": "exact expected tokens per round over the simulated horizon (dynamic "
                    "programming; quadrature Monte Carlo for the i.i.d. stub)",
}
ACCEPT = {
    "accept_rate": "simulated acceptance rate: drafts accepted / drafts tested",
    "accept_ci_low": "lower end of the 95% confidence interval of accept_rate",
    "accept_ci_high": "upper end of that interval",
}
C = {"c": "cost of one draft step relative to one target call"}
SPEEDUP = {
    "speedup": "simulated speedup tokens_per_round / (1 + γ c) (Leviathan Thm 3.8 with the "
               "simulated tokens)",
    "speedup_ci_low": "lower end of the 95% confidence interval of speedup",
    "speedup_ci_high": "upper end of that interval",
    "speedup_exact": "tokens_exact / (1 + γ c)",
}
EQ1 = "Leviathan Eq. 1, (1 − α^(γ+1)) / (1 − α)"
GTEST = {
    "g_statistic": "G-test statistic of the simulated counts against the target's exact law",
    "p_value": "p-value of that G-test (small: the output does not follow the target's law)",
    "verdict": "lossless or biased: the G-test at the config's significance level",
}
TIMINGS = {
    "load_before": "the machine's 1-minute load average before the measurement",
    "load_after": "the same after it",
    "cpus": "CPUs the machine reports",
    "reliable": "the timings of the row are reliable: their interleaved repeats agree within "
                "specsim.timing's tolerance (False: read them as noise)",
    "<column>_q25": "25th percentile, over the interleaved repeats, of the column named before "
                    "_q25",
    "<column>_q75": "75th percentile of that column",
}


# --- a stage's steps ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Arg:
    """A file option of a stage step: ``--<flag>`` (``flag`` with ``-`` for ``_``) and its help;
    ``nargs`` as argparse takes it (``"+"``: one or more files, ``"*"``: any, optional)."""

    flag: str
    help: str
    nargs: str | None = None
    directory: bool = False  # a directory (read: it exists; written: it can be made)
    #: what the DAG passes (:mod:`specsim.stage_rules`): a path (``{wildcards}`` allowed),
    #: ``"=name"`` the declared table's CSV, or ``"@group"`` the stage's files of that name;
    #: for a directory, the files in it the rule reads or writes (the command gets their folder)
    files: str = ""


@dataclass(frozen=True)
class Rule:
    """How the DAG runs a step: one Snakemake rule ``<stage>_<step>[_<suffix>]`` built by
    :mod:`specsim.stage_rules` (workflow/rules/stages.smk). Its files are the step's
    :class:`Arg` files (``files`` replaces some for this rule), its declared tables and figures;
    ``"@name"`` values are the stage's named files or numbers (:attr:`Stage.dag`)."""

    suffix: str = ""
    threads: int | str = 1  # "all": every core of the run (timed steps); "settings": .threads
    mem_mb: int | str = 1000
    runtime: int = 10  # minutes
    priority: int = 0
    env: str = ""  # before the command, e.g. "OMP_NUM_THREADS=1"
    passes: tuple[str, ...] = ()  # root config keys given as stage options: seed, significance
    wildcards: Mapping[str, str] = field(default_factory=dict)  # wildcard -> "@group" of values
    options: str = ""  # the rest of the command, e.g. "--pair {wildcards.pair:q}"
    files: Mapping[str, str] = field(default_factory=dict)  # Arg flag -> files, for this rule
    after: tuple[str, ...] = ()  # files it waits for besides those it reads
    more: Mapping[str, str] = field(default_factory=dict)  # outputs its Args do not name
    html: str = ""  # the declared table whose HTML page its ``html`` Arg writes (the report's)
    category: str = ""  # the report's category of its figures (default: the stage's)
    local: bool = False  # runs on the host, never on a cluster node


@dataclass(frozen=True)
class Step:
    """One step of a stage: one Snakemake rule and one ``specsim <stage> <name>`` command.

    ``run`` (``"module:function"``, imported when the step runs) is called with the step's
    settings and the parsed arguments and returns the declared tables it computed, by name
    (:class:`Table` with ``step`` ``"<stage>:<name>"``); the command writes each to its declared
    path under ``--results-dir`` and draws the figures the step declares. ``reads`` are the files
    it reads, ``writes`` the files it writes besides its declared tables (a model, traces, a
    record), ``options`` its other arguments as ``(flags, argparse keywords)``."""

    name: str
    help: str
    run: str
    reads: tuple[Arg, ...] = ()
    writes: tuple[Arg, ...] = ()
    options: tuple[tuple[tuple[str, ...], Mapping[str, Any]], ...] = ()
    rules: tuple[Rule, ...] = (Rule(),)  # how the DAG runs it (none: a command only)


@dataclass(frozen=True)
class Stage:
    """A stage beside the grid (``specsim <name> STEP``; workflow/rules/<name>.smk): its steps,
    its settings class (``settings``, ``"module:Class"``, a
    :class:`specsim.stage_settings.StageSettings`: a step's ``--settings`` are read with its
    ``from_dict(d, step=...)``, which refuses a bad key in one line) and the stage's own options
    besides ``--settings``, ``--results-dir`` and ``--significance``."""

    name: str
    help: str
    doc: str
    settings: str
    steps: tuple[Step, ...]
    options: tuple[tuple[tuple[str, ...], Mapping[str, Any]], ...] = ()
    #: ``"module:function"`` ``(settings, args) -> str | None``: why the step cannot run here
    #: (a device this machine lacks), asked after its settings and before it starts.
    preflight: str = ""
    #: ``"module:function"`` ``(config) -> StageDag``: the stage's config section checked (a
    #: ValueError names the key), each step's ``--settings`` JSON and the named files and
    #: numbers its rules use (:mod:`specsim.stage_rules`).
    dag: str = ""
    category: str = ""  # the report's category of its figures

    def step(self, name: str) -> Step:
        return next(s for s in self.steps if s.name == name)
