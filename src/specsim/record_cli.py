"""``specsim record``: write traces of a draft/target pair, and check trace files.

A trace (:mod:`specsim.traces.format`) is a pair's next-token distributions along real text,
one Parquet row per position. ``specsim record ngram`` records the real-text stage's character
n-gram pairs (the workflow's ``realtext_record`` rule runs the same step as ``specsim realtext
record``); ``specsim record check FILE ...`` reads and checks any trace file whole -- one
written elsewhere from logged probabilities (vLLM logprobs, ...) included -- and prints what it
holds, or refuses it naming the file and the column (exit status 1).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any


def add_parser(sub: Any, kinds: Any = ()) -> argparse.ArgumentParser:
    """The ``record`` sub-command of the ``specsim`` command line (:mod:`specsim.cli`);
    ``kinds``: functions adding more sub-commands to it (``hf``, from the LLM tier, sets its own
    ``run``)."""
    from specsim import argtypes
    from specsim.pairs.realtext.steps import RECORD
    from specsim.stage_cli import add_step_arguments

    parser = sub.add_parser("record", help="write traces of a pair; check trace files",
                            description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.set_defaults(run=run)
    steps = parser.add_subparsers(dest="record", required=True, metavar="SUB")
    n = steps.add_parser("ngram", help="the real-text stage's n-gram pairs (one trace per "
                                       "draft order, <out-dir>/ngram_o<k>.parquet)")
    n.add_argument("--settings", default="{}", type=argtypes.json_object,
                   help="JSON of config.yaml's realtext section (defaults: the schema's)")
    n.add_argument("--seed", type=argtypes.seed, default=20221117, help="the root seed")
    add_step_arguments(n, RECORD)
    n.set_defaults(parser=n)
    c = steps.add_parser("check", help="check trace files whole; print what each holds")
    c.add_argument("files", nargs="+", metavar="FILE", help="trace files (.parquet)")
    for add in kinds:
        add(steps)
    return parser


def summary(path: str) -> str:
    """One line on a checked trace file (raises TraceFileError naming file and column)."""
    from specsim.traces.format import read_trace

    t = read_trace(path)
    return (f"{path}: ok -- pair {t.meta.get('pair', '?')}, {t.n_docs} documents, "
            f"{t.n_positions} positions, vocab {t.vocab}, support up to {t.width}, "
            f"mean alpha {t.alpha.mean():.4f}")


def run(args: argparse.Namespace) -> int:
    if args.record == "ngram":
        from specsim.pairs.realtext.steps import record
        from specsim.realtext_settings import Settings

        try:
            s = Settings.from_dict(args.settings, step="record")
        except ValueError as err:
            args.parser.error(f"argument --settings: {err}")
        record(s, args)
        for path in args.written:
            print(summary(path))
        return 0
    from specsim.traces.format import TraceFileError

    bad = 0
    for path in args.files:
        try:
            print(summary(path))
        except TraceFileError as err:
            print(f"specsim record check: error: {err}", file=sys.stderr)
            bad += 1
    return 1 if bad else 0
