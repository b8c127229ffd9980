"""The verification step of speculative decoding, for any draft and target probabilities.

Leviathan, Kalman & Matias 2022, "Fast Inference from Transformers via Speculative Decoding"
(arXiv 2211.17192), Algorithm 1, cited as [L]; Chen et al. 2023, "Accelerating Large Language
Model Decoding with Speculative Sampling" (arXiv 2302.01318), Algorithm 2, cited as [C].

One round, given the target's rows ``p`` at the γ+1 positions, the draft's rows ``q`` at the γ
drafted positions and the γ drafted tokens ``x``:

1. for i = 0, 1, ...: accept ``x_i`` with probability ``min(1, p_i(x_i) / q_i(x_i))``;
2. at the first rejection i, emit one token from the residual ``norm(max(p_i - q_i, 0))`` --
   from ``p_i`` itself when the residual has no mass -- and stop;
3. if all γ drafts are accepted, emit a bonus token from ``p_γ``.

The round emits the accepted drafts and then that one token ([L] Thm 3.5, [C] Thm 1: each
emitted token has the target's law). Everything specsim simulates goes through the pieces
below -- :data:`RULES`, :func:`accept`, :func:`acceptance_probability`, :func:`residual`,
:func:`rejection_distribution` and :func:`first_rejection` -- so the acceptance test and the
residual are written once: the Markov engine tabulates them per (context, token) cell, the
n-gram and LLM experiments and :func:`verify` apply them to explicit rows.

The public entry point is :func:`verify` (re-exported as ``specsim.verify``), batched over
arbitrary leading axes in the layout of Hugging Face transformers' ``_speculative_sampling``
(``p`` (batch, γ+1, V), ``q`` (batch, γ, V)) and vLLM's rejection sampler (output tokens
(batch, γ+1) padded with the placeholder -1). Because ``specsim.verify`` is the function, import
this module's other names with ``from specsim.verify import ...``.

Four rules reproduce the seed program's ``verify_round``: ``correct`` (Alg. 1) and three
deliberate breakages kept to show that the lossless checks have power; four more are the
literature's schemes -- ``block``, ``multi_draft``, ``lenient``, ``typical`` -- registered here
with their knobs and played by their own modules under :mod:`specsim.schemes` (``scheme`` of
their :class:`RuleSpec`); see :data:`RULES`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final, Literal, cast, get_args

import numpy as np
from numpy.typing import ArrayLike, NDArray

from specsim.sampling import FloatArray, IntArray, sample_rows

__all__ = [
    "CLASSIC_RULES",
    "PLACEHOLDER",
    "ROW_TOL",
    "RULES",
    "RULE_NAMES",
    "KnobSpec",
    "Rule",
    "RuleSpec",
    "VerifyResult",
    "accept",
    "acceptance_probability",
    "check_round",
    "check_rows",
    "first_rejection",
    "rejection_distribution",
    "residual",
    "rule_spec",
    "verify",
    "verify_uniforms",
]

Rule = Literal["correct", "greedy", "no_resample", "continue",
               "block", "multi_draft", "lenient", "typical"]
RULE_NAMES: Final[tuple[Rule, ...]] = cast("tuple[Rule, ...]", get_args(Rule))
PLACEHOLDER: Final = -1  # the padding of VerifyResult.tokens after the last emitted token
ROW_TOL: Final = 1e-4  # how far from 1 a row of verify()'s inputs may sum before it is refused


# ---------------------------------------------------------------------------------------------
# The rules
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class KnobSpec:
    """A numeric setting of a rule or policy: its domain [low, high] (``low_open``: low itself
    excluded), integer or real, its default, and the value at which the scheme reduces to
    Algorithm 1 with a fixed draft length (``neutral``, None if it never does)."""

    name: str
    meaning: str
    low: float
    high: float
    default: float
    integer: bool = False
    low_open: bool = False
    neutral: float | None = None

    @property
    def domain(self) -> str:
        low = "(" if self.low_open else "["
        kind = "integer " if self.integer else ""
        return f"{kind}{low}{self.low:g}, {self.high:g}]"

    def check(self, value: object, where: str) -> float:
        """The value as a number of the knob's kind; ValueError naming ``where`` otherwise."""
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        v = float(value) if ok else float("nan")  # type: ignore[arg-type]
        inside = ok and (self.low < v if self.low_open else self.low <= v) and v <= self.high
        if not inside or (self.integer and v != int(v)):
            raise ValueError(f"{where}: {value!r} is outside the domain of {self.name}, "
                             f"{self.domain} ({self.meaning})")
        return int(v) if self.integer else v


