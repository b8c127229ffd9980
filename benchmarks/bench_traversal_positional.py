"""Traversal verification's exact law on frozen position-indexed rows (a trace's windows):
:func:`specsim.schemes.traversal.positional_law` on N = 32768 starts of V = 33 tokens, beside
the per-start route (``traversal.law`` on each start's window chain, ``chain_of_rows``: timed on
3 starts, scaled to N; refused where its cells pass ``traversal.BUDGET``) and beside
:func:`~specsim.schemes.traversal.positional_cost`'s estimate (ratios). The rows are random
(Dirichlet(0.3) per position, draft and target independent): few equal weights to merge, a
hard case. Wall time, one run each. Run by hand:
``nice .venv/bin/python benchmarks/bench_traversal_positional.py`` (``--quick``: N = 256, the
smoke run of ``make bench-smoke``, no timing claims).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from specsim.models.iid import chain_of_rows
from specsim.schemes import traversal

N, V = 32768, 33
SHAPES = ["2", "4", "2x1", "2x2", "3x3", "2x1x1", "2x2x1", "4x2x1"]


def per_start_seconds(p: np.ndarray, q: np.ndarray, shape: str, law: np.ndarray,
                      n: int) -> float:
    """Seconds of the per-start route on N starts (3 timed, checked against ``law``); nan when
    traversal.law refuses the window chain."""
    start = time.perf_counter()
    try:
        for t in range(3):
            big_p, big_q, first = chain_of_rows(p[t], q[t])
            got = traversal.law(big_p, big_q, p.shape[1] - 1, {"branches": shape})
            assert np.abs(got.tokens[first] - law[t]).max() < 1e-12
    except ValueError:
        return float("nan")
    return (time.perf_counter() - start) / 3 * n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smoke run: N = 256 starts")
    n = 256 if ap.parse_args().quick else N
    rng = np.random.default_rng(5)
    rows_p, rows_q = (rng.dirichlet(np.full(V, 0.3), size=n + 8) for _ in range(2))
    print(f"N = {n} starts, V = {V} tokens; seconds (wall)")
    print(f"{'branches':>8} {'law':>7} {'estimate':>9} {'est/law':>8} {'per-start':>10} "
          f"{'ratio':>8}")
    for text in SHAPES:
        shape = tuple(int(b) for b in text.split("x"))
        pos = np.arange(n)[:, None] + np.arange(len(shape) + 1)
        p, q = rows_p[pos], rows_q[pos]
        est = traversal.positional_cost(p, q, shape)
        start = time.perf_counter()
        law = traversal.positional_law(p, q, shape)
        took = time.perf_counter() - start
        slow = per_start_seconds(p, q, text, law, n)
        print(f"{text:>8} {took:7.2f} {est:9.2f} {est / took:8.2f} {slow:10.0f} "
              f"{slow / took:8.0f}")


if __name__ == "__main__":
    main()
