"""Engine configuration snippets for a schedule of best draft lengths by batch size.

Each engine takes the schedule its own way (formats as of the versions named):

- **vLLM** (``speculative_config``): ``num_speculative_tokens`` is the most drafts a step can
  take (buffer sizing); the per-batch-size schedule ``num_speculative_tokens_per_batch_size`` is
  a map of inclusive batch-size ranges ``"lo-hi"`` to K, gaps inheriting the previous range's K,
  the scheduled K clamped to ``num_speculative_tokens`` (vllm-project/vllm PR #32374, "Dynamic
  SD", merged 2026-05; without it, one ``num_speculative_tokens`` for every batch size).
- **TensorRT-LLM** (``speculative_config`` of the LLM API): ``max_draft_len`` and
  ``draft_len_schedule``, a map batch size -> draft length where a batch of size b takes the
  entry of the smallest key >= b, and speculation is off beyond the largest key
  (NVIDIA/TensorRT-LLM PR #10860, ``get_draft_len_for_batch_size``).
- **SGLang**: ``--speculative-num-steps`` (chain drafting: ``--speculative-eagle-topk 1``,
  ``--speculative-num-draft-tokens`` = steps + 1); one value for every batch size.
- **llama.cpp** (``llama-server``/``llama-speculative``): ``--draft-max`` (and ``--draft-min``);
  one value, for the small batches a llama.cpp server serves.

Engines with one value get the best K at the smallest batch size of the schedule, with the
batch size from which a single value stops being right said in a comment.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

__all__ = ["render", "snippets"]

Ranges = Sequence[tuple[int, int, int]]  # (first batch, last batch, best K), ascending


def _single(ranges: Ranges) -> tuple[int, str]:
    k = ranges[0][2]
    other = next((r for r in ranges if r[2] != k), None)
    note = (f"best at batch {ranges[0][0]}-{ranges[0][1]}; from batch {other[0]} the best K is "
            f"{other[2]}" if other else f"best at every batch size {ranges[0][0]}-{ranges[-1][1]}")
    return k, note


def snippets(ranges: Ranges, method: str = "draft_model") -> dict[str, str]:
    """Per engine: a configuration snippet (text) of the schedule ``ranges``."""
    if not ranges:
        raise ValueError("an empty schedule has no snippet")
    kmax = max(r[2] for r in ranges)
    k1, note = _single(ranges)
    off = next((r[0] for r in ranges if r[2] == 0 and all(s[2] == 0 for s in ranges
                                                          if s[0] >= r[0])), None)
    per_batch = {f"{lo}-{hi}": k for lo, hi, k in ranges}
    vllm = {"speculative_config": {"method": method, "num_speculative_tokens": max(kmax, 1),
                                   "num_speculative_tokens_per_batch_size": per_batch}}
    vllm_single = {"speculative_config": {"method": method, "num_speculative_tokens": k1}}
    last = ranges[-1]
    schedule = {hi: k for _, hi, k in ranges}
    trt = ["speculative_config:", f"  max_draft_len: {max(kmax, 1)}",
           "  draft_len_schedule:  # batch size b takes the smallest key >= b"]
    trt += [f"    {hi}: {k}" for hi, k in schedule.items()]
    trt.append(f"  # beyond batch {last[1]} TensorRT-LLM turns speculation off"
               + ("" if last[2] == 0 else f" (measured best there: {last[2]}; profile larger "
                                           f"batches to know)"))
    return {
        "vllm": ("# vLLM with per-batch-size draft lengths (PR #32374, Dynamic SD)\n"
                 + json.dumps(vllm, indent=2)
                 + "\n# vLLM without it (one value, " + note + ")\n"
                 + json.dumps(vllm_single, indent=2)),
        "tensorrt_llm": "\n".join(trt),
        "sglang": (f"# one value for every batch size ({note})\n"
                   + ("# speculation does not pay at the smallest batch: leave it off\n"
                      if k1 == 0 else
                      f"--speculative-num-steps {k1} --speculative-eagle-topk 1 "
                      f"--speculative-num-draft-tokens {k1 + 1}")),
        "llama_cpp": (f"# one value ({note})\n"
                      + ("# speculation does not pay at the smallest batch: no draft model\n"
                         if k1 == 0 else f"--draft-max {k1} --draft-min 0")),
        "stops_paying_at": "" if off is None else str(off),
    }


def render(ranges: Ranges, method: str = "draft_model") -> str:
    """All snippets as one Markdown document."""
    parts = snippets(ranges, method)
    out = ["# Engine configuration for the best draft length by batch size", "",
           "| batches | best K |", "|---|---|"]
    out += [f"| {lo}-{hi} | {k} |" for lo, hi, k in ranges]
    if parts["stops_paying_at"]:
        out += ["", f"Speculation stops paying from batch {parts['stops_paying_at']} on."]
    for name, title, lang in (("vllm", "vLLM", "jsonc"), ("tensorrt_llm", "TensorRT-LLM", "yaml"),
                              ("sglang", "SGLang", "sh"), ("llama_cpp", "llama.cpp", "sh")):
        out += ["", f"## {title}", "", f"```{lang}", parts[name], "```"]
    return "\n".join(out) + "\n"