@dataclass(frozen=True)
class RuleSpec:
    """One verification rule: its accept step and what is emitted on the first rejection.

    ``accept``: ``"ratio"`` accepts a drafted x with probability min(1, p(x)/q(x)) ([L] Alg. 1
    step 'if r < p(x)/q(x)'); ``"argmax"`` accepts iff x is the target's argmax (first index on
    ties), whatever q is. ``on_rejection``: ``"residual"`` samples norm(max(p - q, 0)) ([L]
    Alg. 1, p' of Thm 3.5), ``"target"`` samples p. ``keep_drafts``: after the rejection token
    the remaining drafts are emitted too (γ tokens in all). ``label``: what the rule does in a
    few words, for figure legends (``name (label)``). ``scheme``: the module of
    :mod:`specsim.schemes` that plays the rule (its accept step is then ``"scheme"``: not a
    per-token table of the Markov engine) -- None for the engine's own rules. ``knobs``: the
    rule's settings; ``source``: the paper it is written from.
    """

    name: Rule
    meaning: str
    lossless: bool
    accept: Literal["ratio", "argmax", "scheme"]
    on_rejection: Literal["residual", "target"]
    keep_drafts: bool = False
    label: str = ""
    scheme: str | None = None
    knobs: tuple[KnobSpec, ...] = ()
    source: str = ""

    @property
    def legend(self) -> str:
        """``name (label)``: the config's spelling first, then what the rule does."""
        return f"{self.name} ({self.label})" if self.label else self.name


RULES: Final[Mapping[Rule, RuleSpec]] = MappingProxyType({
    "correct": RuleSpec(
        "correct", "accept x w.p. min(1, p(x)/q(x)); on rejection sample norm(max(p - q, 0)) "
        "(p itself when that residual has no mass)", True, "ratio", "residual",
        label="residual"),
    "greedy": RuleSpec(
        "greedy", "BREAK: accept iff x is the target's argmax; on rejection sample the residual",
        False, "argmax", "residual", label="argmax"),
    "no_resample": RuleSpec(
        "no_resample", "BREAK: on rejection sample from p instead of the residual",
        False, "ratio", "target", label="resample from p"),
    "continue": RuleSpec(
        "continue", "BREAK: after the residual token keep emitting the rest of the drafted "
        "tokens", False, "ratio", "residual", keep_drafts=True, label="keep later drafts"),
    "block": RuleSpec(
        "block", "block verification: accept the longest prefix whose running likelihood "
        "ratio survives a backward coupling; lossless, never fewer tokens than token-wise",
        True, "scheme", "residual", label="block verification", scheme="block",
        source="Sun, Mendlovic, Leviathan et al. 2024, arXiv 2403.10444, Algorithm 2"),
    "multi_draft": RuleSpec(
        "multi_draft", "k independent drafts verified depth by depth by recursive rejection "
        "sampling over the surviving drafts' tokens; lossless", True, "scheme", "residual",
        label="k drafts", scheme="multi_draft",
        knobs=(KnobSpec("drafts", "independent draft sequences k", 1, 64, 2, integer=True,
                        neutral=1),),
        source="Miao et al. 2023 (SpecInfer), arXiv 2305.09781, multi-step speculative "
               "sampling"),
    "lenient": RuleSpec(
        "lenient", "LOSSY: accept x w.p. min(1, p(x)/(l q(x))), on rejection sample "
        "norm(max(p - l q, 0)); l = 1 is Algorithm 1", False, "scheme", "residual",
        label="lossy: accepts more", scheme="lenient",
        knobs=(KnobSpec("lenience", "lenience l: 1 = exact, smaller accepts more", 0.0, 1.0,
                        0.5, neutral=1.0),),
        source="Leviathan, Kalman & Matias 2022, arXiv 2211.17192, Appendix A.5"),
    "typical": RuleSpec(
        "typical", "LOSSY: accept x iff p(x) > min(epsilon, delta exp(-H(p))); on rejection "
        "sample p", False, "scheme", "target", label="lossy: Medusa", scheme="typical",
        knobs=(KnobSpec("epsilon", "hard probability threshold", 0.0, 1.0, 0.09),
               KnobSpec("delta", "entropy-scaled threshold", 0.0, 1.0, 0.3)),
        source="Cai et al. 2024 (Medusa), arXiv 2401.10774, Sec. 2.3.1"),
})
assert tuple(RULES) == RULE_NAMES
CLASSIC_RULES: Final[tuple[Rule, ...]] = tuple(n for n, s in RULES.items() if s.scheme is None)
"""The rules the Markov engine and :mod:`specsim.exact` play directly (per-cell tables)."""


