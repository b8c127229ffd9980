"""Record the traces of the n-gram pairs: text the target generates, both rows at every position.

Each document is one held-out prompt (:func:`.rounds.prompts`, the ``trace`` prompt seed)
continued by the order-``target_order`` model for ``trace.length`` characters, sampled at
temperature 1 with the document's own uniforms (seeded by the root seed and the document's
index, so a document's text does not depend on how many others are recorded with it or in
which block). At every position the target's full row p and each draft order's full row q in
the same context go through :func:`specsim.traces.format.from_full_rows` (top-k of p ∪ q, the
tails, α from the full rows): one trace per draft order, ``ngram_o<k>`` (TRACE_PATH).

At another sampling temperature T (``trace.temperatures``, one job each) both full rows are
standardised at T before anything else (Leviathan §2.2; :func:`specsim.models.maths.temper`,
T = 0 the one-hot argmax), the text is sampled from the tempered target with the same
uniforms, and the traces go to :func:`specsim.realtext_settings.tempered_trace_path`.

Resumable (:mod:`specsim.pairs.recording`, the writer both backends use): documents are recorded
in blocks (:func:`block_documents`), each block of each pair a part file of its own that carries
the key of everything that shapes it (settings, root seed, corpus and model digests); a run that
was killed reuses every part whose key matches and records only the rest.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from specsim.errors import InputError
from specsim.io import file_sha256
from specsim.models.maths import temper
from specsim.ngram import Corpus, NGramModel, V, append, decode
from specsim.pairs.realtext.rounds import prompts
from specsim.pairs.recording import Recorded, record_key, record_traces
from specsim.realtext_settings import Settings, tempered_trace_path, trace_pairs
from specsim.sampling import sample_rows
from specsim.seeds import seed_for
from specsim.traces.format import Trace, from_full_rows, trace_meta

BLOCK = 64  # documents per part file (a resumed run loses at most one block per pair)
#: Positions of one block at most (64 documents of the default 128 characters): longer
#: documents go fewer to a block -- one at least -- so a block's full rows (positions x V per
#: draft order) stay ~6 MB whatever ``trace.length``.
BLOCK_POSITIONS = 8192


def block_documents(s: Settings) -> int:
    """Documents per block: :data:`BLOCK`, fewer when they are long (:data:`BLOCK_POSITIONS`)."""
    return max(1, min(BLOCK, BLOCK_POSITIONS // s.trace_length))
TEMPERATURE = 1.0


def prompt_seed(seed: int) -> np.random.SeedSequence:
    """Seed of the trace's prompts (the measured generation starts from the same ones)."""
    return seed_for(seed, "trace", "prompts")


def trace_prompts(corpus: Corpus, s: Settings, seed: int) -> np.ndarray:
    """Context ids of the ``trace.documents`` held-out prompts."""
    return prompts(corpus, s.trace_documents, s.target_order - 1, prompt_seed(seed))


def document_text(model: NGramModel, s: Settings, start: np.ndarray, docs: np.ndarray,
                  seed: int, temperature: float = TEMPERATURE
                  ) -> tuple[np.ndarray, list[np.ndarray], np.ndarray]:
    """Generate the documents ``docs`` from contexts ``start`` at a sampling temperature:
    (contexts before each position (n, L), the tempered target rows (L arrays (n, V)), the
    sampled characters (n, L))."""
    length = s.trace_length
    u = np.stack([np.random.default_rng(seed_for(seed, "trace", "text", int(d))).random(length)
                  for d in docs])
    ctx = start.copy()
    ctxs = np.empty((docs.size, length), dtype=np.int64)
    tokens = np.empty((docs.size, length), dtype=np.int64)
    rows = []
    for t in range(length):
        ctxs[:, t] = ctx
        p = temper(model.probs(ctx, s.target_order), temperature)
        rows.append(p)
        tokens[:, t] = sample_rows(p, u[:, t])
        ctx = append(ctx, tokens[:, t], s.target_order - 1)
    return ctxs, rows, tokens


