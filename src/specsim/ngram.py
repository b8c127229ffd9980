"""Character n-gram language models on real English text: a real target and real drafts.

The corpus is text every CPython installation ships: the standard library's
``pydoc_data/topics.py`` (the ``topics`` dict, keys sorted) and the docstrings of the standard
library's own modules, extracted with :mod:`ast` from a sorted file list of the running
interpreter's ``stdlib`` directory. Documents (one per topic, one per docstring) are normalised
to a 96-character alphabet (newline plus printable ASCII) and split deterministically: every
``holdout_every``-th document is held out. The corpus is identified by the sha256 of its text.

The model family is interpolated Witten-Bell smoothing (Witten & Bell 1991; Chen & Goodman
1999, Eq. 17): for a context ``h`` with ``c(h)`` occurrences followed by ``t(h)`` distinct
characters,

    P_k(x | h) = (c(h, x) + t(h) P_{k-1}(x | h')) / (c(h) + t(h)),   h' = h without its oldest char

and ``P_k(x | h) = P_{k-1}(x | h')`` when ``h`` was never seen; the recursion ends in the unigram
interpolated with the uniform distribution, so every character of the alphabet has positive
probability in every context. One :class:`NGramModel` of order N holds the counts of all orders
1..N, so the order-k model (k <= N) -- a draft -- is the same recursion stopped at level k.

Contexts are integers: the last L characters ``c_{t-1}, ..., c_{t-L}`` as the base-V number
``c_{t-1} + V c_{t-2} + ... + V^(L-1) c_{t-L}``, so the suffix of length j is ``id % V**j`` and
appending a character is ``(id * V + x) % V**L``. Distributions for a batch of contexts are
computed without a Python loop over contexts.

The model is not tied to characters: ``vocab`` (default the 96 characters) sets the size of
the alphabet, and the LLM tier (:mod:`specsim.pairs.llm`) fits the same model to a tokenizer's
token ids (V = 49,152, orders up to 3: every key must stay below 2^63).
"""

from __future__ import annotations

import ast
import hashlib
import sysconfig
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from specsim.io import read_npz, require_arrays, write_npz

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
CodeArray = NDArray[np.uint8]

ALPHABET = "\n" + "".join(chr(i) for i in range(32, 127))  # newline + printable ASCII
V = len(ALPHABET)  # 96
_LUT = np.full(256, 255, dtype=np.uint8)
_LUT[np.frombuffer(ALPHABET.encode("ascii"), dtype=np.uint8)] = np.arange(V, dtype=np.uint8)
_CHARS = np.frombuffer(ALPHABET.encode("ascii"), dtype=np.uint8)
DENSE_MAX_CELLS = V**3  # levels whose (contexts x vocab) table fits get it precomputed
DOC_SEPARATOR = "\n\n"


# ---------------------------------------------------------------------------------------------
# Text <-> codes
# ---------------------------------------------------------------------------------------------
def normalise(text: str) -> str:
    """Tabs and carriage returns become spaces / newlines; characters outside the alphabet go."""
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\t", " ")
    raw = np.frombuffer(text.encode("ascii", errors="ignore"), dtype=np.uint8)
    return raw[_LUT[raw] != 255].tobytes().decode("ascii")


def encode(text: str) -> CodeArray:
    """Codes 0..V-1 of a normalised text (raises on characters outside the alphabet)."""
    raw = np.frombuffer(text.encode("ascii", errors="replace"), dtype=np.uint8)
    codes = _LUT[raw]
    if np.any(codes == 255) or not text.isascii():
        raise ValueError("text contains characters outside the alphabet; normalise() it first")
    return codes


def decode(codes: NDArray[Any]) -> str:
    return _CHARS[np.asarray(codes, dtype=np.intp)].tobytes().decode("ascii")


def context_id(text: str, length: int) -> int:
    """Integer id of the last ``length`` characters of ``text`` (must be that long)."""
    if len(text) < length:
        raise ValueError(f"context {text!r} is shorter than {length} characters")
    codes = encode(text[len(text) - length :]) if length else np.zeros(0, dtype=np.uint8)
    return int(sum(int(c) * V**j for j, c in enumerate(codes[::-1])))


def context_ids(codes: NDArray[Any], length: int, vocab: int = V) -> IntArray:
    """Ids of the ``length`` symbols before every position t >= length: shape (n - length,)."""
    codes = np.asarray(codes, dtype=np.int64)
    n = codes.size
    ids = np.zeros(max(n - length, 0), dtype=np.int64)
    for j in range(1, length + 1):  # symbol t-j has weight vocab^(j-1)
        ids += codes[length - j : n - j] * vocab ** (j - 1)
    return ids