def rule_spec(rule: str | RuleSpec) -> RuleSpec:
    """The :class:`RuleSpec` of a rule name (a spec is returned unchanged)."""
    if isinstance(rule, RuleSpec):
        return rule
    try:
        return RULES[rule]  # type: ignore[index]
    except (KeyError, TypeError):
        raise ValueError(f"unknown rule {rule!r}; expected one of {RULE_NAMES}") from None


# ---------------------------------------------------------------------------------------------
# The pieces: accept test, acceptance probability, residual, first rejection
# ---------------------------------------------------------------------------------------------
def accept(u: FloatArray, p_x: FloatArray, q_x: FloatArray) -> NDArray[np.bool_]:
    """[L] Alg. 1's test on explicit probabilities: accept iff ``u q(x) < p(x)``, u ~ U[0, 1).

    This is ``u < min(1, p(x)/q(x))`` without the division: p(x) >= q(x) always accepts
    (u < 1), p(x) = 0 never does (not even at u = 0), and a draft with q(x) = 0 < p(x) -- which
    a sampler of q never proposes, but logged probabilities can contain -- is accepted, the
    limit p/q -> inf. Hugging Face's ``_speculative_sampling`` does the same (``r <= p/q``
    with p/q = inf); vLLM's rejection sampler instead rejects whenever q(x) = 0.
    """
    return u * q_x < p_x


def acceptance_probability(p: FloatArray, q: FloatArray, rule: str = "correct") -> FloatArray:
    """Per token x of rows (..., V): the probability a drafted x is accepted under ``rule``.

    ``ratio`` rules: min(1, p(x)/q(x)), 1 where q(x) = 0 < p(x), 0 where p(x) = q(x) = 0 (as
    :func:`accept`). ``argmax`` (greedy): 1 on the row's argmax of p, 0 elsewhere. A table of
    this is what the Markov engine looks up: it accepts iff ``u < acceptance_probability``,
    the same test as :func:`accept` (in exact arithmetic; the engine's per-row paths use
    :func:`accept`, its per-cell tables this).
    """
    p = np.asarray(p, dtype=np.float64)
    q = np.asarray(q, dtype=np.float64)
    if rule_spec(rule).accept == "argmax":
        out = np.zeros(np.broadcast_shapes(p.shape, q.shape))
        np.put_along_axis(out, np.broadcast_to(p, out.shape).argmax(axis=-1)[..., None], 1.0,
                          axis=-1)
        return out
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.minimum(1.0, p / q)
    return np.where(q > 0, ratio, (p > 0).astype(np.float64))


