"""One round model for every rule and scheme: the exact law of one round from every state
(:class:`RoundLaw`), the forward DP that gives it for token-wise rules (:func:`round_dp`; [L]
Alg. 1 on Markov tables is :func:`round_law`), the stationary law of round starts, and the
long-run and finite-horizon rates by renewal-reward (:func:`stationary_rates`,
:func:`horizon_rates`) -- the same for the classic rules and for every scheme of
:mod:`specsim.schemes`."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from specsim.exact.chains import limit_law, stationary
from specsim.exact.kernels import (
    FloatArray,
    IntArray,
    Kernels,
    check_gamma,
    check_pair,
    check_rule,
    context_acceptance,
    kernels,
)
from specsim.verify import Rule, rule_spec


@dataclass(frozen=True)
class RoundLaw:
    """Exact law of one round from each state s: the contract of every rule and scheme.

    A round is played on an order-1 Markov pair (target P, draft Q, (S, S), row = context
    state). A scheme may carry state beyond the context (the ``heuristic`` policy carries the
    current draft length): its states are numbered 0..N-1 and ``context`` maps each to the
    context state of P (the identity for plain rules, N = S).

    tokens[s, n]      P(the round emits n tokens), n = 0..L (index 0 is 0 for every rule here)
    next_state[s, t]  P(the next round starts in state t) -- row-stochastic (N, N)
    drafted[s]        E[draft tokens proposed this round] (a round costs 1 + drafted * c)
    single[s, t]      P(the round emits exactly one token and the next round starts in t) (N, N)
    pair[s, a, b]     P(the round emits >= 2 tokens, the first two being context states a, b)
                      (N, S, S)
    context[t]        the context state of P that state t stands for (N,)
    accepted[s, k]    P(k drafts accepted), k = 0..γ, for a round of a fixed γ drafts

    ``single`` and ``pair`` (what :func:`first_two_law` reads) are None where nobody asks for
    them: the classic rules' law of the first n tokens is enumerated instead
    (:func:`specsim.exact.first_tokens_distribution`), and ``pair`` holds N S^2 cells.
    ``accepted`` is carried where the long-run measure reports acceptance (the classic rules'
    :func:`round_law`); it is None for schemes, whose tokens per round say what they report.
    """

    tokens: FloatArray
    next_state: FloatArray
    drafted: FloatArray
    single: FloatArray | None
    pair: FloatArray | None
    context: IntArray
    accepted: FloatArray | None = None

    @property
    def mean_tokens(self) -> FloatArray:
        """E[tokens | s] (per state)."""
        return np.asarray(self.tokens @ np.arange(self.tokens.shape[1], dtype=np.float64))

    def _accepted(self) -> FloatArray:
        if self.accepted is None:
            raise ValueError("this round law carries no law of accepted drafts")
        return self.accepted

    @property
    def mean_accepted(self) -> FloatArray:
        """E[accepted drafts | s]."""
        acc = self._accepted()
        return np.asarray(acc @ np.arange(acc.shape[1], dtype=np.float64))

    @property
    def trials(self) -> FloatArray:
        """E[accept decisions | s] = E[min(accepted + 1, γ)] (a rule stops at its first
        rejection; γ drafts every round)."""
        acc = self._accepted()
        g = acc.shape[1] - 1
        return np.asarray(acc @ np.minimum(np.arange(1, g + 2), g).astype(np.float64))


@dataclass(frozen=True)
class RoundParts:
    """A token-wise rule's round law per start context, split by how the round ended (a policy
    that changes γ after a round -- ``heuristic`` -- places the two on different states)."""

    tokens: FloatArray  # (S, γ+2)
    accepted: FloatArray  # (S, γ+1)
    after_rejection: FloatArray  # (S, S): P(stopped at a rejection, the next context is t)
    after_bonus: FloatArray  # (S, S): P(every drafted token accepted, the bonus token is t)
    drafted: FloatArray  # (S,)
    single: FloatArray | None  # (S, S)
    pair: FloatArray | None  # (S, S, S)

    def law(self) -> RoundLaw:
        """The round law, the state being the context."""
        return RoundLaw(tokens=self.tokens, next_state=self.after_rejection + self.after_bonus,
                        drafted=self.drafted, single=self.single, pair=self.pair,
                        context=np.arange(self.tokens.shape[0]), accepted=self.accepted)


def round_dp(P: FloatArray, k: Kernels, gamma: int, *, Q: FloatArray | None = None,
             stop: FloatArray | None = None, keep_drafts: bool = False,
             first_two: bool = False) -> RoundParts:
    """Exact law of one round of a token-wise rule by forward DP over positions, O(γ S^3).

    A token-wise rule is its one-position kernels ``k`` (:class:`Kernels`, per context c:
    ``acc[c, x]`` the mass of drafting x and accepting it, ``rho[c]`` the rejection mass,
    ``final[c]`` the law of the token emitted on rejection). From context s the draft proposes
    x_1 ~ Q(.|s), x_2 ~ Q(.|x_1), ...; with the optional table ``stop[c, x]`` drafting stops
    right after x was drafted in context c with probability stop[c, x] (always after γ). The
    drafts are tested in order; the round stops at the first rejection, in context c, with a
    token from final[c], or, all γ' drafted tokens accepted, with a bonus token from P(.|x_γ').
    It emits accepted + 1 tokens and the next round starts at the last one (state = context).
    A rule that keeps its drafts after a rejection (``keep_drafts``, the seed's ``continue``)
    emits γ tokens then, and the next round starts at the last *drafted* token.

    Carries ``A[s, c]`` = P(from s the first i drafts were drafted and accepted and drafting
    went on, context c). Position i+1 from A: a rejection emits i+1 tokens, the last from
    final[c]; an accepted draft after which drafting stops (kernel ``end``) emits i+2, the last
    from P(.|x). ``D`` carries the drafting alone (rejected drafts were proposed too), for
    E[γ']; without ``stop`` every round drafts exactly γ. For ``continue`` a rejection at
    position i < γ - 1 leaves x_γ as next context, with law ``A_i @ rej @ Q^(γ-1-i)`` (the
    remaining drafts were drawn from Q after the rejected draft, not after the residual token).
    ``first_two`` adds ``single`` and ``pair`` (rules without ``keep_drafts``).
    """
    size = P.shape[0]
    if (stop is not None or keep_drafts) and Q is None:
        raise ValueError("a stop table or kept drafts need the draft table Q")
    if keep_drafts and (stop is not None or first_two):
        raise ValueError("a rule keeping its drafts runs at a fixed γ, without first_two")
    emit = k.rho[:, None] * k.final
    cont_next: list[FloatArray] = []
    if keep_drafts:  # cont_next[j] = rej @ Q^j, needed for j = γ-1-i >= 1
        m = k.rej
        for _ in range(gamma):
            cont_next.append(m)
            m = m @ Q  # type: ignore[operator]
    A = np.eye(size)
    accepted = np.zeros((size, gamma + 1))
    after_rejection, after_bonus = np.zeros((size, size)), np.zeros((size, size))
    if stop is None:
        drafted = np.full(size, float(gamma))
        for i in range(gamma):
            accepted[:, i] += A @ k.rho
            after_rejection += (A @ cont_next[gamma - 1 - i] if keep_drafts and i < gamma - 1
                                else A @ emit)
            A = A @ k.acc
        accepted[:, gamma] += A.sum(axis=1)
        after_bonus += A @ P
    else:
        D, keep_drafting = np.eye(size), Q * (1.0 - stop)  # type: ignore[operator]
        drafted = np.zeros(size)
        for i in range(gamma):
            end = k.acc if i == gamma - 1 else k.acc * stop
            done = A @ end
            accepted[:, i] += A @ k.rho
            accepted[:, i + 1] += done.sum(axis=1)
            after_rejection += A @ emit
            after_bonus += done @ P
            drafted += D.sum(axis=1)
            A, D = A @ (k.acc - end), D @ keep_drafting
    tokens = np.zeros((size, gamma + 2))
    if keep_drafts:
        tokens[:, gamma] = accepted[:, :gamma].sum(axis=1)
        tokens[:, gamma + 1] = accepted[:, gamma]
    else:
        tokens[:, 1:] = accepted
    single = pair = None
    if first_two:
        # The first two tokens: x_1 accepted, then the bonus (drafting stopped after x_1), or
        # the second position's accepted draft or rejection token.
        st = np.zeros_like(P) if stop is None else stop
        stop1 = np.ones_like(st) if gamma == 1 else st
        second = stop1[:, :, None] * P[None] + (1.0 - stop1)[:, :, None] * (k.acc + emit)[None]
        single, pair = emit, k.acc[:, :, None] * second
    return RoundParts(tokens=tokens, accepted=accepted, after_rejection=after_rejection,
                      after_bonus=after_bonus, drafted=drafted, single=single, pair=pair)


def round_law(P: ArrayLike, Q: ArrayLike, gamma: int, rule: str = "correct") -> RoundLaw:
    """Exact one-round law of a classic rule on Markov tables ([L] Alg 1 for Markov P, Q):
    :func:`round_dp` with the rule's kernels (:func:`specsim.exact.kernels.kernels`)."""
    Pa, Qa = check_pair(P, Q)
    g = check_gamma(gamma)
    r = check_rule(rule)
    return round_dp(Pa, kernels(Pa, Qa, r), g, Q=Qa, keep_drafts=rule_spec(r).keep_drafts).law()


@dataclass(frozen=True)
class Rates:
    """Per-round means under a law of round-start states ``weights``: the stationary law (the
    long run) or the average law over a finite horizon. Ratios are of means (renewal-reward);
    the acceptance means are NaN for a law without ``accepted``."""

    weights: FloatArray
    tokens_per_round: float  # = tokens per target call
    drafted_per_round: float
    accepted_per_round: float
    trials_per_round: float


def _rates(law: RoundLaw, w: FloatArray) -> Rates:
    acc = trials = np.nan
    if law.accepted is not None:
        acc, trials = float(w @ law.mean_accepted), float(w @ law.trials)
    return Rates(weights=w, tokens_per_round=float(w @ law.mean_tokens),
                 drafted_per_round=float(w @ law.drafted), accepted_per_round=acc,
                 trials_per_round=trials)


def stationary_rates(law: RoundLaw, start: int | None = None) -> Rates:
    """Long-run rates: renewal-reward over the stationary law of round-start states ([L]
    Eq. 1's analogue); ValueError where that law is not unique. With ``start``, over the
    long-run average law of the chain from that state (:func:`specsim.exact.chains.limit_law`):
    the same where the stationary law is unique, and the limit a simulation from ``start``
    converges to where it is not (greedy decoding, a near-deterministic target)."""
    if start is None:
        return _rates(law, stationary(law.next_state))
    return _rates(law, limit_law(law.next_state, start))


def horizon_rates(law: RoundLaw, start: int, burn_in: int, rounds: int) -> Rates:
    """Exact mean over rounds burn_in..burn_in+rounds-1 of chains started in state ``start``
    (the law of the state after r rounds is e_start K^r).

    This is the expectation of exactly what a simulation estimates (no stationarity assumed), so
    it stays defined for reducible or periodic round-start chains (e.g. greedy decoding, T = 0),
    where :func:`stationary` has no unique answer, and it differs from the stationary limit
    only while a chain remembers its start. Cost: (burn_in + rounds) N x N products.
    """
    dist = np.zeros(law.next_state.shape[0])
    dist[start] = 1.0
    total = np.zeros_like(dist)
    for r in range(burn_in + rounds):
        if r >= burn_in:
            total += dist
        dist = dist @ law.next_state
    return _rates(law, total / rounds)


def first_two_law(law: RoundLaw, start: int) -> FloatArray:
    """Joint law (S, S) of the first two emitted tokens of a generation from state ``start``:
    a round emitting >= 2 tokens gives both; one emitting a single token a (landing in state
    t, whose context is a) is followed by the first token of a round from t."""
    if law.single is None or law.pair is None:
        raise ValueError("this round law carries no first-two-token pieces (first_two=False)")
    first = law.pair.sum(axis=2)  # P(round from t emits >= 2 tokens, the first being a)
    n_states, size = law.single.shape[0], law.pair.shape[1]
    first_of = first.copy()  # first_of[t, b]: law of the first token of a round from t
    np.add.at(first_of, (slice(None), law.context), law.single)
    out = law.pair[start].copy()
    lead = np.zeros((n_states, size))  # lead[t, a]: one-token round from start, token a, lands t
    lead[np.arange(n_states), law.context] = law.single[start]
    out += np.einsum("ta,tb->ab", lead, first_of)
    return np.asarray(out, dtype=np.float64)


# ------------------------------------------------------------- the classic rules on tables
@dataclass(frozen=True)
class LongRun:
    """Long-run (stationary round-start, or from a start context) averages of a classic rule on
    Markov tables."""

    rule: Rule
    gamma: int
    pi: FloatArray  # long-run law of the round's start context
    tokens_per_round: float  # = tokens per target call
    accepted_per_round: float
    trials_per_round: float
    accept_fraction: float  # accepted / gamma
    accept_rate: float  # accepted / trials
    alpha_bar: float  # sum_s pi(s) beta(s)


def long_run(P: ArrayLike, Q: ArrayLike, gamma: int, rule: str = "correct",
             start: int | None = None) -> LongRun:
    """:func:`stationary_rates` of :func:`round_law` (from context ``start``, if given), with
    [L] Def 3.1's mean acceptance ᾱ = sum_s pi(s) β(s) over round starts."""
    g = check_gamma(gamma)
    r = check_rule(rule)
    rates = stationary_rates(round_law(P, Q, g, r), start)
    acc, trials = rates.accepted_per_round, rates.trials_per_round
    return LongRun(
        rule=r,
        gamma=g,
        pi=rates.weights,
        tokens_per_round=rates.tokens_per_round,
        accepted_per_round=acc,
        trials_per_round=trials,
        accept_fraction=acc / g,
        accept_rate=acc / trials,
        alpha_bar=float(rates.weights @ context_acceptance(P, Q)),
    )


def horizon_average(
    P: ArrayLike, Q: ArrayLike, gamma: int, rule: str, start: int, burn_in: int, rounds: int
) -> Rates:
    """:func:`horizon_rates` of :func:`round_law` from context ``start``: the exact mean of
    exactly the rounds the engine's long run averages."""
    return horizon_rates(round_law(P, Q, gamma, rule), start, burn_in, rounds)
