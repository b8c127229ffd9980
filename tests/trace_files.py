"""Small synthetic traces and trace-model configs for the trace tests, unit and workflow alike:
random (p, q) rows (:func:`make_trace`, :func:`dirichlet_trace`), and a config's grid or its
one-line refusal (:func:`grid_of`, :func:`refusal`)."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest
from conftest import SCHEMA

from specsim.config import validate_config
from specsim.errors import ConfigError
from specsim.grid import build_grid
from specsim.traces.format import Trace, from_full_rows, trace_meta


def make_trace(lengths: list[int], vocab: int = 10, top_k: int = 4, seed: int = 0,
               same: bool = False) -> Trace:
    """A trace of random (p, q) rows (q = 0.6 p + 0.4 other), or one pair repeated."""
    rng = np.random.default_rng(seed)
    n = int(sum(lengths))
    P = rows(rng, 1 if same else n, vocab)
    Q = 0.6 * P + 0.4 * rows(rng, P.shape[0], vocab)
    if same:
        P, Q = np.repeat(P, n, axis=0), np.repeat(Q, n, axis=0)
    off, sup, p, q, pt, qt, a = from_full_rows(P, Q, top_k)
    ds = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    meta = trace_meta(pair="test", vocab=vocab, documents=len(lengths))
    return Trace(meta, ds, np.full(n, -1, dtype=np.int64), off, sup, p, q, pt, qt, a)


def rows(rng: np.random.Generator, n: int, vocab: int, sharp: float = 2.0) -> np.ndarray:
    x = rng.normal(0.0, sharp, (n, vocab))
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def dirichlet_trace(lengths=(7, 3, 12), vocab=9, top_k=3, seed=0) -> Trace:
    """A trace of Dirichlet (p, q) rows (q = 0.6 p + 0.4 other), its tokens drawn from p."""
    rng = np.random.default_rng(seed)
    n = sum(lengths)
    P = rng.dirichlet(np.full(vocab, 0.4), size=n)
    Q = 0.6 * P + 0.4 * rng.dirichlet(np.full(vocab, 0.4), size=n)
    cols = from_full_rows(P, Q, top_k)
    starts = np.concatenate([[0], np.cumsum(lengths)])
    token = np.array([rng.choice(vocab, p=row) for row in P])
    return Trace(trace_meta(pair="test", vocab=vocab, documents=len(lengths)), starts, token,
                 *cols)


def grid_of(cfg: dict[str, Any]) -> Any:
    return build_grid(validate_config(copy.deepcopy(cfg), SCHEMA))


def refusal(cfg: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as err:
        grid_of(cfg)
    msg = str(err.value)
    assert "\n" not in msg, msg
    return msg