def residual(p: FloatArray, q: FloatArray) -> FloatArray:
    """norm(max(p - q, 0)) on the last axis; p where that has no mass ([L] Alg. 1, [C] Alg. 2).

    The residual has no mass only where p <= q everywhere, i.e. p = q: then no rejection can
    happen in exact arithmetic, and p is the distribution that keeps the round lossless when
    rounding makes one happen anyway.
    """
    r = np.clip(p - q, 0.0, None)
    s = r.sum(axis=-1, keepdims=True)
    return np.where(s > 0, r / np.where(s > 0, s, 1.0), p)


def rejection_distribution(p: FloatArray, q: FloatArray, rule: str = "correct") -> FloatArray:
    """The law of the token emitted at the first rejection: :func:`residual` or p itself."""
    return residual(p, q) if rule_spec(rule).on_rejection == "residual" else p


def first_rejection(accepted: NDArray[np.bool_], axis: int = -1) -> IntArray:
    """Number of leading accepted positions along ``axis`` (γ when all were accepted)."""
    a = np.moveaxis(np.asarray(accepted, dtype=bool), axis, 0)
    if a.shape[0] == 0:
        return np.zeros(a.shape[1:], dtype=np.intp)
    alive = a[0].copy()
    n_acc = alive.astype(np.intp)
    for row in a[1:]:
        alive &= row
        n_acc += alive
    return n_acc


# ---------------------------------------------------------------------------------------------
# One round on explicit arrays
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class VerifyResult:
    """What one round of verification emits, per row of the leading axes.

    ``accepted`` (...,): drafts accepted before the first rejection (γ if none was rejected).
    ``tokens`` (..., γ+1): the emitted tokens in order, then :data:`PLACEHOLDER` (-1) after the
    last one (vLLM's convention). ``n_emitted`` (...,): how many entries of ``tokens`` are real
    -- ``accepted + 1``, or for the ``continue`` rule γ after a rejection.
    """

    accepted: IntArray
    tokens: IntArray
    n_emitted: IntArray

    @property
    def final(self) -> IntArray:
        """The token drawn by the round (residual / p on rejection, bonus otherwise), (...,)."""
        return np.take_along_axis(self.tokens, self.accepted[..., None], axis=-1)[..., 0]


def _position(a: FloatArray, index: IntArray) -> FloatArray:
    """Row ``index`` (...,) of the position axis of ``a`` (..., positions, V): (..., V)."""
    return np.take_along_axis(a, index[..., None, None], axis=-2)[..., 0, :]


def _emitted(x: IntArray, n_acc: IntArray, final: IntArray,
             keep_drafts: bool) -> tuple[IntArray, IntArray]:
    """(tokens (..., γ+1) padded with -1, n_emitted (...,)) of a round."""
    gamma = x.shape[-1]
    j = np.arange(gamma + 1)
    k = n_acc[..., None]
    drafts = np.concatenate([x, np.full((*x.shape[:-1], 1), PLACEHOLDER, dtype=x.dtype)],
                            axis=-1)
    tokens = np.where(j < k, drafts, np.where(j == k, final[..., None], PLACEHOLDER))
    if keep_drafts:  # the drafts after the rejection token (drafts[γ] is the placeholder)
        return np.where(j > k, drafts, tokens), np.where(n_acc < gamma, gamma, gamma + 1)
    return tokens, n_acc + 1


