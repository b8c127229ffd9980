"""What the exact stage's computations allocate and compute (:class:`specsim.resources.Footprint`),
as functions of their sizes: the token-wise round DP (:func:`specsim.exact.round_dp`), the
long-run and horizon rates of any round law on N states (:func:`specsim.exact.stationary_rates`,
:func:`specsim.exact.horizon_rates`), the first-two-token law of a round law
(:func:`specsim.exact.first_two_law`) and the enumerated law of the classic rules
(:func:`specsim.exact.first_tokens_distribution`). Cells count the float64 arrays alive at the
peak, temporaries included (read off the code, calibrated by ``benchmarks/point_memory.py``)."""

from __future__ import annotations

from specsim.resources import Footprint

__all__ = ["enumeration_footprint", "enumeration_refusal", "first_two_footprint",
           "rates_footprint", "round_dp_footprint"]


def round_dp_footprint(size: int, gamma: int, *, stop: bool = False, keep_drafts: bool = False,
                       first_two: bool = False) -> Footprint:
    """:func:`specsim.exact.round_dp` on S = ``size`` contexts: ~14 (S, S) tables (P, Q, the
    kernels, A, D, the products' temporaries), γ more for ``keep_drafts``, and with
    ``first_two`` the (S, S, S) ``pair`` beside one temporary of its size (numpy reuses the
    other; measured 2.1 S^3 at S = 595); one to three (S, S) products per position."""
    s2, s3 = float(size) ** 2, float(size) ** 3
    cells = (14 + (gamma if keep_drafts else 0)) * s2 + (2.5 * s3 if first_two else 0.0)
    flops = 2 * s3 * gamma * (5 if stop else 2) + (8 * s3 if first_two else 0.0)
    return Footprint(cells, flops, what=f"exact round law ({size} states)")


def rates_footprint(states: int, steps: int = 0, *, stationary: bool = True) -> Footprint:
    """:func:`specsim.exact.stationary_rates` (:mod:`specsim.exact.chains`: the support, the
    state reductions' copy and rank-one temporaries, ~4 N x N; ~N^3 / 3 multiply-adds, bounded
    here as before by the 10 N^3 of the least-squares solve it replaced, which it outruns 4x at
    N = 1500) and :func:`specsim.exact.horizon_rates` over ``steps`` rounds (one vector-matrix
    product each) of a round law on N = ``states`` states."""
    n2 = float(states) ** 2
    cells = 4 * n2 if stationary else 2.0 * states
    flops = (10 * n2 * states if stationary else 0.0) + 2 * n2 * steps
    return Footprint(cells, flops, what=f"stationary law ({states} states)")


def first_two_footprint(states: int, size: int) -> Footprint:
    """:func:`specsim.exact.first_two_law`: three (N, S) arrays and the (S, S) result."""
    return Footprint(3.0 * states * size + 2.0 * size * size, 4.0 * states * size * size,
                     what="first-two-token law")


def enumeration_refusal(size: int, gamma: int, n: int, max_cells: int) -> str | None:
    """Why :func:`specsim.exact.first_tokens_distribution` refuses the first ``n`` tokens on
    V = ``size`` tokens (V^(n+1) cells, more than ``max_cells``: the words it raises), or None;
    the equivalence measure's job and its config-time twin ask the same
    (:meth:`specsim.measures.Measure.refusal`)."""
    cells = int(size) ** (n + 1)
    if cells <= max_cells:
        return None
    return (f"first_tokens_distribution needs V**(n+1) = {size}**{n + 1} = {cells} cells "
            f"(V={size}, n={n}, gamma={gamma}), more than max_cells={max_cells}")


def enumeration_footprint(size: int, gamma: int, n: int, max_cells: int,
                          *, keep_drafts: bool = False) -> Footprint | None:
    """:func:`specsim.exact.first_tokens_distribution` of the first ``n`` tokens on V =
    ``size`` tokens: ~6 arrays of V^(n+1) cells (the prefix paths, T, U, G and a product's
    temporary; 2 more for a rule keeping its drafts); None where it refuses
    (:func:`enumeration_refusal`: the point is Monte Carlo only)."""
    if enumeration_refusal(size, gamma, n, max_cells):
        return None
    cells = float(size) ** (n + 1)
    return Footprint((8 if keep_drafts else 6) * cells + 14.0 * size * size,
                     4 * cells * size * min(gamma, n),
                     what=f"enumerated law of the first {n} tokens")
