"""Measured speculative generation of a pair, counted per prompt: the one measurement the pair
stage's predicted-vs-measured tables and engine counters read, on any backend.

From every prompt, ``replicas`` chains each run speculative rounds (:meth:`.backend.PairBackend.
round`) until the chain has emitted ``length`` tokens: a chain's rounds are then exactly the
target calls that traverse one document of ``length`` positions, the quantity the positional
model's backward DP predicts from a trace (:func:`specsim.traces.positional.positional_law`).
The last round may emit past the document's end; drafts beyond it are not counted as tested,
and an engine's per-position counters count only the drafts it kept inside the document.

Uniforms: one generator seeded by ``seed``; each round draws (2γ+1, chains still running)
uniforms for the running chains, in chain order (:mod:`.backend` says how a round reads them).
With one prompt and one replica this is the stream of a single-sequence loop that draws
``rng.random((2γ+1, 1))`` a round.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from specsim.pairs.backend import PairBackend

RULE = "correct"


def measure(backend: PairBackend, prompts: Sequence[Any], length: int, replicas: int,
            gamma: int, seed: np.random.SeedSequence, rule: str = RULE
            ) -> dict[str, np.ndarray]:
    """Speculative generation from every prompt (D of them), ``replicas`` chains each, until
    each chain has emitted ``length`` tokens (module docstring). Per prompt (D,), summed over
    its replicas: ``calls`` (target calls), ``tokens`` (tokens emitted, the last round's
    overshoot included), ``tested`` and ``accepted`` drafts inside the document and the β =
    Σ min(p, q) of the tested ones (``beta``), and the same for each round's first draft
    (``tested_first``, ``beta_first``). ``accepted_at`` (γ,), summed over every chain: a_i, the
    rounds that kept >= i accepted drafts inside the document (an engine's per-position
    counters, :mod:`specsim.acceptance.counts`)."""
    if gamma < 1:
        raise ValueError(f"gamma must be at least 1 (got {gamma}): plain sampling has no rounds")
    d = len(prompts)
    n = d * replicas
    prompt = np.repeat(np.arange(d), replicas)
    ctx = backend.chains(prompts, replicas)
    emitted = np.zeros(n, dtype=np.int64)
    calls = np.zeros(n, dtype=np.int64)
    sums = {k: np.zeros(n) for k in ("tested", "accepted", "beta", "tested_first",
                                     "beta_first")}
    accepted_at = np.zeros((gamma, n), dtype=np.int64)
    rng = np.random.default_rng(seed)
    active = np.arange(n)
    i = np.arange(gamma)[:, None]
    while active.size:
        rnd = backend.round(ctx[active], gamma, rule, rng.random((2 * gamma + 1, active.size)))
        n_acc = rnd.accepted
        left = length - emitted[active]  # positions of the document still to emit
        tested = rnd.tested() & (i < left[None, :])
        sums["tested"][active] += tested.sum(axis=0)
        sums["accepted"][active] += np.minimum(n_acc, left)
        sums["beta"][active] += np.where(tested, rnd.beta, 0.0).sum(axis=0)
        sums["tested_first"][active] += tested[0]
        sums["beta_first"][active] += np.where(tested[0], rnd.beta[0], 0.0)
        kept = np.minimum(n_acc, left - 1)  # accepted drafts emitted inside the document
        accepted_at[:, active] += i + 1 <= kept[None, :]
        emitted[active] += rnd.emitted
        calls[active] += 1
        ctx[active] = rnd.next_contexts
        active = active[emitted[active] < length]
    out = {k: np.bincount(prompt, weights=v, minlength=d) for k, v in sums.items()}
    out["calls"] = np.bincount(prompt, weights=calls, minlength=d)
    out["tokens"] = np.bincount(prompt, weights=emitted, minlength=d)
    out["accepted_at"] = accepted_at.sum(axis=1)
    return out
