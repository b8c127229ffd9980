"""SGLang: the static ``--speculative-*`` flags and a ``--speculative-adaptive-config`` schedule.

Followed from sgl-project/sglang (files read at the commits named):

- ``python/sglang/srt/arg_groups/fields/spec.py`` at 015c872628e328b530880bcf95ae91222604b225:
  ``--speculative-algorithm`` (EAGLE, EAGLE3, NEXTN, STANDALONE, NGRAM, ...),
  ``--speculative-num-steps``, ``--speculative-eagle-topk``, ``--speculative-num-draft-tokens``,
  ``--speculative-adaptive`` (default off: "dynamically adjusts num_steps based on acceptance
  rate"), ``--speculative-adaptive-config`` (a JSON file; top-level ``strategy`` ``ema``, the
  default, or ``throughput_aware``).
- ``python/sglang/srt/arg_groups/speculative_hook.py`` at
  004c82e07d876f6e4a0ad6e15325706b0f478f1a: with top-k 1 the draft tokens are set to steps + 1;
  NEXTN is EAGLE; ``--speculative-adaptive`` falls back to the static flags (a warning) unless
  the algorithm is EAGLE/EAGLE3 with top-k 1 and no attention DP, multi-layer EAGLE, two-batch
  overlap or PD-mux; with it, ``--speculative-num-steps`` must be one of the config's candidate
  steps.
- ``python/sglang/srt/speculative/adaptive_spec_params.py`` at the same commit as ``spec.py``:
  ``DEFAULT_ADAPTIVE_CONFIG`` (:data:`DEFAULT`; EMA of accepted drafts, ``ema_alpha`` 0.2,
  ``warmup_batches`` 10, ``update_interval`` 5, ``down_hysteresis`` -0.25, ``up_hysteresis``
  0) and ``_load_adaptive_config``: integer-string batch keys, each with a non-empty
  ``candidate_steps`` list of ints >= 0 (0 = no drafting), at least one key. A slot with one
  candidate never moves.
- ``python/sglang/srt/speculative/adaptive_step_router.py`` at
  a12239f6ac74d804d169ee5d3cfed3c49fa7162c: a batch is first padded to the smallest captured
  CUDA-graph batch size >= it (when graphs are on), then routed to the largest key <= that (the
  smallest key when below all).

What is written: the one value of the smallest batch size as static flags, and, where SGLang's
adaptive mode runs, one key per range (its first batch) pinned to the measured K -- replacing
the EMA's acceptance-only choice with the measured best. The ``throughput_aware`` strategy
(verifier costs profiled at startup, ``throughput_aware_controller.py``) was not read here and
is not compared.
"""

from __future__ import annotations

import bisect
import json
from typing import Any

from specsim.acceptance.engines.ranges import Ranges, Snippet, from_one

__all__ = ["ALGORITHM", "DEFAULT", "adaptive_config", "default_agreement",
           "missing_graph_sizes", "snippet", "static_flags"]

SOURCES = {
    "python/sglang/srt/arg_groups/fields/spec.py": "015c872628e328b530880bcf95ae91222604b225",
    "python/sglang/srt/arg_groups/speculative_hook.py": "004c82e07d876f6e4a0ad6e15325706b0f478f1a",
    "python/sglang/srt/speculative/adaptive_spec_params.py":
        "015c872628e328b530880bcf95ae91222604b225",
    "python/sglang/srt/speculative/adaptive_step_router.py":
        "a12239f6ac74d804d169ee5d3cfed3c49fa7162c",
}
#: specsim / vLLM method -> ``--speculative-algorithm``
ALGORITHM = {"draft_model": "STANDALONE", "eagle": "EAGLE", "eagle3": "EAGLE3", "mtp": "NEXTN",
             "ngram": "NGRAM"}
ADAPTIVE_ALGORITHMS = ("EAGLE", "EAGLE3", "NEXTN")
#: ``DEFAULT_ADAPTIVE_CONFIG``'s candidate steps per batch key
DEFAULT = {1: (1, 3, 5, 7), 8: (0, 1, 3), 32: (0, 1), 64: (0,)}


def static_flags(k: int, algorithm: str) -> str:
    """The chain-drafting flags of one draft length ``k`` >= 1."""
    if algorithm == "NGRAM":
        return (f"--speculative-algorithm NGRAM --speculative-ngram-max-bfs-breadth 1 "
                f"--speculative-num-steps {k} --speculative-num-draft-tokens {k + 1}")
    draft = "" if algorithm == "NEXTN" else " --speculative-draft-model-path <draft>"
    return (f"--speculative-algorithm {algorithm}{draft} --speculative-num-steps {k} "
            f"--speculative-eagle-topk 1 --speculative-num-draft-tokens {k + 1}")


