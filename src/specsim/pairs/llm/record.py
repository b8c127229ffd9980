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

Batches: ``batch`` documents are sampled together, one target forward per position for the
whole batch (:func:`sample_documents`), and a :class:`ForwardRows` draft reads the batch in one
pass. Prompts of one length (the tier's held-out windows) are stacked as they are; prompts of
different lengths are left-padded, with an attention mask and position ids that count each
document's own tokens (:class:`.batched.BatchLM`), so every document sees what it sees alone.
Document d draws its ``length`` uniforms from a generator seeded by (seed, d) alone, one per
position in order, whatever batch it is in: batching changes a document's rows only by
floating-point rounding (matrix products of another shape), and its tokens only if a uniform
falls within that rounding of a CDF step.

Resumable (:mod:`specsim.pairs.recording`, the writer both backends use): each finished batch
is written atomically to ``<out>.parts/`` with the key of everything that decides its documents;
a rerun reuses the parts of its own key and records the rest, and writes the same file as an
uninterrupted run. The final file is written atomically, then the parts are removed. Progress:
one line on stderr per batch. torch is imported only inside the functions
that run a model.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, TextIO

import numpy as np

from specsim.models.maths import temper
from specsim.pairs.recording import record_key, record_traces
from specsim.sampling import FloatArray, sample_rows
from specsim.seeds import seed_for
from specsim.traces.format import Trace, concat_traces, from_full_rows, trace_meta

__all__ = ["ForwardRows", "Rows", "StepRows", "document_trace", "document_traces",
           "record_pair", "sample_documents"]


class Rows(Protocol):
    """Next-token distributions along sequences: ``rows(seq, start)`` is (len(seq) - start,
    V), row j the distribution of the token after ``seq[: start + j]`` (temperature 1);
    ``batch_rows(seqs, starts)`` the same for several sequences at once."""

    def rows(self, seq: Sequence[int], start: int) -> FloatArray: ...

    def batch_rows(self, seqs: Sequence[Sequence[int]], starts: Sequence[int]
                   ) -> list[FloatArray]: ...


class ForwardRows:
    """A causal LM (transformers) in ONE cache-free forward pass over the sequences (left-padded
    with an attention mask when their lengths differ)."""

    def __init__(self, model: Any) -> None:
        self.model = model

    def rows(self, seq: Sequence[int], start: int) -> FloatArray:
        return self.batch_rows([seq], [start])[0]

    def batch_rows(self, seqs: Sequence[Sequence[int]], starts: Sequence[int]
                   ) -> list[FloatArray]:
        import torch

        from specsim.pairs.llm.loading import softmax, token_tensor

        width = max(len(s) for s in seqs)
        pad = [width - len(s) for s in seqs]
        ids = np.array([[0] * k + list(s) for k, s in zip(pad, seqs, strict=True)])
        kw: dict[str, Any] = {}
        if any(pad):
            mask = np.arange(width)[None, :] >= np.array(pad)[:, None]
            kw = {"attention_mask": token_tensor(mask, self.model),
                  "position_ids": token_tensor(np.maximum(np.cumsum(mask, 1) - 1, 0),
                                               self.model)}
        with torch.inference_mode():
            logits = self.model(token_tensor(ids, self.model), **kw).logits
        return [softmax(logits[i, k + start - 1 : width - 1])
                for i, (k, start) in enumerate(zip(pad, starts, strict=True))]


class StepRows:
    """A draft with ``reset()`` and ``probs(seq)`` (:mod:`.drafts`), asked once per position
    as Alg. 1 asks it: a model draft feeds one new token per step through its KV cache (the
    int8 draft's dynamic quantisation makes a batched pass a different draft), one sequence
    after another."""

    def __init__(self, draft: Any) -> None:
        self.draft = draft

    def rows(self, seq: Sequence[int], start: int) -> FloatArray:
        self.draft.reset()
        seq = list(seq)
        return np.stack([self.draft.probs(seq[:j]) for j in range(start, len(seq))])

    def batch_rows(self, seqs: Sequence[Sequence[int]], starts: Sequence[int]
                   ) -> list[FloatArray]:
        return [self.rows(s, k) for s, k in zip(seqs, starts, strict=True)]


def _pad(rows: FloatArray, width: int) -> FloatArray:
    """Rows over a smaller vocabulary padded with zeros (ids a model lacks have probability 0)."""
    if rows.shape[1] == width:
        return rows
    return np.pad(rows, ((0, 0), (0, width - rows.shape[1])))


def sample_documents(target: Any, prompts: Sequence[Sequence[int]], length: int,
                     temperature: float, uniforms: FloatArray
                     ) -> tuple[list[list[int]], list[FloatArray]]:
    """``length`` tokens the target samples after each prompt (KV-cached, one forward per
    position for the whole batch, inverse-CDF draws as in :mod:`.generation`: token j of
    document i from ``uniforms[i, j]``) and the distributions they were drawn from, (length, V)
    per document (module docstring: equal-length prompts stacked, others left-padded)."""
    import torch

    from specsim.pairs.llm.batched import BatchLM
    from specsim.pairs.llm.loading import softmax, token_tensor

    b = len(prompts)
    width = max(len(p) for p in prompts)
    ragged = any(len(p) != width for p in prompts)
    lm = BatchLM(target)
    lm.reset(b)
    cache: Any = None

    def forward(ids: Any, valid: Any = None) -> Any:
        nonlocal cache
        if ragged:
            return lm.forward(ids, valid)[:, -1]
        with torch.inference_mode():
            out = target(token_tensor(ids, target), cache=cache, use_cache=True,
                         logits_to_keep=1)
        cache = out.cache
        return out.logits[:, -1]

    pad = np.array([width - len(p) for p in prompts])
    ids = np.array([[0] * k + list(p) for k, p in zip(pad, prompts, strict=True)])
    logits = forward(ids, np.arange(width)[None, :] >= pad[:, None])
    tokens = np.zeros((b, length), dtype=np.int64)
    rows = []
    for j in range(length):
        p = temper(softmax(logits), temperature)
        rows.append(p)
        tokens[:, j] = sample_rows(p, uniforms[:, j])
        if j + 1 < length:
            logits = forward(tokens[:, j : j + 1])
    P = np.stack(rows, axis=1)
    return tokens.tolist(), list(P)


def document_traces(target: Any, draft: Rows, prompts: Sequence[Sequence[int]], length: int,
                    top_k: int, temperature: float, rngs: Sequence[np.random.Generator],
                    meta: dict[str, Any]) -> list[Trace]:
    """A batch of documents: the target's continuation of each prompt with p and q at every
    position (document i's uniforms from ``rngs[i]``)."""
    uniforms = np.stack([rng.random(length) for rng in rngs])
    tokens, Ps = sample_documents(target, prompts, length, temperature, uniforms)
    Qs = draft.batch_rows([[*p, *t] for p, t in zip(prompts, tokens, strict=True)],
                          [len(p) for p in prompts])
    out = []
    for toks, P, Q in zip(tokens, Ps, Qs, strict=True):
        Q = temper(Q, temperature)
        width = max(P.shape[1], Q.shape[1], int(meta["vocab"]))
        offsets, support, p, q, p_tail, q_tail, alpha = from_full_rows(_pad(P, width),
                                                                      _pad(Q, width), top_k)
        out.append(Trace({**meta, "vocab": width, "documents": 1}, np.array([0, length]),
                         np.asarray(toks, dtype=np.int64), offsets, support, p, q, p_tail,
                         q_tail, alpha))
    return out


def document_trace(target: Any, draft: Rows, prompt: Sequence[int], length: int, top_k: int,
                   temperature: float, rng: np.random.Generator, meta: dict[str, Any]) -> Trace:
    """One document (:func:`document_traces` of a batch of one)."""
    return document_traces(target, draft, [prompt], length, top_k, temperature, [rng], meta)[0]


def record_pair(out: str | Path, target: Any, draft: Rows, prompts: Sequence[Sequence[int]],
                *, length: int, top_k: int, temperature: float, seed: int,
                meta: dict[str, Any], progress: TextIO | None = sys.stderr,
                batch: int = 1) -> Trace:
    """A trace of (``target``, ``draft``) over one document per prompt, ``batch`` documents
    per forward pass, resumably (module docstring); document d draws its uniforms from a
    generator seeded by (``seed``, d) alone. ``meta`` holds at least ``pair`` and ``vocab``
    (the target's vocabulary size), and whatever else decides the rows (device, dtype)."""
    rest = {k: v for k, v in meta.items() if k not in ("pair", "vocab", "documents")}
    full = trace_meta(pair=meta["pair"], vocab=meta["vocab"], documents=len(prompts), **rest,
                      temperature=temperature, top_k=top_k, length=length)
    pair = str(full["pair"])

    def make(ds: list[int]) -> dict[str, Trace]:
        rngs = [np.random.default_rng(seed_for(seed, "record", d)) for d in ds]
        docs = document_traces(target, draft, [prompts[d] for d in ds], length, top_k,
                               temperature, rngs, full)
        return {pair: concat_traces(docs, {**full, "vocab": max(t.vocab for t in docs)})}

    def say(line: str) -> None:
        if progress is not None:
            print(line, file=progress, flush=True)

    shaping = {k: v for k, v in full.items() if k != "documents"}
    key = record_key({**shaping, "prompts": [list(map(int, p)) for p in prompts], "seed": seed,
                      "documents": len(prompts)})
    return record_traces({pair: Path(out)}, make, len(prompts), batch, key, {pair: full},
                         flag="--out", say=say).traces[pair]
