"""The engines' own validation and lookup of a per-batch draft-length schedule, re-implemented
line by line from their source (file and commit on each function) so a test can run what the
engine would run on what specsim writes. Reference code for tests only."""

from __future__ import annotations

import bisect
import shlex

# --------------------------------------------------------------------------- vLLM
_CTX_INFINITY = 2**31 - 1
#: ``SpeculativeMethod`` (vllm/config/speculative.py at 002e77c1f0ef9b19cff8b9e21cfbd6feb3d6b443)
VLLM_METHODS = {"ngram", "medusa", "mlp_speculator", "draft_model", "suffix", "custom_class",
                "eagle", "eagle3", "extract_hidden_states", "mtp", "dflash", "ngram_gpu",
                "dspark"}


def vllm_validate_schedule(schedule: object) -> list[tuple[int, int, int, int, int]]:
    """``validate_and_normalize_dynamic_sd_schedule`` (vllm/v1/spec_decode/dynamic/utils.py at
    14b450ca590cbff96e7004bdb147a5d3acf5a4f6)."""
    if schedule is None or not isinstance(schedule, list) or not schedule:
        raise ValueError("speculative_token_schedule must be a non-empty list")
    arities, parsed = set(), []
    for entry in schedule:
        if not isinstance(entry, list | tuple) or len(entry) not in (3, 5):
            raise ValueError("entry must be a 3-item or 5-item sequence")
        arities.add(len(entry))
        if len(entry) == 3:
            bs_lo, bs_hi, k = (int(x) for x in entry)
            ctx_lo, ctx_hi = 1, _CTX_INFINITY
        else:
            bs_lo, bs_hi, ctx_lo, ctx_hi, k = (int(x) for x in entry)
        if bs_lo <= 0 or bs_hi <= 0:
            raise ValueError("Batch-size range must be positive.")
        if bs_lo > bs_hi:
            raise ValueError("Batch-size range start must be <= end")
        if ctx_lo <= 0 or ctx_hi <= 0 or ctx_lo > ctx_hi:
            raise ValueError("bad context range")
        if k < 0:
            raise ValueError("K values must be >= 0.")
        parsed.append((bs_lo, bs_hi, ctx_lo, ctx_hi, k))
    if len(arities) > 1:
        raise ValueError("mixing 3-item and 5-item entries")
    bs_ranges = sorted({(lo, hi) for lo, hi, *_ in parsed})
    prev = 0
    for lo, hi in bs_ranges:
        if lo <= prev:
            raise ValueError("Batch-size ranges must be non-overlapping and sorted.")
        prev = hi
    if bs_ranges[0][0] != 1:
        raise ValueError("The first batch-size range must start at 1")
    ctx_ranges = sorted({(lo, hi) for _, _, lo, hi, _ in parsed})
    if len(parsed) != len(bs_ranges) * len(ctx_ranges):
        raise ValueError("must form a rectangular (batch_size x context) grid")
    return sorted(parsed, key=lambda e: (e[0], e[2]))


def vllm_lookup(schedule: object, max_batch: int, num_spec_tokens: int) -> list[int]:
    """``build_dynamic_sd_schedule_lookup`` (same file), one context bucket: index b -> K."""
    if max_batch <= 0 or num_spec_tokens <= 0:
        raise ValueError("vllm_max_batch_size and vllm_num_speculative_tokens must be > 0")
    entries = [(lo, hi, k) for lo, hi, _, _, k in vllm_validate_schedule(schedule)]
    dense = [0] * (max_batch + 1)
    next_bs, last_k = 1, None
    for lo, hi, k in entries:
        if lo > next_bs and last_k is not None:
            for b in range(next_bs, min(lo, max_batch + 1)):
                dense[b] = min(num_spec_tokens, last_k)
        for b in range(max(lo, next_bs), min(hi, max_batch) + 1):
            dense[b] = min(num_spec_tokens, k)
        next_bs, last_k = max(next_bs, hi + 1), k
        if next_bs > max_batch:
            break
    if last_k is not None:
        for b in range(next_bs, max_batch + 1):
            dense[b] = min(num_spec_tokens, last_k)
    return dense


