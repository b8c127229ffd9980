"""The notebook's stub as (p, q) pairs: fresh target logits ``N(0, sigma^2)``, draft = target
log-probabilities plus ``N(0, noise^2)`` logit noise (:func:`iid_pairs`), and its frozen Markov
form (:func:`iid_frozen_markov`). The ``iid`` family (:mod:`specsim.families.iid`) serves them.
"""

from __future__ import annotations

import numpy as np

from specsim.models.maths import calibrate_far, softmax
from specsim.models.spec import ModelSpec, drafted
from specsim.sampling import FloatArray

IID_EPS = 1e-12  # the notebook's log(target + 1e-12)


def iid_pairs(
    spec: ModelSpec,
    temperature: float,
    alpha: float | None,
    rng: np.random.Generator,
    shape: tuple[int, ...],
) -> tuple[FloatArray, FloatArray]:
    """Draw fresh (p, q) pairs of the notebook's stub, arrays of shape ``shape + (vocab,)``.

    Target logits ~ N(0, sigma^2); draft logits = log(p + 1e-12) + N(0, noise^2) with p the
    T = 1 target (the notebook's ``draft_dist``); both then standardised at the temperature.
    Calibrated drafts blend p with the one-hot on p's least likely token, per pair. Argmax
    drafting takes the draft's argmax (:func:`specsim.models.spec.drafted`).
    """
    p, q = _pairs(spec, temperature, alpha, rng, shape)
    return p, drafted(spec, q)


def _pairs(spec: ModelSpec, temperature: float, alpha: float | None, rng: np.random.Generator,
           shape: tuple[int, ...]) -> tuple[FloatArray, FloatArray]:
    logits = rng.normal(0.0, spec.sigma, (*shape, spec.vocab))
    p1 = softmax(logits)
    target = p1 if temperature == 1 else softmax(logits, temperature)
    if spec.draft == "calibrated":
        if alpha is None:
            raise ValueError(f"model {spec.name!r} has a calibrated draft and needs an alpha")
        return target, calibrate_far(target, alpha)
    if spec.draft == "identical":
        return target, target.copy()
    if spec.draft == "uniform":
        return target, np.full_like(target, 1.0 / spec.vocab)
    if spec.draft not in ("noise", "temper"):
        raise ValueError(f"draft kind {spec.draft!r} is not available for iid model {spec.name!r}")
    noise_scale = spec.noise if spec.draft == "noise" else 0.0
    draft_logits = p1 + IID_EPS
    np.log(draft_logits, out=draft_logits)
    draft_logits += rng.normal(0.0, noise_scale, p1.shape)
    if spec.draft == "temper":
        draft_logits /= spec.draft_temperature
    return target, softmax(draft_logits, temperature)


def iid_frozen_markov(
    spec: ModelSpec, temperature: float, alpha: float | None, positions: int
) -> tuple[FloatArray, FloatArray, int]:
    """The stub with one frozen (p_t, q_t) per position t, as an order-1 Markov model.

    A fixed sequence of pairs drawn from ``spec.seed`` is a position-indexed process; making the
    position part of the token (state ``t*V + x`` = token x emitted at position t, plus a start
    state) turns it into an ordinary Markov table, so the Markov engine and the exact enumeration
    apply unchanged. Returns (P, Q, start_state); tokens map back with ``state % V``.
    """
    rng = np.random.default_rng(spec.seed)
    p, q = iid_pairs(spec, temperature, alpha, rng, (positions,))
    return chain_of_rows(p, q)


def chain_of_rows(p: FloatArray, q: FloatArray) -> tuple[FloatArray, FloatArray, int]:
    """(P, Q, start state) of the position-indexed chain of frozen rows p, q (length, V):
    state ``t*V + x`` is token x emitted at position t, plus a start state ``length*V``. From the
    start state the next token is at position 0, from (t, x) at position t+1; the last position
    is absorbing (it reuses its pair). Tokens map back with ``state % V``."""
    length, v = p.shape
    n_states = length * v + 1
    first = length * v
    big_p = np.zeros((n_states, n_states))
    big_q = np.zeros((n_states, n_states))
    big_p[first, 0:v], big_q[first, 0:v] = p[0], q[0]
    for t in range(length - 1):
        rows = slice(t * v, (t + 1) * v)
        cols = slice((t + 1) * v, (t + 2) * v)
        big_p[rows, cols], big_q[rows, cols] = p[t + 1], q[t + 1]
    last = slice((length - 1) * v, length * v)
    big_p[last, last], big_q[last, last] = p[-1], q[-1]
    return big_p, big_q, first
