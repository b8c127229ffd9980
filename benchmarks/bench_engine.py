"""Engine benchmark: the seed program's per-round Python loop vs specsim's vectorised engine vs
the random-number floor, measured side by side in one process (``make bench``).

Setting (issue 5): the program's Markov tables (TARGET = random_table(1, 2.5), vocabulary 6),
the middling draft blend(TARGET, random_table(2, 2.5), 0.55), gamma = 4, the correct rule.
The floor is the time to draw the 2*gamma + 1 uniforms per round that any exact sampler of
this kind consumes, drawn in the engine's own chunk shape (``rng.random((2γ+1, CHUNK))``).

Timings (issue 25): engine and floor are timed back to back ``--repeats`` times, the order
alternating from repeat to repeat, each as CPU time of this process (``time.process_time``:
on a shared machine it moves less with the neighbours' load than wall-clock time). Each
repeat gives one fraction engine/floor (rounds/s over rounds/s); the table prints, per
vocabulary V and gamma, the median rounds/s of each, the median fraction and its spread
(min-max over the repeats). The machine's load average is printed before and after.
Targets (issue 25): fraction >= 0.5 at V = 6, gamma = 4 and >= 0.25 at V = 1000.
The last line is machine-readable:  speedup_vs_reference=<x> fraction_of_rng_floor=<y>
(the V = 6, gamma = 4 median).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable

import numpy as np

from specsim import engine
from specsim.models.maths import blend, random_table


# --- a faithful copy of the seed program's algorithm (STAGES 1-5), one chain, one round a loop
def _sample_from(probs: np.ndarray, u: float) -> int:
    return int(np.searchsorted(np.cumsum(probs), u, side="right"))


def _residual(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    r = np.clip(p - q, 0.0, None)
    s = r.sum()
    return p / p.sum() if s <= 0 else r / s


def reference_rounds(P: np.ndarray, Q: np.ndarray, k: int, rounds: int, seed: int) -> int:
    """The program's ``measure``: draft_tokens + verify_round, per round, in Python."""
    rng = np.random.default_rng(seed)
    ctx, accepted = 0, 0
    for _ in range(rounds):
        cur, drafted = ctx, []
        for _ in range(k):
            cur = _sample_from(Q[cur], rng.random())
            drafted.append(cur)
        prefixes = [ctx, *drafted]
        out = []
        for i, x in enumerate(drafted):
            p, q = P[prefixes[i]], Q[prefixes[i]]
            if rng.random() < min(1.0, p[x] / q[x]):
                out.append(x)
                accepted += 1
                continue
            out.append(_sample_from(_residual(p, q), rng.random()))
            break
        else:
            out.append(_sample_from(P[prefixes[-1]], rng.random()))
        ctx = out[-1]
    return accepted


def engine_rounds(kernel: engine.MarkovKernel, gamma: int, rounds: int, seed: int) -> None:
    chains = engine.CHUNK
    engine.long_run_markov(kernel, gamma, "correct", np.random.SeedSequence(seed), chains,
                           max(1, rounds // chains), 0, 1)


def rng_floor(gamma: int, rounds: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    for _ in range(max(1, rounds // engine.CHUNK)):
        rng.random((2 * gamma + 1, engine.CHUNK))


def cpu_time(fn: Callable[[], object]) -> float:
    t = time.process_time()
    fn()
    return time.process_time() - t


def measure(vocab: int, gamma: int, rounds: int, ref_rounds: int,
            repeats: int) -> dict[str, list[float]]:
    """Rounds/s of engine, floor (and reference) per repeat, interleaved, order alternating."""
    target = random_table(1, 2.5, vocab)
    draft = blend(target, random_table(2, 2.5, vocab), 0.55)
    kernel = engine.MarkovKernel(target, draft)
    n = max(1, rounds // engine.CHUNK) * engine.CHUNK
    runs: dict[str, Callable[[], object]] = {
        "engine": lambda: engine_rounds(kernel, gamma, n, 1),
        "floor": lambda: rng_floor(gamma, n, 2),
    }
    if ref_rounds:
        runs["reference"] = lambda: reference_rounds(target, draft, gamma, ref_rounds, 3)
    engine_rounds(kernel, gamma, engine.CHUNK, 1)  # warm-up: first touch of the tables
    out: dict[str, list[float]] = {k: [] for k in runs}
    for r in range(repeats):
        for name in (runs if r % 2 == 0 else reversed(list(runs))):
            count = ref_rounds if name == "reference" else n
            out[name].append(count / cpu_time(runs[name]))
    out["fraction"] = [e / f for e, f in zip(out["engine"], out["floor"], strict=True)]
    return out


def load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=1 << 20,
                    help="engine and floor rounds per repeat (headline setting)")
    ap.add_argument("--reference-rounds", type=int, default=20_000)
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--quick", action="store_true", help="small sizes (CI smoke run)")
    args = ap.parse_args()
    if args.quick:
        args.rounds, args.reference_rounds, args.repeats = 1 << 17, 2_000, 3

    print(f"chunk of chains advanced together: {engine.CHUNK}; load average before: {load()}")
    print(f"engine vs RNG floor, rounds/s (CPU time), medians of {args.repeats} interleaved "
          "repeats; fraction = engine / floor, median [min-max]")
    print(f"{'vocab':>6} {'gamma':>5} {'engine':>12} {'rng floor':>12} {'fraction':>8}  spread")
    med = statistics.median
    for vocab in (6, 1000):
        for gamma in (1, 4, 8, 16):
            m = measure(vocab, gamma, args.rounds // 4, 0, args.repeats)
            f = m["fraction"]
            print(f"{vocab:>6} {gamma:>5} {med(m['engine']):>12,.0f} {med(m['floor']):>12,.0f} "
                  f"{med(f):>8.3f}  [{min(f):.3f}-{max(f):.3f}]")

    print("\nheadline setting: vocab 6, blend 0.55, gamma 4, correct rule")
    m = measure(6, 4, args.rounds, args.reference_rounds, args.repeats)
    f = m["fraction"]
    print(f"reference (seed program, per-round Python): {med(m['reference']):>14,.0f} rounds/s")
    print(f"specsim engine (vectorised, one core):      {med(m['engine']):>14,.0f} rounds/s")
    print(f"RNG floor (2*gamma+1 uniforms per round):   {med(m['floor']):>14,.0f} rounds/s")
    print(f"fraction of the floor: median {med(f):.3f} [{min(f):.3f}-{max(f):.3f}] "
          f"(target >= 0.5); load average after: {load()}")
    print(f"speedup_vs_reference={med(m['engine']) / med(m['reference']):.1f} "
          f"fraction_of_rng_floor={med(f):.3f}")


if __name__ == "__main__":
    main()
