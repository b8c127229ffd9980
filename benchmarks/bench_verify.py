"""``specsim.verify`` beside transformers, vLLM and the memory floor (``make bench``, issue 25).

One process, the same inputs for everyone, per shape (V, γ, batch, dtype):

* ``specsim``: ``specsim.verify(p, q, drafts, rng=gen)`` with its checks (``check=False`` in
  the ``nocheck`` column);
* ``transformers``: ``_speculative_sampling`` from ``transformers.generation.utils``, called
  once per batch row as assisted generation does (it takes logits: its two softmaxes count);
  fed ``log p`` and ``log q`` as torch tensors of the input's dtype;
* ``vLLM``: ``benchmarks/vllm_reference.py``, a reference of vLLM's pure-torch rejection
  sampler (vllm/model_executor/layers/rejection_sampler.py), on the probabilities;
* ``floor``: the uniforms plus one read of p and q in numpy (``rng.random``, ``p.sum()``,
  ``q.sum()``) -- what any exact verifier that checks its inputs must at least do.

The rows are softmaxes of Gaussian logits (scale 2.5), the draft's those of the target's plus
noise, so about half the drafts are accepted; drafts are sampled from q. Torch runs on 2
threads (``--threads``). Each contender is timed once per repeat, in an order rotated every
repeat, so a busy machine slows all alike; the table prints the median rounds/s (batch rows
verified per second) with the spread (min-max over repeats, as a percentage of the median) and
the ratios specsim/transformers, specsim/vLLM and floor/specsim (the issue asks >= 1, >= 1 and
<= 4 at V >= 32k). Without the LLM extra (torch, transformers) only specsim and the floor run.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

import specsim
from specsim.sampling import sample_rows

try:
    import torch
    from transformers.generation.utils import _speculative_sampling

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from vllm_reference import rejection_sample
    MISSING = ""
except ImportError as err:  # the LLM extra is not installed
    torch = None
    MISSING = str(err)


def inputs(v: int, gamma: int, batch: int, dtype: type, seed: int = 0):
    """p (batch, γ+1, V), q (batch, γ, V) in ``dtype`` and drafts (batch, γ) sampled from q."""
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((batch, gamma + 1, v)) * 2.5
    zq = z[:, :gamma] + rng.standard_normal((batch, gamma, v)) * 1.5

    def softmax(a: np.ndarray) -> np.ndarray:
        e = np.exp(a - a.max(axis=-1, keepdims=True))
        return (e / e.sum(axis=-1, keepdims=True)).astype(dtype)

    p, q = softmax(z), softmax(zq)
    del z, zq
    drafts = sample_rows(q.astype(np.float64), rng.random((batch, gamma)))
    return p, q, drafts


def contenders(p: np.ndarray, q: np.ndarray, x: np.ndarray) -> dict[str, Callable[[], object]]:
    gen = np.random.default_rng(1)
    batch, gamma = x.shape
    out: dict[str, Callable[[], object]] = {
        "specsim": lambda: specsim.verify(p, q, x, rng=gen),
        "nocheck": lambda: specsim.verify(p, q, x, rng=gen, check=False),
        "floor": lambda: (gen.random((batch, gamma + 1)), p.sum(), q.sum()),
    }
    if torch is None:
        return out
    tp, tq, tx = torch.from_numpy(p), torch.from_numpy(q), torch.from_numpy(x)
    with np.errstate(divide="ignore"):
        lp, lq = torch.from_numpy(np.log(p)), torch.from_numpy(np.log(q))
    prompt = torch.zeros((1, 4), dtype=torch.long)
    candidates = [torch.cat([prompt, tx[b : b + 1]], dim=1) for b in range(batch)]

    def transformers_rows() -> None:  # assisted generation verifies one sequence per call
        for b in range(batch):
            _speculative_sampling(candidates[b], lq[b : b + 1], gamma, lp[b : b + 1])

    out["transformers"] = transformers_rows
    out["vLLM"] = lambda: rejection_sample(tp, tq, tx)
    return out


def measure(v: int, gamma: int, batch: int, dtype: type, repeats: int,
            clock: Callable[[], float] = time.perf_counter) -> dict[str, tuple[float, float]]:
    """Per contender: (median rounds/s, spread = (max - min) / median of the repeats)."""
    fns = contenders(*inputs(v, gamma, batch, dtype))
    names = list(fns)
    for f in fns.values():  # warm-up: allocations, lazy imports
        f()
    times: dict[str, list[float]] = {n: [] for n in names}
    for r in range(repeats):
        for n in names[r % len(names):] + names[: r % len(names)]:
            t = clock()
            fns[n]()
            times[n].append(max(clock() - t, 1e-9))
    out = {}
    for n, ts in times.items():
        rate = batch / np.array(ts)
        med = float(np.median(rate))
        out[n] = (med, float((rate.max() - rate.min()) / med))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2, help="torch threads")
    ap.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                    help="wall-clock (default) or this process's CPU time (all its threads: "
                    "less sensitive to other jobs on a busy machine)")
    ap.add_argument("--quick", action="store_true",
                    help="a small grid (V 1k and 32k, γ 1 and 4, float32), 3 repeats")
    args = ap.parse_args()
    vocabs, gammas, dtypes = (1_000, 32_000, 128_000), (1, 4, 8), (np.float32, np.float64)
    if args.quick:
        vocabs, gammas, dtypes, args.repeats = (1_000, 32_000), (1, 4), (np.float32,), 3
    if torch is None:
        print(f"transformers/vLLM columns skipped: the LLM extra is not installed ({MISSING}); "
              "make llm installs it")
        cols = ["specsim", "nocheck", "floor"]
    else:
        torch.set_num_threads(args.threads)
        cols = ["specsim", "nocheck", "transformers", "vLLM", "floor"]
    clock = time.perf_counter if args.clock == "wall" else time.process_time
    print(f"rounds/s by {args.clock} time (batch rows verified per second), median of "
          f"{args.repeats} interleaved "
          f"repeats (±spread: max-min over median); torch threads {args.threads}; "
          f"load average before: {os.getloadavg()[0]:.1f}")
    head = f"{'dtype':>7} {'V':>7} {'γ':>2} {'batch':>5} " + " ".join(f"{c:>15}" for c in cols)
    ratios = ["spec/tf", "spec/vLLM"] if torch is not None else []
    print(head + " " + " ".join(f"{r:>9}" for r in [*ratios, "floor/spec"]))
    for dtype in dtypes:
        for v in vocabs:
            for gamma in gammas:
                for batch in (1, 64):
                    m = measure(v, gamma, batch, dtype, args.repeats, clock)
                    cells = " ".join(f"{m[c][0]:>9,.0f} ±{m[c][1]:>3.0%}" for c in cols)
                    spec = m["specsim"][0]
                    rs = [spec / m[c][0] for c in ("transformers", "vLLM") if c in m]
                    rs.append(m["floor"][0] / spec)
                    print(f"{np.dtype(dtype).name:>7} {v:>7} {gamma:>2} {batch:>5} {cells} "
                          + " ".join(f"{r:>9.2f}" for r in rs), flush=True)
    print(f"load average after: {os.getloadavg()[0]:.1f} (2 cores: above 2, every column is "
          "slowed by other jobs, torch's threads the most)")


if __name__ == "__main__":
    main()