def vllm_validate_config(cfg: dict) -> None:
    """The checks of ``SpeculativeConfig`` (vllm/config/speculative.py at
    002e77c1f0ef9b19cff8b9e21cfbd6feb3d6b443) a pasted ``--speculative-config`` meets before
    any model loads: a known method, ``num_speculative_tokens`` > 0, adaptive verification only
    with dspark, the synthetic rates (``_resolve_synthetic_acceptance_rates``)."""
    if cfg.get("method") not in VLLM_METHODS:
        raise ValueError(f"unknown method {cfg.get('method')!r}")
    n = cfg.get("num_speculative_tokens")
    if not isinstance(n, int) or n <= 0:
        raise ValueError("Expected num_speculative_tokens to be greater than zero")
    if cfg.get("enable_adaptive_verification") and cfg["method"] != "dspark":
        raise ValueError("Adaptive verification only supported with DSpark")
    rates = cfg.get("synthetic_acceptance_rates")
    if cfg.get("rejection_sample_method") == "synthetic":
        if rates is None or len(rates) != n:
            raise ValueError(f"synthetic_acceptance_rates must have length {n}")
        if not all(0.0 <= r <= 1.0 for r in rates):
            raise ValueError("synthetic_acceptance_rates entries must be in [0, 1]")
        if any(rates[i] > rates[i - 1] for i in range(1, n)):
            raise ValueError("synthetic_acceptance_rates must be non-increasing")
    elif rates is not None:
        raise ValueError("synthetic rates only valid with rejection_sample_method='synthetic'")
    if "num_speculative_tokens_per_batch_size" in cfg:
        vllm_validate_schedule(cfg["num_speculative_tokens_per_batch_size"])


# --------------------------------------------------------------------------- TensorRT-LLM
def trt_validate(max_draft_len: int, schedule: dict[int, int] | None,
                 max_concurrency: int | None = None) -> dict[int, int] | None:
    """``DecodingBaseConfig.validate_draft_len_schedule_and_sort`` and the mutual exclusion
    with ``max_concurrency`` (tensorrt_llm/llmapi/llm_args.py at
    011d0933dcb5e592f5fa2626beaf42a96324c578); Draft_Target/Eagle3/MTP/NGram also require
    ``max_draft_len > 0``."""
    if max_draft_len is None or max_draft_len <= 0:
        raise ValueError("max_draft_len must be > 0")
    if schedule is None:
        return None
    for b, k in schedule.items():
        if b < 1:
            raise ValueError("batch size threshold must be >= 1")
        if k < 0:
            raise ValueError("draft length must be >= 0")
    if schedule[min(schedule)] != max_draft_len:
        raise ValueError("draft_len_schedule[smallest] must equal max_draft_len")
    if any(k > max_draft_len for k in schedule.values()):
        raise ValueError("all draft lengths must be <= max_draft_len")
    if max_concurrency is not None:
        raise ValueError("max_concurrency and draft_len_schedule are mutually exclusive")
    return dict(sorted(schedule.items()))


def trt_lookup(schedule: dict[int, int], b: int, max_draft_len: int, floor: int) -> int:
    """``get_draft_len_for_batch_size`` (tensorrt_llm/_torch/speculative/utils.py at
    011d0933dcb5e592f5fa2626beaf42a96324c578): the first key >= b, floored."""
    keys = list(schedule)
    i = bisect.bisect_left(keys, b)
    return max(schedule[keys[i]], floor) if i < len(keys) else floor


# --------------------------------------------------------------------------- SGLang
def sglang_load_adaptive_config(cfg: dict) -> dict[int, list[int]]:
    """``resolve_adaptive_strategy`` and ``_load_adaptive_config``
    (python/sglang/srt/speculative/adaptive_spec_params.py at
    015c872628e328b530880bcf95ae91222604b225): batch key -> candidate steps."""
    if not isinstance(cfg, dict):
        raise ValueError("speculative adaptive config must be a JSON object")
    if cfg.get("strategy", "ema") not in ("ema", "throughput_aware"):
        raise ValueError("strategy must be 'ema' or 'throughput_aware'")
    out = {}
    for key, entry in cfg.items():
        if not key.isdigit():
            continue
        steps = entry.get("candidate_steps")
        if (not isinstance(steps, list) or not steps
                or not all(isinstance(s, int) and s >= 0 for s in steps)):
            raise ValueError(f"BS {key}: candidate_steps must be a list of non-negative ints")
        out[int(key)] = sorted(set(steps))
    if not out:
        raise ValueError("must contain at least one integer-string BS key")
    return out


