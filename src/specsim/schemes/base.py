"""The one interface every verification scheme meets, and the typed capabilities some add.

A scheme plays rounds on an order-1 Markov pair (target table P, draft table Q, both (S, S),
row = context state, column = next token's state). The i.i.d. stub enters as its frozen
position-indexed chain (:func:`specsim.models.iid.iid_frozen_markov`), so one interface covers
both. A scheme may carry its own state beyond the context (the ``heuristic`` policy carries the
current draft length): its *scheme states* are numbered 0..N-1 and
:attr:`specsim.exact.RoundLaw.context` maps each to the context state of P (the identity for
plain rules, N = S).

:class:`VerificationScheme` is the interface; :data:`specsim.schemes.SCHEMES` holds one
instance per scheme, and a rule's :attr:`specsim.verify.RuleSpec.scheme` names its entry there.
Its three methods have one signature each; ``setting`` (:class:`Setting`, in practice the
validated :class:`specsim.schemes.Scheme`) carries the rule's knobs and, for a token-wise rule,
the draft-length policy with its knobs:

``law(P, Q, gamma, setting) -> RoundLaw``
    the exact law of one round from every scheme state (enumeration or DP, no sampling):
    :class:`specsim.exact.RoundLaw`, the one round model the classic rules share (token-wise
    rules get it from the one DP, :func:`specsim.exact.round_dp`).
``play(P, Q, state, gamma, setting, rng) -> RoundSample``
    one round for n independent chains at once (vectorised over chains, no Python loop over
    chains), from scheme states ``state`` (n,).
``footprint(size, support, gamma, setting, chains) -> LawSize``
    what the two cost before either runs (:class:`~specsim.schemes.law.LawSize`): the law's
    states, peak cells and work (None where ``law`` refuses, so the point is Monte Carlo only)
    and one round of ``chains`` chains' -- ``size`` contexts S, ``support`` the most next
    states any row of Q can reach (S for dense tables, less for a frozen position-indexed
    chain).

Two kinds implement it (:attr:`VerificationScheme.tokenwise`, declared by the class, nowhere
else): a *token-wise* rule is two tables (accept[c, x], reject[c, :]) played by a draft-length
policy (:class:`DraftLength`: ``fixed``, ``confidence``, ``heuristic``, ``optimal``), which has
its own three methods on those tables; a *whole-draft* rule verifies whole drafts (or trees) at
a fixed γ by its own module (:class:`DraftModule`). Optional capabilities are typed, declared
attributes or methods with a default, never probed: :attr:`VerificationScheme.window`
(:class:`WindowLaw`, a whole-draft rule's round on position-indexed rows, None without one),
``tables`` (a token-wise rule's, None otherwise), ``limit`` (a vocabulary limit), ``refusal``
and ``refuses`` (why the tables stop law and play before they run: a policy's declared
:attr:`DraftLength.refusal`), ``start`` (the first round's scheme state: a policy's declared
:attr:`DraftLength.start`), ``first_two_gamma`` (:attr:`DraftLength.local`) and ``accepts``
(a token-wise rule's accept table on rows of any shape, e.g. a trace's per-position rows).
What a policy does on a trace's positional model is declared too, never read off its name:
:meth:`DraftLength.stop_table` (a stop that reads the drafted token alone), its
:class:`Schedule` (a policy whose state carries its draft length) and
:meth:`DraftLength.optimal_cost` (a stop on the round's acceptance product, optimal for a draft
cost: a DP on the model at hand finds it).

A caller that plays many rounds on one (P, Q) builds a token-wise rule's tables once and passes
them (``tables=``; :meth:`specsim.schemes.Scheme.on` holds P, Q and their tables together);
nothing keeps tables between calls.

``window.window_law(p, q, gamma, knobs, at) -> (FloatArray, FloatArray)``
    the law of the tokens one round emits from each of n starts of *position-indexed* rows:
    start i meets the pair (p[i, d], q[i, d]) (p, q (n, γ+1, V)) at depth d whatever was
    drafted before -- a trace's frozen windows (:mod:`specsim.traces.schemes`) -- as (n, γ+2),
    and the tokens drafted by a round cut after depth d (γ+1,). With ``at`` (n, γ+1) the rows
    are given once each, p, q (R, V), and start i meets row at[i, d] at depth d
    (:func:`~specsim.schemes.law.indexed_windows`): a trace position sits in γ+1 windows, and
    a rule whose work is per row does it once per position. It equals ``law`` on each start's
    window chain (:func:`specsim.models.iid.chain_of_rows`) without building it; with it
    ``window_seconds(n, vocab, gamma, knobs, rows=None) -> float | None`` estimates its time on
    one core (``rows``: the windows (p, q) of a sample of the n starts, for a rule whose time
    depends on them; None: it cannot tell without them), and
    ``window_cells(n, vocab, gamma, knobs) -> float`` its peak cells beyond the rows.

What the tables report comes from the same drivers as the classic rules': long-run tokens per
target call and drafted tokens per round by renewal-reward over the stationary round-start law
(:func:`specsim.exact.stationary_rates`) or over exactly the simulated rounds
(:func:`specsim.exact.horizon_rates`), the joint law of the first two emitted tokens (the seed
program's lossless check, :func:`specsim.exact.first_two_law`), and the Monte Carlo long run
(:func:`specsim.engine.run_chains`).

Adding a scheme: one module (a whole-draft rule's ``law``, ``play``, ``footprint`` as
:class:`DraftModule` says, or a token-wise rule's tables), one entry in
:data:`specsim.schemes.SCHEMES`, one :class:`specsim.verify.RuleSpec` naming it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Protocol

import numpy as np
from numpy.typing import ArrayLike

from specsim.exact import RoundLaw
from specsim.schemes.law import FloatArray, IntArray, LawSize, RoundSample

__all__ = ["DraftLength", "DraftModule", "Knobs", "Schedule", "Setting", "Tables",
           "VerificationScheme", "WindowLaw"]

Knobs = Mapping[str, Any]
Tables = tuple[FloatArray, FloatArray]  # a token-wise rule's (accept[c, x], reject[c, :])


class Setting(Protocol):
    """What a scheme reads besides the tables: its rule's knobs, and the draft-length policy
    with its knobs (``fixed`` and none for a whole-draft rule); :class:`specsim.schemes.Scheme`
    is one."""

    @property
    def rule_knobs(self) -> tuple[tuple[str, Any], ...]: ...
    @property
    def policy(self) -> str: ...
    @property
    def policy_knobs(self) -> tuple[tuple[str, float], ...]: ...


class WindowLaw(Protocol):
    """A whole-draft rule's round on position-indexed rows (the module docstring says what)."""

    def window_law(self, p: ArrayLike, q: ArrayLike, gamma: int, knobs: Knobs,
                   at: ArrayLike | None, /) -> tuple[FloatArray, FloatArray]: ...
    def window_cells(self, n: int, vocab: int, gamma: int, knobs: Knobs, /) -> float: ...
    def window_seconds(self, n: int, vocab: int, gamma: int, knobs: Knobs,
                       rows: tuple[FloatArray, FloatArray] | None, /) -> float | None: ...


