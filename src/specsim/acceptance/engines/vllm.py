"""vLLM: ``speculative_config.num_speculative_tokens_per_batch_size``, the per-batch schedule.

Followed from vllm-project/vllm (files read at the commits named):

- ``vllm/config/speculative.py`` at 002e77c1f0ef9b19cff8b9e21cfbd6feb3d6b443:
  ``num_speculative_tokens_per_batch_size: list[tuple[int, int, int]] | None``, "each entry is
  ``(range_start, range_end, num_speculative_tokens)`` with an inclusive batch-size range";
  ``num_speculative_tokens`` must be > 0; ``enable_adaptive_verification`` (default False) is
  refused unless ``method == "dspark"`` ("Adaptive verification only supported with DSpark");
  ``disable_by_batch_size`` is gone (removed by PR #35060, unused since the V0 engine): never
  written here.
- ``vllm/v1/spec_decode/dynamic/utils.py`` at 14b450ca590cbff96e7004bdb147a5d3acf5a4f6:
  ``validate_and_normalize_dynamic_sd_schedule`` (a non-empty list of 3-item entries, batch
  ranges positive, start <= end, non-overlapping and sorted, the first starting at 1, K >= 0)
  and ``build_dynamic_sd_schedule_lookup``: batch b in [lo, hi] takes ``min(K,
  num_speculative_tokens)``, a gap takes the previous range's K, batches above the last range
  (up to ``max_num_seqs``) keep the last K. The version at a6f6bb1d3c1707ede85d03a7c7d47a105a1873fc
  has the same rules for these 3-item entries (no context buckets) and, for DSpark,
  ``derive_dynamic_sd_schedule``/``DSparkLiveRederivation``: vLLM re-derives such a schedule
  online from a startup cost profile and the live acceptance.
- ``vllm/v1/spec_decode/dynamic/drafting_manager.py`` at
  222c80b02df234e24ef28748256f493b1efa4ec3: ``plan_batch`` looks the K up by the number of
  scheduled requests; a batch that holds a prefill takes the K of the largest batch size.

What is written: the schedule from batch 1, contiguous, with ``num_speculative_tokens`` = the
largest K (so no K is clamped); K = 0 ranges are kept (speculation off there).
"""

from __future__ import annotations

import json
from typing import Any

from specsim.acceptance.engines.ranges import Ranges, Snippet, from_one

__all__ = ["SOURCES", "config", "snippet"]

SOURCES = {
    "vllm/config/speculative.py": "002e77c1f0ef9b19cff8b9e21cfbd6feb3d6b443",
    "vllm/v1/spec_decode/dynamic/utils.py": "14b450ca590cbff96e7004bdb147a5d3acf5a4f6",
    "vllm/v1/spec_decode/dynamic/drafting_manager.py": "222c80b02df234e24ef28748256f493b1efa4ec3",
}


def config(ranges: Ranges, method: str = "draft_model") -> dict[str, Any] | None:
    """``speculative_config`` for the schedule, or None when no batch size speculates."""
    full, _ = from_one(ranges)
    kmax = max(k for *_, k in full)
    if kmax == 0:
        return None
    return {"method": method, "num_speculative_tokens": kmax,
            "num_speculative_tokens_per_batch_size": [[lo, hi, k] for lo, hi, k in full]}


def snippet(ranges: Ranges, method: str = "draft_model") -> Snippet:
    """The ``vllm serve`` flag and what vLLM does with it."""
    full, assumed = from_one(ranges)
    cfg = config(ranges, method)
    src = ", ".join(f"{path} at {commit[:12]}" for path, commit in SOURCES.items())
    notes = [f"Follows vllm-project/vllm main ({src}); `disable_by_batch_size` was removed "
             "(PR #35060) and is not written."]
    if cfg is None:
        return Snippet("vLLM", "sh", "# speculation does not pay at any batch size measured: "
                       "serve without --speculative-config", tuple(notes))
    _, last_hi, last_k = full[-1]
    code = ("vllm serve <target> --speculative-config '" + json.dumps(cfg) + "'\n"
            "# method draft_model / eagle / eagle3: add \"model\": \"<draft>\" to the JSON")
    notes += [
        f"Batch b in a range drafts its K; batches above {last_hi} (up to --max-num-seqs) keep "
        f"K = {last_k}, which was not measured there; a batch holding a prefill takes the K of "
        "--max-num-seqs (drafting_manager.py, plan_batch).",
        "`enable_adaptive_verification` (PR #47808, default false) is DSpark-only: it sizes "
        "each step's verify budget online from the DSpark confidence head and step costs "
        "profiled at startup. With `method: dspark` it replaces this fixed schedule (the "
        "schedule is then the offline check of its choice); with any other method vLLM "
        "refuses it and this schedule is the per-batch control.",
    ]
    if assumed:
        notes.append(assumed[0].upper() + assumed[1:] + ".")
    return Snippet("vLLM", "sh", code, tuple(notes))
