"""Engine benchmark: the seed program's per-round Python loop vs specsim's vectorised engine vs
the random-number floor, measured side by side in one process (``make bench``).

Setting (issue 5): the program's Markov tables (TARGET = random_table(1, 2.5), vocabulary 6),
the middling draft blend(TARGET, random_table(2, 2.5), 0.55), gamma = 4, the correct rule.
The floor is the time to draw the 2*gamma + 1 uniforms per round that any exact sampler of
this kind consumes, drawn in the engine's own chunk shape. Each timing is the best of
``--repeats`` interleaved runs, so a busy machine penalises all three alike.
The last line is machine-readable:  speedup_vs_reference=<x> fraction_of_rng_floor=<y>
"""

from __future__ import annotations

import argparse
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


def best_of(fn: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def measure(vocab: int, gamma: int, rounds: int, ref_rounds: int, repeats: int) -> dict[str, float]:
    target = random_table(1, 2.5, vocab)
    draft = blend(target, random_table(2, 2.5, vocab), 0.55)
    kernel = engine.MarkovKernel(target, draft)
    n = max(1, rounds // engine.CHUNK) * engine.CHUNK
    out = {"engine": 0.0, "floor": 0.0, "reference": 0.0}
    for _ in range(repeats):  # interleaved, best of each
        t_e = best_of(lambda: engine_rounds(kernel, gamma, n, 1), 1)
        t_f = best_of(lambda: rng_floor(gamma, n, 2), 1)
        out["engine"] = max(out["engine"], n / t_e)
        out["floor"] = max(out["floor"], n / t_f)
        if ref_rounds:
            t_r = best_of(lambda: reference_rounds(target, draft, gamma, ref_rounds, 3), 1)
            out["reference"] = max(out["reference"], ref_rounds / t_r)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=1 << 22, help="engine and floor rounds")
    ap.add_argument("--reference-rounds", type=int, default=20_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="small sizes (CI smoke run)")
    args = ap.parse_args()
    if args.quick:
        args.rounds, args.reference_rounds, args.repeats = 1 << 17, 2_000, 1

    print(f"chunk of chains advanced together: {engine.CHUNK}")
    print("cost growth (engine vs RNG floor, rounds/s):")
    print(f"{'vocab':>6} {'gamma':>5} {'engine':>12} {'rng floor':>12} {'fraction':>8}")
    for vocab in (6, 1000):
        for gamma in (1, 4, 8, 16):
            if (vocab, gamma) == (6, 4):
                continue
            m = measure(vocab, gamma, args.rounds // 4, 0, 1)
            print(f"{vocab:>6} {gamma:>5} {m['engine']:>12,.0f} {m['floor']:>12,.0f} "
                  f"{m['engine'] / m['floor']:>8.3f}")

    print("\nheadline setting: vocab 6, blend 0.55, gamma 4, correct rule")
    m = measure(6, 4, args.rounds, args.reference_rounds, args.repeats)
    print(f"reference (seed program, per-round Python): {m['reference']:>14,.0f} rounds/s")
    print(f"specsim engine (vectorised, one core):      {m['engine']:>14,.0f} rounds/s")
    print(f"RNG floor (2*gamma+1 uniforms per round):   {m['floor']:>14,.0f} rounds/s")
    print(f"speedup_vs_reference={m['engine'] / m['reference']:.1f} "
          f"fraction_of_rng_floor={m['engine'] / m['floor']:.3f}")


if __name__ == "__main__":
    main()