class DraftModule(Protocol):
    """What a whole-draft rule's module gives: the interface's three methods on its knobs."""

    def law(self, P: ArrayLike, Q: ArrayLike, gamma: int, knobs: Knobs) -> RoundLaw: ...
    def play(self, P: ArrayLike, Q: ArrayLike, state: ArrayLike, gamma: int, knobs: Knobs,
             rng: np.random.Generator) -> RoundSample: ...
    def footprint(self, size: int, support: int, gamma: int, knobs: Knobs | None,
                  chains: int) -> LawSize: ...


class PolicyModule(Protocol):
    """What a draft-length policy's module gives: the three methods on a rule's tables."""

    def law(self, P: ArrayLike, Q: ArrayLike, accept: ArrayLike, reject: ArrayLike, gamma: int,
            knobs: Knobs | None) -> RoundLaw: ...
    def play(self, P: ArrayLike, Q: ArrayLike, accept: ArrayLike, reject: ArrayLike,
             state: ArrayLike, gamma: int, knobs: Knobs | None,
             rng: np.random.Generator) -> RoundSample: ...
    def footprint(self, size: int, support: int, gamma: int, knobs: Knobs | None,
                  chains: int) -> LawSize: ...


class Schedule(Protocol):
    """A policy whose state carries its draft length: the lengths it can be at, and the next
    one after a round that did (not) accept every draft."""

    def lengths(self, gamma: int, knobs: Knobs, /) -> tuple[int, ...]: ...
    def next_length(self, g: ArrayLike, all_accepted: ArrayLike, knobs: Knobs, /
                    ) -> IntArray: ...


