"""The cost-model speedup of a real pair and its decomposition into factors.

A round drafts γ tokens at c target calls each and verifies γ + 1 positions in one target call
costing T(γ+1)/T(1) calls (``verify``): the cost model's speedup is
tokens / (γ c + T(γ+1)/T(1)), Thm 3.8's (which takes T(γ+1) = T(1)) tokens / (1 + γ c).
Against a measured speedup it decomposes as a product of factors,

    (γ+1) x f_α x f_draft x f_verify x f_other = measured,

f_α = tokens / (γ+1) (what acceptance takes from the ideal γ+1), f_draft = 1 / (1 + γ c) (what
drafting costs), f_verify = (1 + γ c) / (γ c + T(γ+1)/T(1)) (what verifying γ+1 positions
costs beyond one call) and f_other = measured / cost model (what the three do not explain).
Every function takes scalars or arrays over γ alike.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from specsim.costs import SEQUENTIAL, ConstantCost
from specsim.stats import alpha_from_tokens

#: The factors' columns, in the order they multiply (module docstring).
FACTORS = ("factor_ideal", "factor_alpha", "factor_draft", "factor_verify", "factor_other")


def thm38(tokens: ArrayLike, gamma: ArrayLike, c: float) -> Any:
    """Thm 3.8's speedup tokens / (1 + γ c): verifying γ + 1 positions costs one call."""
    return np.asarray(tokens) / ConstantCost(c).total(np.asarray(gamma), 1, SEQUENTIAL)


def cost_model(tokens: ArrayLike, gamma: ArrayLike, c: float, verify: ArrayLike) -> Any:
    """The cost model's speedup tokens / (γ c + T(γ+1)/T(1)), ``verify`` = T(γ+1)/T(1)."""
    return np.asarray(tokens) / (ConstantCost(c).draft(np.asarray(gamma), 1, SEQUENTIAL)
                                 + np.asarray(verify))


def break_even(tokens: ArrayLike, gamma: ArrayLike, verify: ArrayLike = 1.0) -> Any:
    """The draft cost c below which γ gains, (tokens − T(γ+1)/T(1)) / γ (Thm 3.8: verify 1)."""
    return (np.asarray(tokens) - np.asarray(verify)) / np.asarray(gamma)


def break_even_alpha(gamma: ArrayLike, c: float, verify: ArrayLike = 1.0) -> Any:
    """The α below which γ loses: Eq. 1's tokens at α pay for a round of γ c + T(γ+1)/T(1)
    target calls (Thm 3.8: verify 1), by :func:`specsim.stats.alpha_from_tokens`; NaN where
    even α = 1 (γ + 1 tokens a round) does not pay."""
    g = np.asarray(gamma)
    cost = ConstantCost(c).draft(g, 1, SEQUENTIAL) + np.asarray(verify)
    alpha = np.vectorize(lambda k, t: float(alpha_from_tokens(t, int(k))))(g, cost)
    return np.where(cost >= g + 1, np.nan, alpha)[()]


def factors(tokens: float, gamma: int, c: float, verify: float, measured: float
            ) -> dict[str, float]:
    """The factors of :data:`FACTORS` (module docstring): their product is ``measured``."""
    cost = ConstantCost(c)
    drafting, thm38_round = cost.draft(gamma, 1, SEQUENTIAL), cost.total(gamma, 1, SEQUENTIAL)
    return {"factor_ideal": float(gamma + 1), "factor_alpha": tokens / (gamma + 1),
            "factor_draft": 1.0 / thm38_round,
            "factor_verify": thm38_round / (drafting + verify),
            "factor_other": measured / float(cost_model(tokens, gamma, c, verify))}