def verify_uniforms(p: FloatArray, q: FloatArray, x: IntArray, rule: str,
                    u_accept: FloatArray, u_final: FloatArray) -> VerifyResult:
    """One round of [L] Alg. 1 (or a broken rule) from explicit uniforms, without validation.

    Shapes as :func:`verify`: p (..., γ+1, V), q (..., γ, V), x (..., γ) (any strides: the
    n-gram experiment passes position-major arrays through ``moveaxis``). ``u_accept`` (..., γ)
    tests draft i with ``u_accept[..., i]`` (unused by ``greedy``, whose test needs none);
    ``u_final`` (...,) draws the emitted token by inverse CDF. Callers that manage their own
    uniform streams (the engine, the n-gram and LLM experiments) use this directly.
    """
    spec = rule_spec(rule)
    x = np.asarray(x, dtype=np.intp)
    gamma = x.shape[-1]
    p_draft = p[..., :gamma, :]
    if spec.accept == "argmax":
        ok = x == p_draft.argmax(axis=-1)
    else:
        p_x = np.take_along_axis(p_draft, x[..., None], axis=-1)[..., 0]
        q_x = np.take_along_axis(q, x[..., None], axis=-1)[..., 0]
        ok = accept(u_accept, p_x, q_x)
    n_acc = first_rejection(ok)
    p_stop = _position(p, n_acc)
    if spec.on_rejection == "target" or gamma == 0:
        dist = p_stop
    else:
        q_stop = _position(q, np.minimum(n_acc, gamma - 1))
        dist = np.where((n_acc < gamma)[..., None], residual(p_stop, q_stop), p_stop)
    final = sample_rows(dist, u_final)
    tokens, n_emitted = _emitted(x, n_acc, final, spec.keep_drafts)
    return VerifyResult(n_acc, tokens, n_emitted)


def _first_bad(mask: NDArray[np.bool_]) -> tuple[int, ...]:
    return tuple(int(i) for i in np.argwhere(mask)[0])