def append(ctx: IntArray, x: IntArray, length: int, vocab: int = V) -> IntArray:
    """Contexts after emitting symbol ``x``: drop the oldest symbol, add ``x``."""
    return (ctx * vocab + x) % vocab**length


# ---------------------------------------------------------------------------------------------
# The corpus
# ---------------------------------------------------------------------------------------------
def stdlib_root() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def _is_source(path: Path, root: Path) -> bool:
    rel = path.relative_to(root).parts
    return (rel[0] != "site-packages" and "test" not in rel and "tests" not in rel
            and rel != ("pydoc_data", "topics.py"))


def stdlib_files(limit: int | None = None) -> list[Path]:
    """Standard-library sources, sorted by relative path (tests and site-packages left out)."""
    root = stdlib_root()
    files = sorted((p for p in root.rglob("*.py") if _is_source(p, root)),
                   key=lambda p: p.relative_to(root).as_posix())
    return files if limit is None else files[:limit]


_DOC_NODES = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
_BLOCKS = ("body", "orelse", "finalbody", "handlers", "cases")


def _statements(node: ast.AST) -> list[ast.AST]:
    """Nodes of every nested statement block in source order (expressions are not entered:
    only modules, classes and functions carry docstrings, and they are statements)."""
    out = [node]
    for name in _BLOCKS:
        for child in getattr(node, name, None) or ():
            out.extend(_statements(child))
    return out


