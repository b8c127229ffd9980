"""The tier-1 corpus in the target's tokens, and the :class:`Lab`: target, tokenizer, corpus and
drafts, loaded once per step."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from specsim import timing
from specsim.ngram import NGramModel
from specsim.pairs.llm.drafts import CachedLM, Draft, ModelDraft, NGramDraft
from specsim.pairs.llm.loading import VOCAB, int8_copy, load_target, skip_copy
from specsim.pairs.llm.settings import Settings

IntArray = NDArray[np.int64]


@dataclass(frozen=True)
class TokenCorpus:
    train: IntArray
    heldout: IntArray
    sha256: str  # of the character corpus (specsim.ngram)
    chars: int


def token_corpus(tok: Any, holdout_every: int = 10) -> TokenCorpus:
    """The tier-1 corpus (same documents, same split) in the target's tokenisation."""
    from specsim.ngram import build_corpus, decode

    corpus = build_corpus(holdout_every)

    def ids(codes: Any) -> IntArray:
        return np.asarray(tok(decode(codes), add_special_tokens=False)["input_ids"],
                          dtype=np.int64)

    return TokenCorpus(ids(corpus.train), ids(corpus.heldout), corpus.sha256, corpus.n_chars)


def save_token_corpus(corpus: TokenCorpus, path: str | Path) -> None:
    from specsim.io import write_npz

    write_npz(path, {"train": corpus.train, "heldout": corpus.heldout,
                     "sha256": np.array(corpus.sha256), "chars": np.array(corpus.chars)})


def load_token_corpus(path: str | Path) -> TokenCorpus:
    from specsim.io import read_npz

    z = read_npz(path)  # verified against its sidecar before numpy reads it
    return TokenCorpus(z["train"].astype(np.int64), z["heldout"].astype(np.int64),
                       str(z["sha256"]), int(z["chars"]))


def heldout_windows(heldout: IntArray, n: int, length: int) -> IntArray:
    """``n`` evenly spaced windows of ``length`` tokens of ``heldout``, (n, length)."""
    starts = np.linspace(0, heldout.size - length - 1, n).astype(np.int64)
    return heldout[starts[:, None] + np.arange(length)]


class Lab:
    """The loaded target (on the settings' ``device`` in their ``dtype``; a transformer draft
    is a copy of it, so it runs there too, an n-gram draft stays numpy on the host), its
    tokenizer, the token corpus and the drafts (built lazily).

    ``corpus``: the tokenised corpus (``specsim llm corpus`` saves it); None tokenises it here.
    """

    def __init__(self, s: Settings, corpus: TokenCorpus | None = None,
                 root: str | Path | None = None) -> None:
        import torch

        self.s = s
        torch.set_num_threads(s.threads)
        t0 = timing.clock()
        self.model, self.tok = load_target(root, s.threads, s.device, s.dtype)
        self.load_seconds = timing.clock() - t0
        t0 = timing.clock()
        self.corpus = corpus if corpus is not None else token_corpus(self.tok, s.holdout_every)
        self.corpus_seconds = timing.clock() - t0
        self.target = CachedLM(self.model)
        self._drafts: dict[str, Draft] = {}
        self._ngram: NGramModel | None = None
        self.build_seconds: dict[str, float] = {}

    def ngram(self, order: int) -> NGramModel:
        """The token n-gram, with the counts of orders 1..max(ngram_orders, ``order``) (the
        order-k model is the same whatever the highest order counted)."""
        if self._ngram is None or self._ngram.order < order:
            t0 = timing.clock()
            self._ngram = NGramModel.fit(self.corpus.train, max([*self.s.ngram_orders, order]),
                                         VOCAB)
            self.build_seconds["ngram"] = timing.clock() - t0
        return self._ngram

    def draft(self, name: str) -> Draft:
        if name not in self._drafts:
            t0 = timing.clock()
            if name.startswith("ngram-"):
                order = int(name[6:])
                d: Draft = NGramDraft(name, self.ngram(order), order)
            elif name == "int8":
                d = ModelDraft(name, int8_copy(self.model))
            elif name.startswith("skip-"):
                d = ModelDraft(name, skip_copy(self.model, int(name[5:])))
            else:
                raise ValueError(f"unknown draft {name!r}")
            self.build_seconds[name] = timing.clock() - t0
            self._drafts[name] = d
        return self._drafts[name]

    def draft_names(self) -> list[str]:
        return self.s.draft_names()

    def windows(self, n: int, length: int) -> IntArray:
        """``n`` evenly spaced windows of held-out tokens, (n, length)."""
        return heldout_windows(self.corpus.heldout, n, length)

    def prompts(self) -> list[list[int]]:
        w = self.windows(self.s.prompts, self.s.prompt_tokens)
        return [row.tolist() for row in w]
