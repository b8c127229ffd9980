"""Exact tokens per target call of schemes and trees on one model: what ``schemes_trees`` sets
beside a tree point (:mod:`.trees`), from the model family (:meth:`specsim.families.Family.rates`).

:class:`Rates` is the interface: Sequoia's positional acceptance vector (:mod:`.sequoia`), a
scheme's exact long-run tokens per call at a draft length, and the ``tree`` rule's on any tree
(a parent array, e.g. Sequoia's). :class:`TableRates` answers on Markov tables (stationary
renewal-reward over the round law, :func:`specsim.exact.stationary_rates`); a trace's
positional model answers the same questions (:class:`specsim.traces.rates.TraceRates`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from specsim import exact
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

    def tree(self, parents: Any) -> float:
        """The ``tree`` rule's (SpecInfer's RRS) long-run tokens per call on tree ``parents``."""


@dataclass(frozen=True)
class TableRates:
    """On a Markov pair (P, Q): the stationary long run, the target's stationary law of
    contexts for the acceptance vector."""

    P: FloatArray
    Q: FloatArray

    def acceptance(self, k: int) -> FloatArray:
        return positional_acceptance(self.P, self.Q, k)

    def scheme(self, scheme: Scheme, gamma: int) -> float:
        return float(exact.stationary_rates(scheme.law(self.P, self.Q, gamma)).tokens_per_round)

    def tree(self, parents: Any) -> float:
        return float(exact.stationary_rates(tree_law(self.P, self.Q, parents)).tokens_per_round)