def docstrings(path: Path) -> list[str]:
    """Docstrings of a module and its classes and functions, in source order, cleaned."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escape sequences in old modules
            tree = ast.parse(path.read_bytes(), filename=str(path))
    except (SyntaxError, ValueError):
        return []
    out = []
    for node in _statements(tree):
        if isinstance(node, _DOC_NODES):
            doc = ast.get_docstring(node, clean=True)
            if doc:
                out.append(doc)
    return out


def topic_documents() -> list[str]:
    """The pydoc topics shipped with the interpreter, one document per topic (keys sorted)."""
    from pydoc_data.topics import topics

    return [topics[k] for k in sorted(topics)]


@dataclass(frozen=True)
class Corpus:
    """Training and held-out character codes plus what identifies them."""

    train: CodeArray
    heldout: CodeArray
    sha256: str
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def n_chars(self) -> int:
        return int(self.train.size + self.heldout.size)


def build_corpus(holdout_every: int = 10, max_files: int | None = None) -> Corpus:
    """Deterministic corpus of the running interpreter: topics, then stdlib docstrings.

    Every ``holdout_every``-th document (1-based) is held out; documents are joined with a
    blank line. ``max_files`` limits the docstring sources (tests use a few for speed).
    """
    if holdout_every < 2:
        raise ValueError(f"holdout_every must be >= 2, got {holdout_every}")
    topics = [normalise(t) for t in topic_documents()]
    files = stdlib_files(max_files)
    docs = [normalise(d) for p in files for d in docstrings(p)]
    documents = [d for d in topics + docs if d.strip()]
    held = [d for i, d in enumerate(documents) if i % holdout_every == holdout_every - 1]
    kept = [d for i, d in enumerate(documents) if i % holdout_every != holdout_every - 1]
    train_text, held_text = DOC_SEPARATOR.join(kept), DOC_SEPARATOR.join(held)
    digest = hashlib.sha256()
    for d in documents:
        digest.update(d.encode("ascii"))
        digest.update(b"\0")
    meta = {
        "sources": {"pydoc_topics_chars": sum(map(len, topics)),
                    "docstring_chars": sum(map(len, docs)),
                    "docstring_files": len(files), "documents": len(documents)},
        "holdout_every": holdout_every,
        "train_chars": len(train_text),
        "heldout_chars": len(held_text),
        "stdlib": str(stdlib_root()),
        "alphabet_size": V,
    }
    return Corpus(encode(train_text), encode(held_text), digest.hexdigest(), meta)


def save_corpus(corpus: Corpus, path: str | Path) -> None:
    write_npz(path, {"train": corpus.train, "heldout": corpus.heldout,
                     "sha256": np.array(corpus.sha256)})


def load_corpus(path: str | Path) -> Corpus:
    z = read_npz(path)
    require_arrays(path, z, ("train", "heldout", "sha256"), "a corpus file",
                   "the realtext corpus step")
    return Corpus(z["train"], z["heldout"], str(z["sha256"]))


# ---------------------------------------------------------------------------------------------
# The model
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Level:
    """Counts of one order k >= 2: sorted n-gram keys ``h*V + x`` and, per seen context h,
    its total c(h), its number of distinct followers t(h) and where its keys start."""

    keys: IntArray
    counts: IntArray
    contexts: IntArray
    starts: IntArray  # (n_contexts + 1,) offsets into keys
    total: IntArray
    types: IntArray

    @classmethod
    def count(cls, codes: NDArray[Any], order: int, vocab: int = V) -> Level:
        length = order - 1
        x = np.asarray(codes[length:], dtype=np.int64)
        keys, counts = np.unique(context_ids(codes, length, vocab) * vocab + x,
                                 return_counts=True)
        contexts, first = np.unique(keys // vocab, return_index=True)
        starts = np.append(first, keys.size).astype(np.int64)
        total = np.add.reduceat(counts, first) if keys.size else np.zeros(0, np.int64)
        return cls(keys, counts.astype(np.int64), contexts, starts, total.astype(np.int64),
                   np.diff(starts))

    def find(self, ctx: IntArray) -> tuple[IntArray, NDArray[np.bool_]]:
        """Row of each context in ``contexts`` and whether it was seen."""
        pos = np.searchsorted(self.contexts, ctx)
        pos = np.minimum(pos, max(self.contexts.size - 1, 0))
        seen = (self.contexts[pos] == ctx) if self.contexts.size else np.zeros(ctx.shape, bool)
        return pos, seen

    def to_arrays(self, prefix: str) -> dict[str, NDArray[Any]]:
        return {f"{prefix}_keys": self.keys, f"{prefix}_counts": self.counts}

    @classmethod
    def from_arrays(cls, keys: IntArray, counts: IntArray, vocab: int = V) -> Level:
        contexts, first = np.unique(keys // vocab, return_index=True)
        starts = np.append(first, keys.size).astype(np.int64)
        total = np.add.reduceat(counts, first) if keys.size else np.zeros(0, np.int64)
        return cls(keys, counts, contexts, starts, total.astype(np.int64), np.diff(starts))


class NGramModel:
    """Interpolated Witten-Bell model of order ``order`` and all lower orders over ``V``
    symbols (the 96 characters unless fitted with another ``vocab``).

    ``probs(ctx, k)`` gives next-symbol distributions (n, V) of the order-k model for a batch
    of context ids; ``prob(ctx, x, k)`` the probability of given symbols; ``perplexity``
    the held-out perplexity.
    """

    def __init__(self, unigram: IntArray, levels: dict[int, Level]) -> None:
        self.unigram_counts = np.asarray(unigram, dtype=np.int64)
        self.V = vocab = int(self.unigram_counts.size)
        self.levels = levels
        self.order = max(levels, default=1)
        n, t = self.unigram_counts.sum(), np.count_nonzero(self.unigram_counts)
        # order 1: unigram interpolated with the uniform distribution (Witten-Bell, level 0)
        self.p1 = (self.unigram_counts + t / vocab) / (n + t)
        self.dense: dict[int, FloatArray] = {1: self.p1[None, :]}
        for k in range(2, self.order + 1):
            if vocab**k > DENSE_MAX_CELLS:
                break
            lower = np.tile(self.dense[k - 1], (vocab, 1))  # row h -> P_{k-1}(. | h % V^(k-2))
            lev = self.levels[k]
            table = lower.copy()
            rows = lev.keys // vocab
            cnt = np.zeros_like(table)
            cnt[rows, lev.keys % vocab] = lev.counts
            c, t_h = lev.total[:, None], lev.types[:, None]
            table[lev.contexts] = (cnt[lev.contexts] + t_h * lower[lev.contexts]) / (c + t_h)
            self.dense[k] = table

    @classmethod
    def fit(cls, codes: NDArray[Any], order: int, vocab: int = V) -> NGramModel:
        """Count every order 1..``order`` in one pass each (``numpy.unique`` on n-gram keys).

        ``codes`` are symbols 0..vocab-1 (characters by default, or a tokenizer's ids)."""
        if not 1 <= order <= 8 or vocab**order >= 2**63:
            raise ValueError(f"order must be in 1..8 with {vocab}^order < 2^63, got {order}")
        unigram = np.bincount(np.asarray(codes, dtype=np.intp), minlength=vocab)
        if unigram.size != vocab:
            raise ValueError(f"symbols must lie in 0..{vocab - 1}, got {unigram.size - 1}")
        return cls(unigram, {k: Level.count(codes, k, vocab) for k in range(2, order + 1)})

    def _check(self, order: int) -> int:
        if not 1 <= order <= self.order:
            raise ValueError(f"order must be in 1..{self.order}, got {order}")
        return order

    def n_contexts(self, order: int) -> int:
        return 1 if order == 1 else int(self.levels[order].contexts.size)

    # -- distributions --------------------------------------------------------------------
    def probs(self, ctx: IntArray, order: int) -> FloatArray:
        """Next-symbol distributions (n, V) of the order-``order`` model for context ids."""
        k = self._check(order)
        ids = np.asarray(ctx, dtype=np.int64) % self.V ** (k - 1)
        if k in self.dense:  # a table: its rows gathered directly (no dedupe needed)
            return self.dense[k][ids.ravel()].reshape(*ids.shape, self.V)
        uniq, inv = np.unique(ids, return_inverse=True)
        return self._probs_unique(uniq, k)[inv.ravel()].reshape(*ids.shape, self.V)

    def _probs_unique(self, ids: IntArray, k: int) -> FloatArray:
        vocab = self.V
        if k in self.dense:
            return self.dense[k][ids % vocab ** (k - 1)]
        uniq, inv = np.unique(ids % vocab ** (k - 2), return_inverse=True)
        out = self._probs_unique(uniq, k - 1)[inv]
        lev = self.levels[k]
        pos, seen = lev.find(ids)
        rows, where = pos[seen], np.flatnonzero(seen)
        if rows.size:
            # seen contexts: scale the lower-order row by t/(c+t) (in place), add c(h, x)/(c+t)
            c, t = lev.total[rows], lev.types[rows]
            out *= np.where(seen, lev.types[pos] / (lev.total[pos] + lev.types[pos]), 1.0)[:, None]
            owner = np.repeat(np.arange(rows.size), t)
            key = np.arange(owner.size) - np.repeat(np.cumsum(t) - t, t) + lev.starts[rows][owner]
            out[where[owner], lev.keys[key] % vocab] += lev.counts[key] / (c + t)[owner]
        return out

    def prob(self, ctx: IntArray, x: IntArray, order: int) -> FloatArray:
        """P_k(x | ctx) for paired arrays of context ids and characters, level by level."""
        k = self._check(order)
        vocab = self.V
        ctx = np.asarray(ctx, dtype=np.int64)
        x = np.asarray(x, dtype=np.int64)
        p = self.p1[x]
        for j in range(2, k + 1):
            lev = self.levels[j]
            h = ctx % vocab ** (j - 1)
            pos, seen = lev.find(h)
            key = h * vocab + x
            kpos = np.minimum(np.searchsorted(lev.keys, key), max(lev.keys.size - 1, 0))
            c_hx = np.where(lev.keys[kpos] == key, lev.counts[kpos], 0)
            c, t = lev.total[pos], lev.types[pos]
            p = np.where(seen, (c_hx + t * p) / np.where(seen, c + t, 1), p)
        return p

    def log_likelihood(self, codes: CodeArray, order: int, skip: int | None = None) -> FloatArray:
        """log P_k(x_t | x_{t-k+1..t-1}) for t >= ``skip`` (default: the model's full order)."""
        k = self._check(order)
        skip = self.order - 1 if skip is None else skip
        ctx = context_ids(codes, skip, self.V) if skip else np.zeros(len(codes), dtype=np.int64)
        if skip < k - 1:
            raise ValueError("skip must leave a full context for the order")
        return np.log(self.prob(ctx, np.asarray(codes[skip:], dtype=np.int64), k))

    def perplexity(self, codes: CodeArray, order: int) -> float:
        """exp of the mean negative log-likelihood per character (same positions for every k)."""
        return float(np.exp(-self.log_likelihood(codes, order).mean()))

    # -- persistence ----------------------------------------------------------------------
    def save(self, path: str | Path) -> None:
        arrays: dict[str, NDArray[Any]] = {"unigram": self.unigram_counts}
        for k, lev in self.levels.items():
            arrays |= lev.to_arrays(f"order{k}")
        write_npz(path, arrays)

    @classmethod
    def load(cls, path: str | Path) -> NGramModel:
        z = read_npz(path)  # verified against its sidecar before numpy reads it
        orders = [n for n in z if n.endswith("_keys")]
        require_arrays(path, z, ("unigram", *orders, *(n[:-5] + "_counts" for n in orders)),
                       "a model file", "the realtext model step")
        orders = sorted(int(n[5:].split("_")[0]) for n in z if n.endswith("_keys"))
        vocab = int(z["unigram"].size)
        levels = {k: Level.from_arrays(z[f"order{k}_keys"], z[f"order{k}_counts"], vocab)
                  for k in orders}
        return cls(z["unigram"], levels)


def overlap(model: NGramModel, ctx: IntArray, target_order: int, draft_order: int) -> FloatArray:
    """Per-context acceptance probability beta = sum_x min(p, q) (Leviathan Def. 3.1)."""
    return np.minimum(model.probs(ctx, target_order), model.probs(ctx, draft_order)).sum(axis=-1)