def record_block(model: NGramModel, s: Settings, start: np.ndarray, docs: np.ndarray,
                 seed: int, meta: dict[str, dict[str, Any]],
                 temperature: float = TEMPERATURE) -> dict[str, Trace]:
    """The traces (one per draft order) of the documents ``docs``, positions in order."""
    ctxs, p_rows, tokens = document_text(model, s, start, docs, seed, temperature)
    n, length = tokens.shape
    # position-major within a document: row d * L + t
    P = np.stack(p_rows, axis=1).reshape(n * length, -1)
    flat_ctx = ctxs.reshape(-1)
    doc_start = np.arange(n + 1, dtype=np.int64) * length
    out = {}
    for k, pair in zip(s.draft_orders, trace_pairs(s), strict=True):
        Q = temper(model.probs(flat_ctx, k), temperature)
        offsets, support, p, q, p_tail, q_tail, alpha = from_full_rows(P, Q, s.trace_top_k)
        m = dict(meta[pair], documents=n)
        out[pair] = Trace(m, doc_start, tokens.reshape(-1), offsets, support, p, q, p_tail,
                          q_tail, alpha)
    return out


def pair_meta(s: Settings, corpus: Corpus, seed: int, start: np.ndarray,
              temperature: float = TEMPERATURE) -> dict[str, Any]:
    """The ``specsim.trace`` metadata of each pair's trace (``documents`` filled in later)."""
    length = s.target_order - 1
    common = {
        "target": f"order-{s.target_order} interpolated Witten-Bell character n-gram "
                  f"(specsim.ngram) on the realtext corpus",
        "temperature": float(temperature), "top_k": s.trace_top_k, "text": "target",
        "source": f"realtext corpus sha256 {corpus.sha256}: held-out prompts continued by the "
                  f"target, {s.trace_length} characters each",
        "prompt_seed": seed, "prompt_contexts": [int(c) for c in start],
        "prompts": [decode(np.array([(int(c) // V**j) % V for j in range(length)][::-1]))
                    for c in start],
        "alphabet": "specsim.ngram.ALPHABET (code 0 = newline, then printable ASCII)",
    }
    return {pair: trace_meta(pair=pair, vocab=V, documents=len(start),
                             draft=f"order-{k} interpolated Witten-Bell character n-gram "
                                   f"(the target's counts, stopped at order {k})", **common)
            for k, pair in zip(s.draft_orders, trace_pairs(s), strict=True)}


def record_ngram(model: NGramModel, model_path: str | Path, corpus: Corpus, s: Settings,
                 seed: int, out_dir: str | Path, *, temperature: float = TEMPERATURE,
                 stop_after: int | None = None,
                 say: Callable[[str], None] | None = None) -> Recorded:
    """Record every pair's trace at ``temperature`` into ``out_dir`` (the file names of
    :func:`~specsim.realtext_settings.tempered_trace_path`), resuming from parts.

    ``stop_after``: record at most that many new blocks, then stop before combining (what a
    killed job leaves behind; the tests resume from it). ``say``: progress lines."""
    say = say or (lambda line: print(line, file=sys.stderr, flush=True))
    if model.V != V:
        raise InputError(f"--model {model_path}: a model over {model.V} symbols; the n-gram "
                         f"pairs are character models over specsim.ngram's {V}")
    if model.order < s.target_order:
        raise InputError(f"--model {model_path}: an order-{model.order} model, and --settings "
                         f"asks for model.target_order {s.target_order}; give the model the "
                         f"realtext model step writes with these settings")
    start = trace_prompts(corpus, s, seed)
    temperature = float(temperature)
    meta = pair_meta(s, corpus, seed, start, temperature)
    settings = s.to_dict()
    settings["trace"].pop("temperatures", None)  # which others are recorded shapes no trace
    shaping: dict[str, Any] = {
        "settings": {k: settings[k] for k in ("model", "trace")}, "seed": seed,
        "corpus": corpus.sha256, "model": file_sha256(model_path)}
    if temperature != TEMPERATURE:  # absent at 1.0: earlier runs' parts stay reusable
        shaping["temperature"] = temperature
    paths = {pair: Path(out_dir) / Path(tempered_trace_path(pair, temperature)).name
             for pair in trace_pairs(s)}

    def make(docs: list[int]) -> dict[str, Trace]:
        d = np.asarray(docs, dtype=np.int64)
        return record_block(model, s, start[d], d, seed, meta, temperature)

    return record_traces(paths, make, s.trace_documents, block_documents(s),
                         record_key(shaping), meta, flag="--out-dir", say=say,
                         stop_after=stop_after)
