"""``specsim record``: write traces of a draft/target pair, and check trace files.

A trace (:mod:`specsim.traces.format`) is a pair's next-token distributions along real text,
one Parquet row per position, recorded by either backend of the pair stage through one writer
(:mod:`specsim.pairs.recording`). ``specsim record ngram`` records the real-text stage's
character n-gram pairs (the workflow's ``realtext_record`` rule runs the same step as
``specsim realtext record``); ``specsim record hf`` one's own pair of Hugging Face causal LMs
(:data:`HF`); ``specsim record check FILE ...`` reads and checks any trace file whole -- one
written elsewhere from logged probabilities (vLLM logprobs, ...) included -- and prints what it
holds, or refuses it naming the file and the column (exit status 1).
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from typing import Any

from specsim import argtypes
from specsim.argtypes import positive_int

#: ``specsim record hf``'s description.
HF = """\
``specsim record hf``: a trace of one's own pair of Hugging Face causal LMs.

The target and the draft are given by name (the Hub) or by path (a directory
``save_pretrained`` wrote); they must share a tokenizer. The prompts are the lines of a text
file (``--prompts``), or windows of the tier-1 corpus' held-out text (the standard library's
documentation, :func:`specsim.ngram.build_corpus`) in the target's tokens. Each document is the
target's continuation of one prompt, ``--length`` tokens at ``--temperature``; at each position
the target's and the draft's full next-token distributions, kept as the top-k support of
p ∪ q (:mod:`specsim.pairs.llm.record`). Both models run on ``--device`` in ``--dtype``; rows are
float64 on the host whatever the dtype (the logits are upcast before the softmax), and
``--batch`` documents share each forward pass. Progress goes to stderr; a run killed halfway
resumes from the documents it finished (``<out>.parts/``). Needs torch and transformers
(``make llm``).
"""


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """The ``record`` sub-command of the ``specsim`` command line (:mod:`specsim.cli`)."""
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
    _add_hf(steps)
    return parser


def _add_hf(kinds: Any) -> None:
    p = kinds.add_parser("hf", help="a trace of your own pair of Hugging Face causal LMs",
                         description=HF,
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--target", required=True, metavar="NAME_OR_PATH",
                   help="the target model (Hub name or local directory)")
    p.add_argument("--draft", required=True, metavar="NAME_OR_PATH",
                   help="the draft model (same tokenizer as the target)")
    p.add_argument("--out", required=True, metavar="PARQUET", help="output: the trace file")
    p.add_argument("--prompts", default=None, metavar="TEXT",
                   help="a text file, one prompt per non-empty line (default: held-out windows "
                        "of the tier-1 corpus)")
    p.add_argument("--documents", type=positive_int, default=16,
                   help="documents (prompts) to record (default 16)")
    p.add_argument("--prompt-tokens", type=positive_int, default=48,
                   help="tokens per held-out prompt when --prompts is not given (default 48)")
    p.add_argument("--length", type=positive_int, default=32,
                   help="tokens the target generates per document (default 32)")
    p.add_argument("--top-k", type=positive_int, default=64,
                   help="tokens of p and of q kept per position (default 64)")
    p.add_argument("--temperature", type=float, default=1.0,
                   help="sampling temperature of both models (default 1)")
    p.add_argument("--seed", type=argtypes.seed, default=20221117, help="the root seed")
    p.add_argument("--threads", type=positive_int, default=None, help="torch threads")
    p.add_argument("--device", default="cpu", metavar="DEVICE",
                   help="where both models run: cpu, cuda or mps (default cpu)")
    p.add_argument("--dtype", default="float32", metavar="DTYPE",
                   help="the models' floating-point type: float32, bfloat16 or float16 "
                        "(default float32)")
    p.add_argument("--batch", type=positive_int, default=1,
                   help="documents per forward pass (default 1); the trace is the same up to "
                        "floating-point rounding")
    p.add_argument("--pair", default=None, help="the pair's name in the file (default: "
                                                  "TARGET/DRAFT)")
    p.set_defaults(run=run_hf)


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


def run_hf(args: argparse.Namespace) -> int:
    """``specsim record hf``: load the pair, record its trace (:func:`specsim.pairs.llm.record.
    record_pair`), say what was written."""
    prog = "specsim record hf"
    missing = [m for m in ("torch", "transformers") if importlib.util.find_spec(m) is None]
    if missing:
        print(f"{prog}: error: needs {' and '.join(missing)} (pip install torch transformers, "
              f"or make llm)", file=sys.stderr)
        return 2
    if not args.temperature > 0:
        print(f"{prog}: error: --temperature must be > 0", file=sys.stderr)
        return 2
    from specsim.pairs.llm.loading import placement_problem

    problem = placement_problem(args.device, args.dtype)
    if problem:
        print(f"{prog}: error: {problem}", file=sys.stderr)
        return 2
    from specsim.pairs.llm import hub

    for flag, name in (("--target", args.target), ("--draft", args.draft)):
        why = hub.unreachable(flag, name)
        if why:
            print(f"{prog}: error: {why}", file=sys.stderr)
            return 1
    t0 = time.perf_counter()
    try:
        target, draft, tok = hub.load_pair(args.target, args.draft, args.threads, args.device,
                                           args.dtype)
        prompts = hub.prompts(tok, args.prompts, args.documents, args.prompt_tokens)
    except (OSError, ValueError) as err:
        reason = " ".join(str(err).split())
        print(f"{prog}: error: {reason}", file=sys.stderr)
        return 1
    from specsim.pairs.llm.record import ForwardRows, record_pair

    vocab = max(int(target.config.vocab_size), int(draft.config.vocab_size))
    trace = record_pair(args.out, target, ForwardRows(draft), prompts, length=args.length,
                        top_k=args.top_k, temperature=args.temperature, seed=args.seed,
                        meta={"pair": args.pair or f"{args.target}/{args.draft}",
                              "vocab": vocab, "target": args.target, "draft": args.draft,
                              "text": "target continuations of "
                                      + (args.prompts or "held-out tier-1 prompts"),
                              "source": "specsim record hf", "device": args.device,
                              "dtype": args.dtype}, batch=args.batch)
    print(f"done: record hf, {trace.n_docs} documents, {trace.n_positions} positions, mean "
          f"alpha {trace.alpha.mean():.4f} -> {args.out} in {time.perf_counter() - t0:.1f} s",
          file=sys.stderr)
    return 0
