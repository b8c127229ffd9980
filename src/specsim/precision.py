"""How many digits a table prints, and how a verdict compares computed numbers.

The same config gives the same bytes on every machine only if no printed digit and no verdict
hinges on the last bit of a floating-point result -- and those last bits do depend on the CPU:
numpy dispatches other SIMD kernels for ``exp``, ``log`` and ``power`` (AVX2, AVX-512, or none),
and OpenBLAS other dot and matrix-product kernels, each summing in its own order. What is
deterministic and what is not:

* **Monte Carlo estimates** are functions of integer counts (correctly rounded divisions, square
  roots and sums in a fixed order): the same bits everywhere. Their precision is their CI, printed
  beside them.
* **Exact values** (dynamic programming, enumeration, stationary laws, closed forms) go through
  BLAS products and transcendental functions: a few ulps (relative 1e-15 or so) apart from one
  CPU to another. They agree with independent recomputations to 5e-11.

So every float a table writes is rounded to :data:`SIGNIFICANT_DIGITS` significant digits and
at most :data:`DECIMALS` decimal places (a difference such as a Jensen gap of 1e-17 prints as 0),
and ``-0.0`` prints as ``0.0``. A value printed this way changes between machines only if its
exact value lies within a few ulps of a rounding boundary: with 1e-15 relative error against a
rounding step of 1e-9, about one cell in 10^6.

Verdicts compare computed values with :func:`covers` and :func:`at_least`, which allow
:data:`EXACT_RTOL` -- far above the floating-point error of an exact value, far below anything
a statistical verdict can resolve -- so a CI that ends exactly at the exact value (every
draft accepted: tokens always γ + 1) covers it on every CPU.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["DECIMALS", "EXACT_RTOL", "SIGNIFICANT_DIGITS", "at_least", "covers",
           "first_max", "printable", "printed_tolerance", "round_printed"]

SIGNIFICANT_DIGITS = 9
DECIMALS = 10
EXACT_RTOL = 1e-9


def round_printed(values: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """``values`` rounded as a table prints them: :data:`SIGNIFICANT_DIGITS` significant digits,
    at most :data:`DECIMALS` decimals, ``-0.0`` as ``0.0``; NaN and ±inf unchanged."""
    x = np.asarray(values, dtype=np.float64)
    out = x.copy()
    finite = np.isfinite(x) & (x != 0.0)
    if np.any(finite):
        v = x[finite]
        magnitude = np.floor(np.log10(np.abs(v))).astype(np.int64)
        decimals = np.minimum(DECIMALS, SIGNIFICANT_DIGITS - 1 - magnitude)
        # np.round takes one number of decimals: round each distinct count once. The log10 of a
        # value within ulps of a power of ten is itself uncertain, but both candidate counts
        # agree there (the value rounds to that power of ten either way).
        r = np.empty_like(v)
        for d in np.unique(decimals):
            sel = decimals == d
            r[sel] = np.round(v[sel], int(d))
        out[finite] = r
    return out + 0.0  # -0.0 + 0.0 is +0.0: no sign on a zero


def printable(df: pd.DataFrame) -> pd.DataFrame:
    """A copy of ``df`` with every float rounded by :func:`round_printed`: float columns, and
    the floats of object columns (a column mixing numbers with None, e.g. an α that trace
    models do not have, is object-typed and would otherwise print all 17 digits)."""
    import pandas as pd

    out = df.copy()
    for col in out.columns:
        if pd.api.types.is_float_dtype(out[col]):
            out[col] = round_printed(out[col].to_numpy())
        elif out[col].dtype == object:
            values = out[col].to_numpy().copy()
            floats = np.array([isinstance(v, float) for v in values], dtype=bool)
            if floats.any():
                values[floats] = list(round_printed(values[floats].astype(np.float64)))
                out[col] = values
    return out


def _tol(x: npt.ArrayLike) -> npt.NDArray[np.float64]:
    return EXACT_RTOL * np.maximum(1.0, np.abs(np.asarray(x, dtype=np.float64)))


def covers(low: npt.ArrayLike, high: npt.ArrayLike, exact: npt.ArrayLike) -> npt.NDArray[np.bool_]:
    """Whether the interval [low, high] covers ``exact``, up to :data:`EXACT_RTOL` (relative,
    absolute below 1): the exact value's own floating-point error must not decide it."""
    t = _tol(exact)
    x = np.asarray(exact, dtype=np.float64)
    return (np.asarray(low) - t <= x) & (x <= np.asarray(high) + t)


def at_least(value: npt.ArrayLike, bound: npt.ArrayLike) -> npt.NDArray[np.bool_]:
    """``value >= bound`` up to :data:`EXACT_RTOL` of ``bound`` (relative, absolute below 1)."""
    return np.asarray(value, dtype=np.float64) >= np.asarray(bound, dtype=np.float64) - _tol(bound)


def printed_tolerance(*values: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """How far apart two printed values of the same exact number can be: one rounding step
    (at most 10^(1 - SIGNIFICANT_DIGITS) relative, absolute below 1) and a half for the
    values' own floating-point error. A check that reads a table compares with this."""
    scale = np.ones(np.broadcast_shapes(*(np.shape(v) for v in values)))
    for v in values:
        scale = np.maximum(scale, np.abs(np.asarray(v, dtype=np.float64)))
    return 1.5 * 10.0 ** (1 - SIGNIFICANT_DIGITS) * scale


def first_max(values: npt.ArrayLike) -> int:
    """Index of the maximum of a 1-d array, the first of those within :data:`EXACT_RTOL` of it:
    a tie of exact values (say two draft lengths with the same speedup) goes to the first
    (smallest γ) on every CPU, not to whichever the last bit favours."""
    v = np.asarray(values, dtype=np.float64)
    if v.ndim != 1 or v.size == 0:
        raise ValueError("first_max needs a non-empty 1-d array")
    return int(np.argmax(at_least(v, np.nanmax(v))))
