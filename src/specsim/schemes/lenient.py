"""``lenient``: Leviathan et al.'s lenience -- trade fidelity for acceptance (lossy).

Leviathan, Kalman & Matias 2022, "Fast Inference from Transformers via Speculative Decoding",
arXiv 2211.17192, Appendix A.5 ("Lenience"): with a lenience l in [0, 1], a drafted x ~ q is
accepted with probability min(1, p(x) / (l q(x))) instead of min(1, p(x) / q(x)). This module
writes the round as Algorithm 1 run against the scaled target p / l: on rejection it samples the
residual of that same scaled target, norm(max(p - l q, 0)) (p itself where it has no mass), so

* l = 1 is Algorithm 1 exactly (``correct``: same acceptance, same residual) -- the knob's
  neutral value, checked exactly in ``checks.csv``;
* l -> 0 accepts every draft with p(x) > 0 and the output drifts towards the draft's law:
  faster and biased (exact TV > 0 below l = 1 whenever p != q).

The test avoids the division like :func:`specsim.verify.accept`: accept iff u l q(x) < p(x); at
l = 0 that is "accept iff p(x) > 0". It is a token-wise rule: its (S, S) tables feed
:mod:`specsim.schemes.tokenwise`, so its exact law, Monte Carlo and draft-length policies are
those of every token-wise rule.
"""

from __future__ import annotations

from collections.abc import Mapping

from specsim.schemes.law import FloatArray
from specsim.verify import acceptance_probability, residual

__all__ = ["tables"]


def tables(P: FloatArray, Q: FloatArray, knobs: Mapping[str, float]) -> tuple[FloatArray,
                                                                               FloatArray]:
    """(accept[c, x], reject[c, :]) of lenience ``knobs['lenience']`` on rows P, Q (..., V)."""
    lenience = float(knobs["lenience"])
    scaled_q = lenience * Q
    return acceptance_probability(P, scaled_q), residual(P, scaled_q)