def check_rows(a: ArrayLike, name: str, row_tol: float = ROW_TOL) -> FloatArray:
    """Validate probability rows (..., V) and return them as float64, each divided by its sum.

    Entries must be finite and >= 0 and every row must sum to 1 within ``row_tol`` (default
    1e-4: float32 softmax output passes, logits or unnormalised scores do not). Rows within the
    tolerance are renormalised (a row summing to exactly 1 is unchanged, bit for bit). Raises
    ValueError with a one-line message naming ``name`` and the first offending index.
    """
    try:
        arr = np.asarray(a, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be an array of probabilities") from None
    if arr.ndim < 1 or arr.shape[-1] == 0:
        raise ValueError(f"{name} must have a non-empty last (vocabulary) axis, "
                         f"got shape {arr.shape}")
    if not 0.0 <= row_tol < 1.0:
        raise ValueError(f"row_tol must lie in [0, 1), got {row_tol!r}")
    if not np.isfinite(arr).all():
        i = _first_bad(~np.isfinite(arr))
        raise ValueError(f"{name} has a non-finite entry {arr[i]} at index {i}")
    if (arr < 0).any():
        i = _first_bad(arr < 0)
        raise ValueError(f"{name} has a negative entry {arr[i]} at index {i}")
    s = arr.sum(axis=-1, keepdims=True)
    off = np.abs(s[..., 0] - 1.0) > row_tol
    if off.any():
        i = _first_bad(off)
        raise ValueError(f"row {i} of {name} sums to {s[i][0]:.9g}, not 1 (row_tol={row_tol}); "
                         f"pass probabilities, e.g. softmax(logits)")
    return np.asarray(arr / s, dtype=np.float64)


def check_round(p: ArrayLike, q: ArrayLike, row_tol: float = ROW_TOL
                ) -> tuple[FloatArray, FloatArray]:
    """Validate one round's rows (:func:`check_rows`) and their shapes: p (..., γ+1, V) and
    q (..., γ, V) with the same leading axes and V. Returns both renormalised, float64."""
    shapes = []
    for name, a in (("p", p), ("q", q)):
        shape = np.shape(a)
        if len(shape) < 2:
            raise ValueError(f"{name} must have at least 2 axes (..., positions, V), "
                             f"got shape {shape}")
        shapes.append(shape)
    sp, sq = shapes
    if sp[-1] != sq[-1]:
        raise ValueError(f"p and q must share the vocabulary axis: p {sp}, q {sq}")
    if sp[:-2] != sq[:-2] or sp[-2] != sq[-2] + 1:
        raise ValueError(f"p must be (..., γ+1, V) and q (..., γ, V) with the same leading "
                         f"axes: got p {sp}, q {sq}")
    return check_rows(p, "p", row_tol), check_rows(q, "q", row_tol)


def _check_tokens(draft_tokens: ArrayLike, shape: tuple[int, ...], vocab: int) -> IntArray:
    x = np.asarray(draft_tokens)
    if x.dtype == bool or not np.issubdtype(x.dtype, np.integer):
        raise ValueError(f"draft_tokens must be integers, got dtype {x.dtype}")
    if x.shape != shape:
        raise ValueError(f"draft_tokens must have shape {shape} (p's leading axes + γ), "
                         f"got {x.shape}")
    bad = (x < 0) | (x >= vocab)
    if bad.any():
        i = _first_bad(bad)
        raise ValueError(f"draft token {int(x[i])} at index {i} is outside 0..{vocab - 1}")
    return x.astype(np.intp)


def verify(
    p: ArrayLike,
    q: ArrayLike,
    draft_tokens: ArrayLike,
    rule: str = "correct",
    *,
    rng: np.random.Generator | np.random.SeedSequence | int,
    row_tol: float = ROW_TOL,
) -> VerifyResult:
    """Verify drafted tokens against given target and draft probabilities ([L] Alg. 1).

    Args:
        p: target probabilities (..., γ+1, V): row i is the target's next-token distribution
            after the prompt and the first i drafts (row γ is the bonus position).
        q: draft probabilities (..., γ, V) the drafts were sampled from.
        draft_tokens: the drafted tokens (..., γ), integers in 0..V-1.
        rule: ``correct`` (default) or one of the deliberately broken rules in :data:`RULES`.
        rng: a numpy Generator, or a seed for ``numpy.random.default_rng``.
        row_tol: rows may sum to 1 within this (then they are renormalised); see
            :func:`check_round`.

    Returns:
        :class:`VerifyResult`: ``accepted`` (...,), ``tokens`` (..., γ+1) padded with -1 after
        the last emitted token, ``n_emitted`` (...,).

    Edge cases (as production implementations; see :func:`accept`): p = q accepts every draft
    and emits the bonus token from p[γ]; disjoint supports reject the first draft and emit
    from the residual, which is then p itself; a residual with no mass falls back to p; a
    draft with q(x) = 0 < p(x) is accepted (Hugging Face's behaviour; vLLM rejects it).

    Random numbers: one call draws ``rng.random(batch_shape + (γ+1,))`` -- for each row of
    the leading axes in C order, γ uniforms testing drafts 0..γ-1, then one drawing the
    emitted token -- and nothing else (``greedy`` draws them too, unused). So a batch gives
    exactly the results of a loop over its rows, in C order, with the same Generator.
    """
    spec = rule_spec(rule)
    if spec.scheme is not None:
        raise ValueError(f"rule {rule!r} is played by specsim.schemes.{spec.scheme}, not by "
                         f"verify(); verify() takes one of {CLASSIC_RULES}")
    pa, qa = check_round(p, q, row_tol)
    gamma = qa.shape[-2]
    x = _check_tokens(draft_tokens, (*pa.shape[:-2], gamma), pa.shape[-1])
    if rng is None:
        raise ValueError("rng is required: pass a numpy Generator or an integer seed")
    gen = np.random.default_rng(rng)
    u = gen.random((*x.shape[:-1], gamma + 1))
    return verify_uniforms(pa, qa, x, spec.name, u[..., :gamma], u[..., gamma])
