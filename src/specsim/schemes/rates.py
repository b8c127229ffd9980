"""Exact tokens per target call of schemes and trees on one model: what ``schemes_trees`` sets
beside a tree point (:mod:`specsim.tables.schemes_trees`), from the model family
(:meth:`specsim.families.Family.rates`).

:class:`Rates` is the interface: Sequoia's positional acceptance vector (:mod:`.sequoia`), a
scheme's exact long-run tokens per call at a draft length, and the ``tree`` rule's on any tree
(a parent array, e.g. Sequoia's). :class:`TableRates` answers on Markov tables (long-run
renewal-reward over the round law from the start context,
:func:`specsim.exact.stationary_rates`); a trace's positional model answers the same
questions (:class:`specsim.traces.rates.TraceRates`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from numpy.typing import ArrayLike

from specsim import exact
from specsim.exact.chains import limit_law
from specsim.schemes import Scheme
from specsim.schemes.law import FloatArray
from specsim.schemes.sequoia import positional_acceptance
from specsim.schemes.tree import tree_law

__all__ = ["Rates", "TableRates"]


class Rates(Protocol):
    """Exact tokens per target call on one model."""

    def acceptance(self, k: int) -> FloatArray:
        """Sequoia's positional acceptance vector accept[0..k-1] (:mod:`.sequoia`)."""

    def scheme(self, scheme: Scheme, gamma: int) -> float:
        """A scheme's long-run tokens per target call at draft length γ."""

    def tree(self, parents: ArrayLike) -> float:
        """The ``tree`` rule's (SpecInfer's RRS) long-run tokens per call on tree ``parents``."""


@dataclass(frozen=True)
class TableRates:
    """On a Markov pair (P, Q): the long run of chains from context ``start`` (the stationary
    long run where it is unique, :func:`specsim.exact.stationary_rates`), the target's long-run
    law of contexts from ``start`` for the acceptance vector."""

    P: FloatArray
    Q: FloatArray
    start: int = 0

    def acceptance(self, k: int) -> FloatArray:
        return positional_acceptance(self.P, self.Q, k, limit_law(self.P, self.start))

    def scheme(self, scheme: Scheme, gamma: int) -> float:
        law = scheme.law(self.P, self.Q, gamma)
        return float(exact.stationary_rates(law, scheme.start(self.start, gamma,
                                                              self.P.shape[0])).tokens_per_round)

    def tree(self, parents: ArrayLike) -> float:
        law = tree_law(self.P, self.Q, parents)
        return float(exact.stationary_rates(law, self.start).tokens_per_round)
