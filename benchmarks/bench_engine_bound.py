"""What the engine's numpy design can reach at best (issue 25), beside the engine itself.

One round reduced to its minimal vectorised ops -- per draft one add, one lookup of the token
and one of the accept probability, one comparison; then the first rejection, the stopping
context, the final lookup and the histogram -- with no fix-up of impure guide buckets, so its
draws are wrong where a bucket holds a CDF value inside: timing only, never results. Both are
printed as fractions of the RNG floor of ``bench_engine.py`` (CPU time, medians of 7
interleaved repeats, min-max of the bound). Run by hand:
``.venv/bin/python benchmarks/bench_engine_bound.py`` (``--quick``: one repeat of two rounds,
the smoke run of ``make bench-smoke``, no timing claims).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import numpy as np

from specsim import engine
from specsim.models.maths import blend, random_table
from specsim.verify import first_rejection

C = engine.CHUNK


def tables(kernel: engine.MarkovKernel) -> tuple[np.ndarray, ...]:
    """The engine's draft, final and accept tables, impure buckets read as token 0."""
    return (np.maximum(kernel.draft_sampler.direct, 0).astype(np.intp),
            np.maximum(kernel.final_sampler.direct, 0).astype(np.intp),
            np.nan_to_num(kernel.accept_by_bucket("ratio")))


def minimal_rounds(kernel: engine.MarkovKernel, gamma: int, rounds: int,
                   draft: np.ndarray, final: np.ndarray, accept: np.ndarray) -> None:
    m = kernel.m
    rows = (kernel.size * m) * (np.arange(gamma + 1) < gamma)  # correct rule: residual rows
    lanes = np.arange(C)
    rng = np.random.default_rng(1)
    state = np.zeros(C, dtype=np.intp)
    buf = np.empty((2 * gamma + 1, C))
    hist = np.zeros(gamma + 1, dtype=np.int64)
    for _ in range(rounds):
        u = rng.random(out=buf)
        b = np.empty((gamma + 1, C), dtype=np.intp)
        b[0] = state
        ok = np.empty((gamma, C), dtype=bool)
        for i in range(gamma):
            bucket = b[i] + (u[i] * m).astype(np.intp)
            draft.take(bucket, mode="clip", out=b[i + 1])
            np.less(u[gamma + i], accept.take(bucket, mode="clip"), out=ok[i])
        n_acc = first_rejection(ok, axis=0)
        stop = b.ravel()[n_acc * C + lanes]
        state = final.take(stop + rows[n_acc] + (u[2 * gamma] * m).astype(np.intp), mode="clip")
        hist += np.bincount(n_acc, minlength=gamma + 1)


def cpu(fn: Callable[[], object]) -> float:
    t = time.process_time()
    fn()
    return time.process_time() - t


def engine_rounds(kernel: engine.MarkovKernel, gamma: int, rounds: int) -> None:
    engine.long_run_markov(kernel, gamma, "correct", np.random.SeedSequence(1), C, rounds, 0, 1)


def rng_floor(gamma: int, rounds: int) -> None:  # as bench_engine.py: each draw discarded
    rng = np.random.default_rng(2)
    for _ in range(rounds):
        rng.random((2 * gamma + 1, C))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smoke run: 1 repeat of 2 rounds")
    quick = ap.parse_args().quick
    for vocab, gamma in [(6, 4), (6, 16), (1000, 4)]:
        target = random_table(1, 2.5, vocab)
        kernel = engine.MarkovKernel(target, blend(target, random_table(2, 2.5, vocab), 0.55))
        rounds = 2 if quick else 16 if vocab == 6 else 6
        tabs = tables(kernel)
        bound: list[float] = []
        eng: list[float] = []
        for _ in range(1 if quick else 7):
            t_min = cpu(lambda: minimal_rounds(kernel, gamma, rounds, *tabs))  # noqa: B023
            t_eng = cpu(lambda: engine_rounds(kernel, gamma, rounds))  # noqa: B023
            t_floor = cpu(lambda: rng_floor(gamma, rounds))  # noqa: B023
            bound.append(t_floor / t_min)
            eng.append(t_floor / t_eng)
        print(f"V={vocab} gamma={gamma}: engine {statistics.median(eng):.3f}  minimal-ops round "
              f"{statistics.median(bound):.3f} [{min(bound):.3f}-{max(bound):.3f}]", flush=True)


if __name__ == "__main__":
    main()