def sglang_route(keys: list[int], b: int, cuda_graph_bs: list[int] | None) -> int:
    """``AdaptiveStepRouter.batch_size_key_for_batch``
    (python/sglang/srt/speculative/adaptive_step_router.py at
    a12239f6ac74d804d169ee5d3cfed3c49fa7162c)."""
    keys = sorted(keys)
    if cuda_graph_bs:
        g = sorted(cuda_graph_bs)
        i = bisect.bisect_left(g, b)
        if i < len(g):
            b = g[i]
    return keys[max(0, bisect.bisect_right(keys, b) - 1)]


def sglang_check_flags(argv: list[str], candidate_union: list[int] | None) -> dict[str, str]:
    """What ``speculative_hook.py`` (at 004c82e07d876f6e4a0ad6e15325706b0f478f1a) does to the
    chain flags: with top-k 1 the draft tokens are set to steps + 1 (refused here when they
    differ, so nothing is silently rewritten); with ``--speculative-adaptive`` the steps must
    be a candidate."""
    flags = {a: argv[i + 1] if i + 1 < len(argv) and not argv[i + 1].startswith("--") else ""
             for i, a in enumerate(argv) if a.startswith("--")}
    steps = int(flags["--speculative-num-steps"])
    if flags.get("--speculative-eagle-topk", "1") == "1" and \
            int(flags["--speculative-num-draft-tokens"]) != steps + 1:
        raise ValueError("speculative_num_draft_tokens is adjusted to steps + 1")
    if "--speculative-adaptive" in flags and steps not in (candidate_union or []):
        raise ValueError("--speculative-num-steps is not in the candidate_steps")
    return flags


# --------------------------------------------------------------------------- llama.cpp
#: ``common_speculative_type_from_name_map`` (common/speculative.cpp at
#: 001d906a6d86e2490e394361e7cc6f478b100088)
LLAMA_TYPES = {"none", "draft-simple", "draft-eagle3", "draft-mtp", "draft-mtp-adaptive",
               "draft-dflash", "draft-dspark", "ngram-simple", "ngram-map-k", "ngram-map-k4v",
               "ngram-mod", "ngram-cache"}
_LLAMA_INT = {"--spec-draft-n-max", "--spec-draft-n-min", "-np", "--parallel"}
_LLAMA_NGRAM = {"--spec-ngram-mod-n-min", "--spec-ngram-mod-n-max"}
_LLAMA_REMOVED = {"--draft", "--draft-n", "--draft-max", "--draft-min", "--draft-n-min"}
_LLAMA_STR = {"-m", "-md", "--spec-draft-model", "--model-draft", "--spec-draft-p-min",
              "--spec-type"}


def llamacpp_parse(cmd: str) -> dict[str, str]:
    """The parse of common/arg.cpp (at 0017d6fb63f9590e791a7562b276148f7bd5b7fc) for the flags
    written: ints for the draft lengths, 0..1024 for the n-gram ones, ``std::stof`` for p-min,
    type names from the map, and ``arg_removed`` for the old ``--draft-*`` flags."""
    argv = shlex.split(cmd)[1:]
    out, i = {}, 0
    while i < len(argv):
        flag = argv[i]
        if flag in _LLAMA_REMOVED:
            raise ValueError(f"{flag}: the argument has been removed")
        if flag == "--metrics":
            out[flag] = ""
            i += 1
            continue
        if flag not in _LLAMA_INT | _LLAMA_NGRAM | _LLAMA_STR:
            raise ValueError(f"unknown flag {flag}")
        value = argv[i + 1]
        if flag in _LLAMA_INT:
            int(value)
        if flag in _LLAMA_NGRAM and not 0 <= int(value) <= 1024:
            raise ValueError(f"{flag} must be between 0 and 1024 inclusive")
        if flag == "--spec-draft-p-min":
            float(value)
        if flag == "--spec-type" and not set(value.split(",")) <= LLAMA_TYPES:
            raise ValueError(f"unknown speculative type {value}")
        out[flag] = value
        i += 2
    return out
