"""Exact tokens per target call of schemes and trees on a trace's positional model: the
:class:`specsim.schemes.rates.Rates` of a trace model (``schemes_trees`` on real pairs).

Sequoia's acceptance vector averages each position's RRS acceptance after j rejections over
the trace's positions (every position of the text once, as ``alpha_bar``; rows: the dense rows
of :func:`specsim.traces.frozen.dense_rows`); a scheme's rate is :mod:`.schemes`' positional
traversal of its per-start laws, a tree's the same with the ``tree`` rule's window law on that
tree (:func:`specsim.schemes.tree.window_tree_law`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from math import fsum
from typing import Any

import numpy as np

from specsim.schemes import Scheme
from specsim.schemes.law import FloatArray
from specsim.schemes.sequoia import level_widths, rejection_profile
from specsim.schemes.tree import window_tree_law
from specsim.traces.format import Trace
from specsim.traces.frozen import dense_rows
from specsim.traces.schemes import ScheduleLaws, rates, schedule_laws, window_laws

__all__ = ["TraceRates"]


@dataclass(frozen=True)
class TraceRates:
    """:class:`specsim.schemes.rates.Rates` on ``trace``'s positional model."""

    trace: Trace

    @cached_property
    def rows(self) -> tuple[FloatArray, FloatArray]:
        """Every position's dense rows (:func:`specsim.traces.frozen.dense_rows`), built once
        for all of this object's questions (read-only: each question shares them)."""
        p, q = dense_rows(self.trace, np.arange(self.trace.n_positions))
        p.flags.writeable = q.flags.writeable = False
        return p, q

    def acceptance(self, k: int) -> FloatArray:
        """accept[j] = mean_t reach_j(t) (1 - rho_j(t)) / mean_t reach_j(t) over the positions,
        each mean an exactly rounded sum (``math.fsum``): 3e4 terms whose last bits must not
        depend on the CPU (they pick Sequoia's tree)."""
        rho, reach = rejection_profile(*self.rows, int(k))
        num = np.array([fsum(row) for row in reach * (1.0 - rho)])
        den = np.array([fsum(row) for row in reach])
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), 0.0)

    def scheme(self, scheme: Scheme, gamma: int) -> float:
        laws = schedule_laws(self.trace, scheme, gamma, self.rows)
        return rates(laws, self.trace.doc_start).tokens_per_call

    def tree(self, parents: Any) -> float:
        par = np.asarray(parents)
        g = len(level_widths(par))
        emitted, drafted = window_laws(self.trace, g,
                                       lambda p, q, at: window_tree_law(p, q, par, at),
                                       self.rows)
        return rates(ScheduleLaws.one_length(g, emitted, drafted),
                     self.trace.doc_start).tokens_per_call
