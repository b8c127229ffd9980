"""``specsim record hf``: a trace of one's own pair of Hugging Face causal LMs.

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

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time
import urllib.error
import urllib.request
import warnings
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit


def add_parser(kinds: Any) -> argparse.ArgumentParser:
    """The ``hf`` kind of ``specsim record`` (``kinds``: the group's sub-parsers)."""
    p = kinds.add_parser("hf", help="a trace of your own pair of Hugging Face causal LMs",
                         description=__doc__,
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--target", required=True, metavar="NAME_OR_PATH",
                   help="the target model (Hub name or local directory)")
    p.add_argument("--draft", required=True, metavar="NAME_OR_PATH",
                   help="the draft model (same tokenizer as the target)")
    p.add_argument("--out", required=True, metavar="PARQUET", help="output: the trace file")
    p.add_argument("--prompts", default=None, metavar="TEXT",
                   help="a text file, one prompt per non-empty line (default: held-out windows "
                        "of the tier-1 corpus)")
    p.add_argument("--documents", type=_positive, default=16,
                   help="documents (prompts) to record (default 16)")
    p.add_argument("--prompt-tokens", type=_positive, default=48,
                   help="tokens per held-out prompt when --prompts is not given (default 48)")
    p.add_argument("--length", type=_positive, default=32,
                   help="tokens the target generates per document (default 32)")
    p.add_argument("--top-k", type=_positive, default=64,
                   help="tokens of p and of q kept per position (default 64)")
    p.add_argument("--temperature", type=float, default=1.0,
                   help="sampling temperature of both models (default 1)")
    p.add_argument("--seed", type=int, default=20221117)
    p.add_argument("--threads", type=_positive, default=None, help="torch threads")
    p.add_argument("--device", default="cpu", metavar="DEVICE",
                   help="where both models run: cpu, cuda or mps (default cpu)")
    p.add_argument("--dtype", default="float32", metavar="DTYPE",
                   help="the models' floating-point type: float32, bfloat16 or float16 "
                        "(default float32)")
    p.add_argument("--batch", type=_positive, default=1,
                   help="documents per forward pass (default 1); the trace is the same up to "
                        "floating-point rounding")
    p.add_argument("--pair", default=None, help="the pair's name in the file (default: "
                                                  "TARGET/DRAFT)")
    p.set_defaults(run=run)
    return p


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def _hub_cache() -> Path:
    """Hugging Face's local model cache, where its client looks (huggingface_hub's
    ``constants.py``: ``HF_HUB_CACHE``/``HUGGINGFACE_HUB_CACHE``, else ``$HF_HOME/hub``, else
    ``$XDG_CACHE_HOME/huggingface/hub``; huggingface/huggingface_hub at
    264537b5bf41f60f5280f579e1db5d8e51bba2cc)."""
    env = os.environ.get("HF_HUB_CACHE") or os.environ.get("HUGGINGFACE_HUB_CACHE")
    if env:
        return Path(env).expanduser()
    home = os.environ.get("HF_HOME") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", "~/.cache"), "huggingface")
    return Path(home).expanduser() / "hub"


def unreachable(flag: str, name: str, timeout: float = 3.0) -> str | None:
    """Why the model ``name`` (of ``flag``) cannot be loaded -- not a local directory, not in
    the local cache (a ``models--<org>--<name>`` folder, huggingface_hub's ``repo_folder_name``)
    and no network to the Hub (``HF_HUB_OFFLINE`` set, or its host not reachable within
    ``timeout`` s) -- or None. Said in one line before the hub client would retry, printing
    a line per retry."""
    if Path(name).is_dir():
        return None
    cache = _hub_cache()
    if (cache / ("models--" + name.replace("/", "--"))).is_dir():
        return None
    endpoint = urlsplit(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    host, port = endpoint.hostname or "huggingface.co", endpoint.port or (
        80 if endpoint.scheme == "http" else 443)
    if os.environ.get("HF_HUB_OFFLINE", "").upper() in ("1", "ON", "YES", "TRUE"):
        why = "HF_HUB_OFFLINE is set"
    else:
        url = f"{endpoint.scheme or 'https'}://{host}:{port}/"
        try:  # any HTTP answer, an error status included, means the Hub can be reached
            urllib.request.urlopen(urllib.request.Request(url, method="HEAD"),
                                   timeout=timeout).close()
            return None
        except urllib.error.HTTPError:
            return None
        except (urllib.error.URLError, OSError) as err:
            reason = getattr(err, "reason", err)
            why = f"{host}:{port} unreachable: {getattr(reason, 'strerror', None) or reason}"
    return (f"{flag} {name}: model {name!r} is not in the local cache ({cache}) and there is "
            f"no network ({why}); download it where there is, or give a local directory")


def run(args: argparse.Namespace) -> int:
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
    for flag, name in (("--target", args.target), ("--draft", args.draft)):
        why = unreachable(flag, name)
        if why:
            print(f"{prog}: error: {why}", file=sys.stderr)
            return 1
    t0 = time.perf_counter()
    try:
        target, draft, tok = _load(args.target, args.draft, args.threads, args.device,
                                   args.dtype)
        prompts = _prompts(args, tok)
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


def _load(target: str, draft: str, threads: int | None, device: str, dtype: str
          ) -> tuple[Any, Any, Any]:
    """Both models on ``device`` in ``dtype``, eval mode; the target's tokenizer, checked to be
    the draft's (when the draft has one)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    from specsim.pairs.llm.loading import place

    if threads:
        torch.set_num_threads(threads)
    hf_logging.set_verbosity_error()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tok = AutoTokenizer.from_pretrained(target)
        try:
            tok_d = AutoTokenizer.from_pretrained(draft)
        except (OSError, ValueError):
            tok_d = None
        if tok_d is not None and tok_d.get_vocab() != tok.get_vocab():
            raise ValueError(f"--draft {draft}: its tokenizer is not the target's (a trace "
                             f"compares both distributions over one vocabulary)")
        models = [place(AutoModelForCausalLM.from_pretrained(m, dtype=getattr(torch, dtype)),
                        device, dtype) for m in (target, draft)]
    return models[0], models[1], tok


def _prompts(args: argparse.Namespace, tok: Any) -> list[list[int]]:
    n = args.documents
    if args.prompts:
        lines = [ln.strip() for ln in Path(args.prompts).read_text().splitlines()]
        lines = [ln for ln in lines if ln]
        if len(lines) < n:
            raise ValueError(f"--prompts {args.prompts}: {len(lines)} non-empty lines, "
                             f"--documents {n} asks for {n}")
        out = [tok(ln, add_special_tokens=False)["input_ids"] for ln in lines[:n]]
        empty = [i for i, ids in enumerate(out) if not ids]
        if empty:
            raise ValueError(f"--prompts {args.prompts}: line {empty[0] + 1} has no tokens")
        return [list(map(int, ids)) for ids in out]
    from specsim.pairs.llm.lab import heldout_windows, token_corpus

    corpus = token_corpus(tok)
    return [w.tolist() for w in heldout_windows(corpus.heldout, n, args.prompt_tokens)]
