"""``typical``: Medusa's typical acceptance -- accept plausible drafts, not exact ones (lossy).

Cai et al. 2024, "Medusa: Simple LLM Inference Acceleration Framework with Multiple Decoding
Heads", arXiv 2401.10774, Sec. 2.3.1 (typical acceptance): a drafted token x is accepted iff

    p(x) > min(epsilon, delta * exp(-H(p))),

with H(p) the entropy (nats) of the target's row at that position -- a hard floor epsilon and an
entropy-adaptive one (a flat p accepts more). The draft's own probability q never enters. At
the first rejection the round emits a token sampled from the target's row p there (Medusa takes
the base model's own prediction; there is no residual), after γ acceptances a bonus from p.
Medusa's code defaults are epsilon = 0.09 (``posterior_threshold``) and delta = 0.3
(``posterior_alpha``); it adds 1e-5 inside the logarithm of H, exact entropy (0 log 0 = 0) is
used here. Lossy: the emitted law is not the target's whenever some drafted token is accepted
that p would not sample as often (exact TV > 0, judged ``biased`` where the test has power).

A token-wise rule: its (S, S) tables feed :mod:`specsim.schemes.tokenwise`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import cast

import numpy as np

from specsim.schemes.law import FloatArray

__all__ = ["tables", "threshold"]


def threshold(P: FloatArray, epsilon: float, delta: float) -> FloatArray:
    """min(epsilon, delta exp(-H(p))) per row of P (..., V): shape (...,)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        plogp = np.where(P > 0, P * np.log(np.where(P > 0, P, 1.0)), 0.0)
    entropy = -plogp.sum(axis=-1)
    return cast(FloatArray, np.minimum(epsilon, delta * np.exp(-entropy)))


def tables(P: FloatArray, Q: FloatArray, knobs: Mapping[str, float]) -> tuple[FloatArray,
                                                                               FloatArray]:
    """(accept[c, x] in {0, 1}, reject[c, :] = P) of typical acceptance on rows P, Q."""
    limit = threshold(P, float(knobs["epsilon"]), float(knobs["delta"]))
    accept = (limit[..., None] < P).astype(np.float64)
    return accept, np.array(P, dtype=np.float64, copy=True)
