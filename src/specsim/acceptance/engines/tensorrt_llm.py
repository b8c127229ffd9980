"""TensorRT-LLM: ``speculative_config.draft_len_schedule`` (and ``max_concurrency``).

Followed from NVIDIA/TensorRT-LLM at 011d0933dcb5e592f5fa2626beaf42a96324c578:

- ``tensorrt_llm/llmapi/llm_args.py``, ``DecodingBaseConfig``: ``draft_len_schedule: dict[int,
  int]`` ("{4:4, 8:2, 32:1}: batch sizes 1-4 use 4, 5-8 use 2, 9-32 use 1, 33+ the implicit
  shortest sustainable draft length"); ``validate_draft_len_schedule_and_sort``: keys >= 1,
  values >= 0, ``schedule[smallest key] == max_draft_len``, every value <= ``max_draft_len``;
  ``max_concurrency`` and ``draft_len_schedule`` are mutually exclusive (``max_concurrency: c``
  is translated to ``{c: max_draft_len}``); ``min_runtime_draft_len`` is 1 for one-engine modes
  (a drafter with state across iterations: ``Draft_Target``, ``Eagle3`` and ``MTP`` one-model)
  and 0 otherwise (``NGram``); ``Draft_Target``, ``Eagle3``, ``MTP``, ``NGram`` require
  ``max_draft_len > 0``. With a CUDA-graph config the schedule's keys are added to the graph
  batch sizes and padding is switched on.
- ``tensorrt_llm/_torch/speculative/utils.py``, ``get_draft_len_for_batch_size``: batch b takes
  ``max(schedule[first key >= b], min_runtime_draft_len)``, and beyond the largest key
  ``min_runtime_draft_len``.

What is written: each range's last batch as a key with its K (ranges of equal K merged, a
trailing K = 0 range left implicit); the first K is ``max_draft_len``. What TensorRT-LLM cannot
take is said, never written: a later K above the first is clipped to it, and one-engine modes
run K = 0 ranges at K = 1 (their floor).
"""

from __future__ import annotations

from typing import Any

from specsim.acceptance.engines.ranges import Ranges, Snippet, from_one, merged, stops_at

__all__ = ["COMMIT", "DECODING", "FLOOR", "config", "snippet"]

COMMIT = "011d0933dcb5e592f5fa2626beaf42a96324c578"

#: specsim / vLLM method -> TensorRT-LLM ``decoding_type``
DECODING = {"draft_model": "Draft_Target", "eagle3": "Eagle3", "mtp": "MTP", "ngram": "NGram"}
#: ``min_runtime_draft_len`` of each decoding type (its default one- or two-engine mode)
FLOOR = {"Draft_Target": 1, "Eagle3": 1, "MTP": 1, "NGram": 0}


def config(ranges: Ranges) -> tuple[dict[str, Any] | None, list[str]]:
    """(``max_draft_len`` and ``draft_len_schedule``, or None when nothing can speculate; the
    notes on what TensorRT-LLM could not take as measured)."""
    sched = merged(ranges)
    k1 = sched[0][2]
    notes = []
    if k1 == 0:
        if any(k for *_, k in sched):
            notes.append(f"The best K at batch {sched[0][0]}-{sched[0][1]} is 0, and "
                         "TensorRT-LLM takes max_draft_len from the smallest key: a schedule "
                         "that speculates only at larger batches cannot be written.")
        return None, notes
    clipped = [(lo, hi, min(k, k1)) for lo, hi, k in sched]
    over = [f"{lo}-{hi} (K = {k})" for lo, hi, k in sched if k > k1]
    if over:
        notes.append(f"Clipped to max_draft_len = {k1}, the first range's K (TensorRT-LLM "
                     f"refuses a larger value): {', '.join(over)}.")
    clipped = merged(clipped)
    if clipped[-1][2] == 0 and len(clipped) > 1:
        clipped = clipped[:-1]
    return {"max_draft_len": k1,
            "draft_len_schedule": {hi: k for _, hi, k in clipped}}, notes


def snippet(ranges: Ranges, method: str = "draft_model") -> Snippet:
    """The LLM API YAML for ``trtllm-serve --config`` and what TensorRT-LLM does with it."""
    decoding = DECODING.get(method)
    cfg, notes = config(ranges)
    head = [f"Follows NVIDIA/TensorRT-LLM at {COMMIT[:12]} (tensorrt_llm/llmapi/llm_args.py, "
            "tensorrt_llm/_torch/speculative/utils.py)."]
    if decoding is None:
        head.append(f"No TensorRT-LLM decoding_type is known here for method {method!r}: "
                    "write yours (Draft_Target, Eagle3, MTP, NGram).")
        decoding = "<decoding_type>"
    if cfg is None:
        return Snippet("TensorRT-LLM", "yaml", "# speculation does not pay at the smallest "
                       "batch size: leave speculative_config out", tuple(head + notes))
    last = merged(ranges)[-1][1]
    keys = "\n".join(f"    {b}: {k}" for b, k in cfg["draft_len_schedule"].items())
    code = (f"# trtllm-serve <target> --config this.yaml\nspeculative_config:\n"
            f"  decoding_type: {decoding}\n  max_draft_len: {cfg['max_draft_len']}\n"
            + ("  speculative_model: <draft>\n" if decoding in ("Draft_Target", "Eagle3")
               else "")
            + "  draft_len_schedule:  # batch b takes the value of the smallest key >= b\n"
            + keys)
    top = max(cfg["draft_len_schedule"])
    floor = FLOOR.get(decoding)
    stop = stops_at(ranges)
    floor_txt = ("its floor min_runtime_draft_len" if floor is None
                 else f"min_runtime_draft_len = {floor} for {decoding}")
    head.append("Older TensorRT-LLM read the keys as lower bounds (the largest key <= b, key 1 "
                "required): this schedule is for the commit named.")
    notes = head + notes + [
        f"Beyond batch {top} TensorRT-LLM drafts {floor_txt}"
        + (f"; the schedule measured up to batch {last}." if stop is None else
           f"; speculation stops paying from batch {stop}.")]
    if floor and (stop is not None or 0 in cfg["draft_len_schedule"].values()):
        notes.append(f"{decoding} runs a K = 0 range at K = {floor} (one-engine drafters "
                     "keep drafting so their state stays current): to stop speculating "
                     "for good, TensorRT-LLM offers acceptance_rate_window_size with "
                     "acceptance_rate_threshold, or serve those batch sizes without "
                     "speculation.")
    assumed = from_one(ranges)[1]
    if assumed:
        notes.append(assumed[0].upper() + assumed[1:] + " (a batch below the smallest key "
                     "takes its value).")
    shape = merged(ranges)
    if len(shape) == 2 and shape[1][2] == 0 and shape[0][2] > 0:
        notes.append(f"The same schedule as `max_concurrency: {shape[0][1]}` (mutually "
                     "exclusive with draft_len_schedule; TensorRT-LLM translates it to "
                     f"{{{shape[0][1]}: max_draft_len}}).")
    return Snippet("TensorRT-LLM", "yaml", code, tuple(notes))
