"""``specsim realtext STEP`` and ``specsim llm STEP``: a stage's steps as commands, one style.

Each stage declares its steps once (:class:`specsim.declare.Stage`:
:mod:`specsim.pairs.realtext.steps`, :mod:`specsim.pairs.llm.steps`); this module turns a
declaration into its command: the stage's options, a sub-command per step with the files it
reads (checked to exist) and writes, and one run that checks the step's settings, calls the
step's function, writes the declared tables it returns to their declared paths under
``--results-dir`` (:mod:`specsim.outputs`), draws the figures the step declares, and ends the
log with one JSON line of its seconds and the load.
A table the step declares but neither returns nor writes itself is an error, named.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from specsim import argtypes, timing
from specsim.declare import Arg, Stage, Step, load_builder
from specsim.outputs import declared_path


def _file_arg(parser: argparse.ArgumentParser, arg: Arg, read: bool) -> None:
    kind = (argtypes.existing_dir if arg.directory else argtypes.existing_file) if read else (
        argtypes.output_dir if arg.directory else str)
    default: list[str] | None = [] if arg.nargs == "*" else None
    parser.add_argument(f"--{arg.flag.replace('_', '-')}", dest=arg.flag, help=arg.help,
                        type=kind, nargs=arg.nargs, required=arg.nargs != "*", default=default)


def add_step_arguments(parser: argparse.ArgumentParser, step: Step) -> None:
    """A step's own arguments: the files it reads and writes, its options."""
    for arg in step.reads:
        _file_arg(parser, arg, read=True)
    for arg in step.writes:
        _file_arg(parser, arg, read=False)
    for flags, kwargs in step.options:
        parser.add_argument(*flags, **kwargs)


def add_stage_parser(sub: Any, stage: Stage) -> argparse.ArgumentParser:
    """The ``specsim <stage>`` sub-command of the command line (:mod:`specsim.cli`)."""
    parser: argparse.ArgumentParser = sub.add_parser(
        stage.name, help=stage.help, description=stage.doc,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--settings", default="{}", type=argtypes.json_object,
                        help=f"JSON of the config's {stage.name} settings the step reads "
                             f"(defaults: the schema's)")
    parser.add_argument("--results-dir", default="results", type=argtypes.output_dir,
                        help="where the declared tables' paths start (default: results); the "
                             "figures go to its figures/")
    parser.add_argument("--significance", type=float, default=1e-3,
                        help="the level of the lossless tests (the config's significance)")
    for flags, kwargs in stage.options:
        parser.add_argument(*flags, **kwargs)
    steps = parser.add_subparsers(dest="step", required=True, metavar="STEP")
    for step in stage.steps:
        add_step_arguments(steps.add_parser(step.name, help=step.help, description=step.help),
                           step)
    parser.set_defaults(run=lambda args: run(stage, args, parser))
    return parser


def settings_of(stage: Stage, args: argparse.Namespace,
                parser: argparse.ArgumentParser | None = None) -> Any:
    """The step's checked settings (``--settings``); a bad one is refused as argparse does."""
    settings: Any = load_builder(stage.settings)  # a StageSettings class
    try:
        return settings.from_dict(args.settings, step=args.step)
    except ValueError as err:
        if parser is None:
            raise
        parser.error(f"argument --settings: {err}")


def run(stage: Stage, args: argparse.Namespace,
        parser: argparse.ArgumentParser | None = None) -> int:
    """Run ``args.step`` of ``stage`` (module docstring)."""
    from specsim.outputs import stage_figures, stage_tables

    step = stage.step(args.step)
    s = settings_of(stage, args, parser)
    problem = load_builder(stage.preflight)(s, args) if stage.preflight else None
    if problem:
        if parser is None:
            raise ValueError(problem)
        parser.error(problem)
    record: dict[str, Any] = {"loadavg_1min_before": os.getloadavg()[0]}
    t0 = timing.clock()
    frames = dict(load_builder(step.run)(s, args) or {})
    declared = {t.name for t in stage_tables(stage.name, step.name)}
    stray = sorted(set(frames) - declared)
    if stray:
        raise AssertionError(f"step {stage.name} {step.name} returned tables it does not "
                             f"declare: {stray} (declare them in specsim.outputs.{stage.name})")
    if frames:
        from specsim.io import write_table

        for name, frame in frames.items():
            write_table(frame, declared_path(args.results_dir, name))
    missing = sorted(n for n in declared if not declared_path(args.results_dir, n).is_file())
    if missing:
        raise AssertionError(f"step {stage.name} {step.name} wrote none of its declared "
                             f"tables {missing}")
    if stage_figures(stage.name, step.name):
        from specsim.figures import draw_stage_figures, table_reader

        files = table_reader(args.results_dir)
        draw_stage_figures(stage.name, step.name,
                           lambda name: frames[name] if name in frames else files(name),
                           Path(args.results_dir) / "figures")
    record[args.step] = round(timing.clock() - t0, 3)
    record["loadavg_1min_after"] = os.getloadavg()[0]
    print(json.dumps(record), file=sys.stderr)
    return 0