def adaptive_config(ranges: Ranges) -> dict[str, Any]:
    """``--speculative-adaptive-config`` JSON: one key per range (its first batch, from 1), a
    single candidate step (the measured K) each."""
    full, _ = from_one(ranges)
    cfg: dict[str, Any] = {"strategy": "ema"}
    cfg.update({str(lo): {"candidate_steps": [k]} for lo, _, k in full})
    return cfg


def _slot(keys: list[int], b: int) -> int:
    return keys[max(0, bisect.bisect_right(keys, b) - 1)]


def default_agreement(ranges: Ranges) -> list[tuple[int, int, int, tuple[int, ...]]]:
    """(first, last, measured K, the default config's candidates there) per stretch of batch
    sizes where both are constant."""
    full, _ = from_one(ranges)
    keys = sorted(DEFAULT)
    out: list[tuple[int, int, int, tuple[int, ...]]] = []
    for lo, hi, k in full:
        b = lo
        while b <= hi:
            slot = _slot(keys, b)
            nxt = next((key for key in keys if key > slot), None)
            end = hi if nxt is None else min(hi, nxt - 1)
            out.append((b, end, k, DEFAULT[slot]))
            b = end + 1
    return out


def missing_graph_sizes(ranges: Ranges, graph_bs: list[int]) -> list[int]:
    """Range ends that must be captured CUDA-graph batch sizes for the router to keep every
    batch in its range, and are not (ends above the largest captured size need nothing)."""
    full, _ = from_one(ranges)
    top = max(graph_bs) if graph_bs else 0
    return [hi for _, hi, _ in full[:-1] if hi <= top and hi not in graph_bs]


def snippet(ranges: Ranges, method: str = "draft_model") -> Snippet:
    """Static flags, and the adaptive schedule where SGLang's adaptive mode runs."""
    full, assumed = from_one(ranges)
    algorithm = ALGORITHM.get(method, "<algorithm>")
    src = ", ".join(f"{p.rsplit('/', 1)[1]} at {c[:12]}" for p, c in SOURCES.items())
    notes = [f"Follows sgl-project/sglang main ({src})."]
    k1, kmax = full[0][2], max(k for *_, k in full)
    if kmax == 0:
        return Snippet("SGLang", "sh", "# speculation does not pay at any batch size "
                       "measured: serve without --speculative-algorithm", tuple(notes))
    other = next((r for r in full if r[2] != k1), None)
    lines = [f"# one value for every batch size: the best K at batch {full[0][0]}-{full[0][1]}"
             + (f"; from batch {other[0]} the best K is {other[2]}" if other else ""),
             ("# (speculation does not pay there: no flags)" if k1 == 0
              else "python -m sglang.launch_server --model-path <target> "
              + static_flags(k1, algorithm))]
    if algorithm in ADAPTIVE_ALGORITHMS and len(full) > 1:
        lines += ["", "# per batch size (adaptive mode, each slot pinned to the measured K):",
                  "cat > adaptive.json <<'EOF'", json.dumps(adaptive_config(ranges)), "EOF",
                  "python -m sglang.launch_server --model-path <target> "
                  + static_flags(kmax, algorithm)
                  + " --speculative-adaptive --speculative-adaptive-config adaptive.json"]
        ends = [hi for _, hi, _ in full[:-1]]
        notes.append("With CUDA graphs SGLang routes a batch by its padded size: keep every "
                     f"range end ({', '.join(map(str, ends))}) a captured decode batch size "
                     "(cuda_graph_bs_decode), or a batch padded across a range end takes the "
                     "next range's K.")
    elif len(full) > 1:
        notes.append(f"SGLang's adaptive mode runs only for EAGLE/EAGLE3/NEXTN with top-k 1; "
                     f"with {algorithm} it falls back to the static flags, so one value is all "
                     "SGLang takes.")
    if algorithm in ADAPTIVE_ALGORITHMS:
        agree = [f"{lo}-{hi}: K = {k} {'in' if k in cand else 'NOT in'} "
                 f"{{{', '.join(map(str, cand))}}}"
                 for lo, hi, k, cand in default_agreement(ranges)]
        fix = ("the pinned config above replaces it" if len(full) > 1
               else "the one value above is exact at every batch size: leave adaptive off")
        notes.append("Against `--speculative-adaptive` with its default config (PR #23336; "
                     "its EMA picks among the candidates by acceptance only, never by cost): "
                     + "; ".join(agree) + ". Where the measured K is not a candidate the "
                     f"default cannot reach it; {fix}.")
    if assumed:
        notes.append(assumed[0].upper() + assumed[1:] + ".")
    return Snippet("SGLang", "sh", "\n".join(lines), tuple(notes))
