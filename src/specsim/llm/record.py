"""Record a trace (:mod:`specsim.traces.format`) of a target / draft pair of causal LMs.

A document is a continuation the target samples from one prompt (``length`` tokens, KV-cached,
at ``temperature``); at each of its positions the target's and the draft's full next-token
distributions in the same context -- the prompt plus the continuation so far. The target's come
from the sampling steps themselves; the draft's from any object that gives a next-token
distribution (:class:`Rows`): a Hugging Face model in one forward pass over the whole sequence
(:class:`ForwardRows`), or a draft run one position at a time as speculative sampling runs it
(:class:`StepRows`: the LLM tier's int8, skip-layer and n-gram drafts). Each position's rows
are cut to the top-k support of p ∪ q (:func:`specsim.traces.format.from_full_rows`, α from
the full rows).

Resumable: each finished document is written (atomically, as a one-document trace file) to
``<out>.parts/``; a rerun skips the documents found there, provided ``settings.json`` in that
directory matches this run's (else the stale parts are discarded). Document d's randomness is
seeded by (seed, d) alone, so a resumed run writes the same file as an uninterrupted one. The
final file is written atomically, then the parts are removed. Progress: one line on stderr per
document. torch is imported only inside the functions that run a model.
"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, TextIO

import numpy as np

from specsim import timing
from specsim.llm.drafts import CachedLM, sample
from specsim.sampling import FloatArray
from specsim.seeds import seed_for
from specsim.traces.format import (
    Trace,
    TraceFileError,
    concat_traces,
    from_full_rows,
    read_trace,
    trace_meta,
    write_trace,
)

__all__ = ["ForwardRows", "Rows", "StepRows", "document_trace", "record", "record_pair",
           "sample_document", "temper"]


class Rows(Protocol):
    """Next-token distributions along a sequence: ``rows(seq, start)`` is (len(seq) - start,
    V), row j the distribution of the token after ``seq[: start + j]`` (temperature 1)."""

    def rows(self, seq: Sequence[int], start: int) -> FloatArray: ...


class ForwardRows:
    """A causal LM (transformers) in ONE cache-free forward pass over the sequence."""

    def __init__(self, model: Any) -> None:
        self.model = model

    def rows(self, seq: Sequence[int], start: int) -> FloatArray:
        import torch

        from specsim.llm.loading import softmax

        with torch.inference_mode():
            logits = self.model(torch.tensor([list(seq)])).logits[0]
        return softmax(logits[start - 1 : len(seq) - 1])


class StepRows:
    """A draft with ``reset()`` and ``probs(seq)`` (:mod:`.drafts`), asked once per position
    as Alg. 1 asks it: a model draft feeds one new token per step through its KV cache (the
    int8 draft's dynamic quantisation makes a batched pass a different draft)."""

    def __init__(self, draft: Any) -> None:
        self.draft = draft

    def rows(self, seq: Sequence[int], start: int) -> FloatArray:
        self.draft.reset()
        seq = list(seq)
        return np.stack([self.draft.probs(seq[:j]) for j in range(start, len(seq))])


def temper(rows: FloatArray, temperature: float) -> FloatArray:
    """Rows at ``temperature``: p^(1/T) renormalised (softmax of logits / T)."""
    if temperature == 1.0:
        return rows
    with np.errstate(divide="ignore"):
        logp = np.log(rows) / temperature
    logp -= logp.max(axis=1, keepdims=True)
    out = np.exp(logp)
    return np.asarray(out / out.sum(axis=1, keepdims=True), dtype=np.float64)


def _pad(rows: FloatArray, width: int) -> FloatArray:
    """Rows over a smaller vocabulary padded with zeros (ids a model lacks have probability 0)."""
    if rows.shape[1] == width:
        return rows
    return np.pad(rows, ((0, 0), (0, width - rows.shape[1])))


def sample_document(target: Any, prompt: Sequence[int], length: int, temperature: float,
                    rng: np.random.Generator) -> tuple[list[int], FloatArray]:
    """``length`` tokens the target samples after ``prompt`` (KV-cached, inverse-CDF draws as
    in :mod:`.generation`) and the distributions they were drawn from (length, V)."""
    from specsim.llm.loading import softmax

    lm = CachedLM(target)
    seq = list(prompt)
    rows = []
    for _ in range(length):
        p = temper(softmax(lm.next_logits(seq, 1))[:1], temperature)[0]
        rows.append(p)
        seq.append(sample(p, rng.random()))
    return seq[len(prompt):], np.stack(rows)


def document_trace(target: Any, draft: Rows, prompt: Sequence[int], length: int, top_k: int,
                   temperature: float, rng: np.random.Generator, meta: dict[str, Any]) -> Trace:
    """One document: the target's continuation of ``prompt`` with p and q at every position."""
    tokens, P = sample_document(target, prompt, length, temperature, rng)
    Q = temper(draft.rows([*prompt, *tokens], len(prompt)), temperature)
    width = max(P.shape[1], Q.shape[1], int(meta["vocab"]))
    offsets, support, p, q, p_tail, q_tail, alpha = from_full_rows(_pad(P, width),
                                                                  _pad(Q, width), top_k)
    return Trace({**meta, "vocab": width, "documents": 1}, np.array([0, length]),
                 np.asarray(tokens, dtype=np.int64), offsets, support, p, q, p_tail, q_tail,
                 alpha)


def record(out: str | Path, make_document: Callable[[int, np.random.Generator], Trace],
           documents: int, meta: dict[str, Any], seed: int, settings: dict[str, Any],
           progress: TextIO | None = sys.stderr) -> Trace:
    """Record ``documents`` documents (``make_document(d, rng)``) into the trace file ``out``,
    resumably (module docstring); returns the trace written. ``settings``: everything that
    decides the documents (kept in ``<out>.parts/settings.json``)."""
    out = Path(out)
    parts = Path(f"{out}.parts")
    stamp = json.dumps({**settings, "seed": seed, "documents": documents}, sort_keys=True)
    mark = parts / "settings.json"
    if parts.is_dir() and (not mark.is_file() or mark.read_text() != stamp):
        _say(progress, f"record: {parts} holds parts of other settings: discarded")
        shutil.rmtree(parts)
    parts.mkdir(parents=True, exist_ok=True)
    if not mark.is_file():
        from specsim.io import write_text

        write_text(mark, stamp)
    t0 = timing.clock()
    done: list[Trace] = []
    resumed = 0
    for d in range(documents):
        path = parts / f"doc-{d:05d}.parquet"
        part = None
        if path.is_file():
            try:
                part = read_trace(path)
                resumed += 1
            except TraceFileError:  # killed mid-write cannot happen (atomic); damaged later
                part = None
        if part is None:
            rng = np.random.default_rng(seed_for(seed, "record", d))
            part = make_document(d, rng)
            write_trace(path, part)
        done.append(part)
        _say(progress, f"record: {d + 1}/{documents} documents"
             f"{f' ({resumed} resumed)' if resumed else ''}, "
             f"{timing.clock() - t0:.1f} s")
    trace = concat_traces(done, {**meta, "vocab": max(t.vocab for t in done)})
    write_trace(out, trace)
    shutil.rmtree(parts)
    return trace


def _say(progress: TextIO | None, line: str) -> None:
    if progress is not None:
        print(line, file=progress, flush=True)


def record_pair(out: str | Path, target: Any, draft: Rows, prompts: Sequence[Sequence[int]],
                *, length: int, top_k: int, temperature: float, seed: int,
                meta: dict[str, Any], progress: TextIO | None = sys.stderr) -> Trace:
    """A trace of (``target``, ``draft``) over one document per prompt; ``meta`` holds at
    least ``pair`` and ``vocab`` (the target's vocabulary size)."""
    rest = {k: v for k, v in meta.items() if k not in ("pair", "vocab", "documents")}
    full = trace_meta(pair=meta["pair"], vocab=meta["vocab"], documents=len(prompts), **rest,
                      temperature=temperature, top_k=top_k, length=length)

    def make(d: int, rng: np.random.Generator) -> Trace:
        return document_trace(target, draft, prompts[d], length, top_k, temperature, rng, full)

    settings = {k: v for k, v in full.items() if k != "documents"}
    settings["prompts_sha256"] = _digest(prompts)
    return record(out, make, len(prompts), full, seed, settings, progress)


def _digest(prompts: Sequence[Sequence[int]]) -> str:
    import hashlib

    return hashlib.sha256(json.dumps([list(map(int, p)) for p in prompts]).encode()).hexdigest()