class DraftLength:
    """A draft-length policy as played: its module's three methods on a token-wise rule's
    tables, and its optional capabilities, declared: ``refusal`` (why law and play would stop
    on these tables, before they run), ``start`` (the scheme state of a generation's first
    round from a context, when it is not the context), ``local`` (a draft's stop reads its own
    position alone, so drafts past the second change neither of a generation's first two
    tokens); and what a model other than tables (a trace's positional model) needs to play
    it: ``stop`` (the table of stopping after drafting x from the draft's row q(x), when the
    stop reads the drafted token alone), ``schedule`` (a policy whose state carries its draft
    length, :class:`Schedule`), ``cost`` (the draft cost c of valid knobs, for a policy whose
    stop reads the product π of the accept probabilities of the round's drafts so far and is
    the optimal stop for that cost). Without any of the three it drafts γ every round."""

    def __init__(self, module: PolicyModule, *, local: bool = False,
                 refusal: Callable[[ArrayLike, ArrayLike, ArrayLike, ArrayLike, int,
                                    Knobs | None], str | None] | None = None,
                 start: Callable[[int, int, int], int] | None = None,
                 stop: Callable[[ArrayLike, Knobs], FloatArray] | None = None,
                 schedule: Schedule | None = None,
                 cost: Callable[[Knobs], float] | None = None) -> None:
        self.module = module
        self.local = local
        self.refusal = refusal
        self.start = start
        self.stop = stop
        self.schedule = schedule
        self.cost = cost

    @property
    def fixed(self) -> bool:
        """Whether it drafts γ every round (no stop, no schedule): the one policy a rule
        verifying whole drafts, or a model playing one frozen round, runs under."""
        return self.stop is None and self.schedule is None and self.cost is None

    def stop_table(self, q: ArrayLike, knobs: Knobs) -> FloatArray | None:
        """stop[..., x]: the probability drafting stops right after x was drafted from the row
        q (..., V), for a stop that reads the drafted token alone; None without one."""
        return None if self.stop is None else self.stop(q, knobs)

    def lengths(self, gamma: int, knobs: Knobs) -> tuple[int, ...]:
        """The draft lengths the policy can be at when a generation starts at γ: (γ,) unless
        its state carries its draft length."""
        return (gamma,) if self.schedule is None else self.schedule.lengths(gamma, knobs)

    def next_length(self, g: ArrayLike, all_accepted: ArrayLike, knobs: Knobs) -> IntArray:
        """The draft length after a round at ``g`` that did (not) accept every draft."""
        if self.schedule is None:
            return np.asarray(g, dtype=np.intp)
        return self.schedule.next_length(g, all_accepted, knobs)

    def optimal_cost(self, knobs: Knobs) -> float | None:
        """The draft cost c whose expected cost its stop minimises on π (a DP on the model at
        hand finds the thresholds), or None for a stop that reads the drafted token alone."""
        return None if self.cost is None else self.cost(knobs)


class VerificationScheme(ABC):
    """One verification scheme (the module docstring states the contract)."""

    tokenwise: ClassVar[bool]  # a token-wise rule: tables, played under any draft-length policy
    window: WindowLaw | None = None  # its round on position-indexed rows, if it has one

    def __init__(self, name: str, numbers: int = 1) -> None:
        self.name = name
        # the version of this scheme's numbers: raised when a change moves its values, so that
        # its points, and only they, rerun (:func:`specsim.job.describe`)
        self.numbers = numbers

    @abstractmethod
    def law(self, P: ArrayLike, Q: ArrayLike, gamma: int, setting: Setting, *,
            tables: Tables | None = None) -> RoundLaw:
        """The exact law of one round from every scheme state (``tables``: a token-wise
        rule's :meth:`tables` on (P, Q), where the caller holds them)."""

    @abstractmethod
    def play(self, P: ArrayLike, Q: ArrayLike, state: ArrayLike, gamma: int, setting: Setting,
             rng: np.random.Generator, *, tables: Tables | None = None) -> RoundSample:
        """One round for every chain, from scheme states ``state`` (n,) (``tables`` as
        :meth:`law`'s)."""

    @abstractmethod
    def footprint(self, size: int, support: int, gamma: int, setting: Setting,
                  chains: int) -> LawSize:
        """What :meth:`law` and one :meth:`play` of ``chains`` chains cost."""

    def tables(self, P: ArrayLike, Q: ArrayLike, knobs: Knobs) -> Tables | None:
        """A token-wise rule's (accept, reject) tables, built on each call; None for a
        whole-draft rule."""
        return None

    def accepts(self, p: ArrayLike, q: ArrayLike, knobs: Knobs) -> FloatArray | None:
        """A token-wise rule's accept table on rows p, q (..., V) of any shape (a trace's
        per-position rows, not a square table): accept[..., x]; None for a whole-draft rule."""
        return None

    def limit(self, vocab: int, knobs: Knobs) -> str | None:
        """Why the rule cannot run exactly on ``vocab`` tokens with these knobs, or None."""
        return None

    def refusal(self, P: ArrayLike, Q: ArrayLike, gamma: int, setting: Setting, *,
                tables: Tables | None = None) -> str | None:
        """Why :meth:`law` and :meth:`play` would stop on these tables, or None."""
        return None

    def refuses(self, setting: Setting) -> bool:
        """Whether :meth:`refusal` can say anything but None under ``setting`` (so a caller
        builds the tables for it only then)."""
        return False

    def start(self, context: int, gamma: int, size: int, setting: Setting) -> int:
        """The scheme state of a generation's first round from ``context`` (of ``size``)."""
        return int(context)

    def first_two_gamma(self, gamma: int, setting: Setting) -> int:
        """The least draft length whose rounds give a generation's first two tokens the law
        γ's rounds give (γ itself unless the scheme says less)."""
        return gamma

