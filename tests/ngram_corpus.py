"""The small n-gram corpus and model the real-text tests share (built once per process)."""

from __future__ import annotations

import functools

from specsim import ngram
from specsim.ngram import NGramModel

FILES = 40  # docstring sources for the small test corpus (all pydoc topics are always in)


@functools.cache
def corpus() -> ngram.Corpus:
    return ngram.build_corpus(max_files=FILES)


@functools.cache
def model() -> NGramModel:
    return NGramModel.fit(corpus().train, 5)
