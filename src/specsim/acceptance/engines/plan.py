"""The measurement plan: per engine, the commands that collect the counters and the runs from
which a second ``specsim advise --metrics ... --baseline ... --runs ...`` gives a fully
measured schedule (every batch size measured at K' = 0 and at every K' it recommends).

The commands follow the engines' sources (files and commits named beside them):

- vLLM: ``vllm bench serve --max-concurrency B --save-result --result-dir D
  --result-filename F`` (``vllm/benchmarks/serve.py`` at
  009e6d4a1cd6ba3fb2a9fc00f4ec06f5297232a1: ``add_cli_args``, ``compute_result_filename``; the
  result carries ``max_concurrency`` and ``output_throughput``). Acceptance replay:
  ``rejection_sample_method: "synthetic"`` with ``synthetic_acceptance_rates``
  (``vllm/config/speculative.py`` at 002e77c1f0ef9b19cff8b9e21cfbd6feb3d6b443: "per-position
  *unconditional* acceptance rates ... position i's entry is the marginal probability that the
  first i+1 draft tokens are all accepted", length ``num_speculative_tokens``, each in [0, 1],
  non-increasing): a_i / N of the counters, truncated to K', replays the measured acceptance
  at every K' <= K while the drafter still runs, so each run measures the engine's real cost
  at K' with the acceptance the counters identify.
- SGLang: ``python -m sglang.bench_serving --max-concurrency B --output-file F``
  (``python/sglang/bench_serving.py`` at 0033168f0f58b2bc05aa0273bd475d9c01bafb1c); the
  counters are the per-request ``spec_accept_histogram`` of ``/generate``'s ``meta_info``. No
  acceptance replay was found in the SGLang source read: each K' needs its own run.
- TensorRT-LLM: ``trtllm-serve --config`` (the LLM API YAML); the per-position counters of
  ``/prometheus/metrics`` (PR NVIDIA/TensorRT-LLM#12636). No acceptance replay was found.
- llama.cpp: ``llama-server --metrics`` exposes ``llamacpp:spec_decode_*`` on ``/metrics`` (PR
  ggml-org/llama.cpp#26389); one draft length per server (``--spec-draft-n-max``).

The runs of TensorRT-LLM and llama.cpp are driven by ``vllm bench serve --backend openai
--base-url URL`` (both servers speak the OpenAI completions API), so every runs file is one
``specsim advise --runs k=G:FILE`` reads.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from specsim.acceptance.engines import llama_cpp, sglang

__all__ = ["measurement_plan", "replay_rates"]


def replay_rates(per_position: Sequence[float], k: int) -> list[float]:
    """vLLM's ``synthetic_acceptance_rates`` for draft length ``k``: the counters' a_i / N,
    i = 1..k (made non-increasing against rounding; a_i / N is by construction)."""
    if not 1 <= k <= len(per_position):
        raise ValueError(f"replay at K' = {k}: the counters identify K' = 1..{len(per_position)}")
    out: list[float] = []
    for r in per_position[:k]:
        r = min(1.0, max(0.0, float(r)))
        out.append(min(r, out[-1]) if out else r)
    return [round(r, 6) for r in out]


def _prompts(b: int) -> int:
    return max(64, 8 * b)


def _bench(b: int, name: str, base_url: str = "") -> str:
    url = f" --backend openai --base-url {base_url}" if base_url else ""
    return (f"vllm bench serve --model <target>{url} --dataset-name sharegpt --dataset-path "
            f"<prompts.json> --num-prompts "
            f"{_prompts(b)} --max-concurrency {b} --save-result --result-dir runs "
            f"--result-filename {name}")


def _advise(metrics: str, baseline: str, runs: list[str]) -> str:
    return (f"specsim advise --metrics {metrics} --baseline {baseline} --runs "
            + " ".join(runs) + " --out advice-measured/")


def _vllm(batches: Sequence[int], k: int, rates: Sequence[float] | None, method: str,
          replay: list[int]) -> list[str]:
    spec = {"method": method, "model": "<draft>", "num_speculative_tokens": k}
    serve = f"vllm serve <target> --max-num-seqs {max(batches)}"
    out = ["## vLLM", "", "```sh", "# 1. speculation off: one run per batch size", serve]
    out += [_bench(b, f"vllm_k0_b{b}.json") for b in batches]
    out += [f"# 2. at the counters' K = {k}, counters scraped before and after",
            f"{serve} --speculative-config '{json.dumps(spec)}'",
            "curl -s http://127.0.0.1:8000/metrics > vllm_before.prom"]
    out += [_bench(b, f"vllm_k{k}_b{b}.json") for b in batches]
    out += ["curl -s http://127.0.0.1:8000/metrics > vllm_after.prom"]
    runs = [f"k=0:runs/vllm_k0_b{b}.json" for b in batches]
    runs += [f"k={k}:runs/vllm_k{k}_b{b}.json" for b in batches]
    for g in replay:
        rates_g = (replay_rates(rates, g) if rates is not None
                   else [f"<a_{i}/N>" for i in range(1, g + 1)])
        spec_g = {**spec, "num_speculative_tokens": g, "rejection_sample_method": "synthetic",
                  "synthetic_acceptance_rates": rates_g}
        out += [f"# 3. K' = {g}: the counters' acceptance replayed, the drafter's cost measured",
                f"{serve} --speculative-config '{json.dumps(spec_g)}'"]
        out += [_bench(b, f"vllm_k{g}_b{b}.json") for b in batches]
        runs += [f"k={g}:runs/vllm_k{g}_b{b}.json" for b in batches]
    out += ["# 4. the fully measured schedule",
            _advise("vllm_after.prom", "vllm_before.prom", runs),
            "# 5. check: serve the pasted engine_config.md schedule, the same runs again",
            f"{serve} --speculative-config '<engine_config.md JSON>'"]
    out += [_bench(b, f"vllm_schedule_b{b}.json") for b in batches]
    out += ["```", "",
            "- Step 5's `output_throughput` at batch b should match `tokens_per_second` of the "
            "best K' at b in advice-measured/schedule.csv within its interval; a per-batch "
            "schedule can change what vLLM captures (CUDA graphs), which only such a run shows.",
            ""]
    return out


def _sglang(batches: Sequence[int], k: int, method: str) -> list[str]:
    algorithm = sglang.ALGORITHM.get(method, "<algorithm>")
    serve = ("python -m sglang.launch_server --model-path <target> --max-running-requests "
             f"{max(batches)}")
    bench = ("python -m sglang.bench_serving --backend sglang --dataset-name sharegpt "
             "--dataset-path <prompts.json> "
             "--num-prompts {n} --max-concurrency {b} --output-file runs/sglang_k{g}.jsonl")
    out = ["## SGLang", "", "```sh", "# 1. speculation off", serve]
    out += [bench.format(n=_prompts(b), b=b, g=0) for b in batches]
    out += [f"# 2. at K = {k}; the counters: the /generate responses (their "
            "meta_info.spec_accept_histogram), one JSON line per request",
            f"{serve} {sglang.static_flags(k, algorithm)}"]
    out += [bench.format(n=_prompts(b), b=b, g=k) for b in batches]
    out += ["for i in $(seq 64); do curl -s http://127.0.0.1:30000/generate -d "
            "'{\"text\": \"<prompt>\", \"sampling_params\": {\"max_new_tokens\": 256}}' "
            "| jq -c .; done > sglang_histograms.jsonl",
            "# 3. (SGLang has no acceptance replay: run each other K' with its own flags)",
            "specsim advise --metrics sglang_histograms.jsonl "
            f"--draft-length {k} --runs "
            f"k=0:runs/sglang_k0.jsonl k={k}:runs/sglang_k{k}.jsonl --out advice-measured/",
            "```", "",
            "- SGLang's `/metrics` carries gauges (`spec_accept_length`), not per-position "
            "counts; the histograms are the counters. Their sum is over the requests saved, so "
            "no `--baseline` is needed. `meta_info` does not say how many drafts a round "
            "proposed (a histogram grows only as far as the longest accepted run), so "
            "`--draft-length` names the K the server ran.", ""]
    return out


def _tensorrt_llm(batches: Sequence[int], k: int) -> list[str]:
    url = "http://127.0.0.1:8000"
    out = ["## TensorRT-LLM", "", "```sh", "# 1. speculation off (no speculative_config)",
           f"trtllm-serve <target> --max_batch_size {max(batches)}"]
    out += [_bench(b, f"trt_k0_b{b}.json", url) for b in batches]
    out += [f"# 2. at K = {k} (speculative_config with max_draft_len: {k}), counters "
            "scraped before and after",
            f"trtllm-serve <target> --max_batch_size {max(batches)} --config k{k}.yaml",
            f"curl -s {url}/prometheus/metrics > trt_before.prom"]
    out += [_bench(b, f"trt_k{k}_b{b}.json", url) for b in batches]
    out += [f"curl -s {url}/prometheus/metrics > trt_after.prom",
            "# 3. (no acceptance replay found: run each other K' with its own max_draft_len)",
            _advise("trt_after.prom", "trt_before.prom",
                    [f"k=0:runs/trt_k0_b{b}.json" for b in batches]
                    + [f"k={k}:runs/trt_k{k}_b{b}.json" for b in batches]), "```", ""]
    return out


def _llama_cpp(batches: Sequence[int], k: int, method: str) -> list[str]:
    url = "http://127.0.0.1:8080"
    out = ["## llama.cpp", "", "```sh"]
    runs = []
    for b in batches:
        out += [f"# batch {b}: -np {b} slots, off then at K = {k}",
                f"llama-server -m <target.gguf> -np {b} --metrics",
                _bench(b, f"llama_k0_b{b}.json", url),
                f"llama-server -m <target.gguf> -np {b} --metrics {llama_cpp.flags(k, method)}",
                f"curl -s {url}/metrics > llama_before_b{b}.prom",
                _bench(b, f"llama_k{k}_b{b}.json", url),
                f"curl -s {url}/metrics > llama_after_b{b}.prom"]
        runs += [f"k=0:runs/llama_k0_b{b}.json", f"k={k}:runs/llama_k{k}_b{b}.json"]
    b0 = batches[0]
    out += ["# the counters of the smallest batch (acceptance taken as the same at every batch)",
            _advise(f"llama_after_b{b0}.prom", f"llama_before_b{b0}.prom", runs), "```", "",
            "- llama-server drafts one length for all slots: its schedule is the best K per "
            "`-np` (engine_config.md).", ""]
    return out


def measurement_plan(batches: Sequence[int], gamma: int,
                     per_position: Sequence[float] | None = None,
                     method: str = "draft_model", max_gamma: int | None = None) -> str:
    """Markdown: the commands per engine. ``batches``: the batch sizes to measure; ``gamma``:
    the counters' K; ``per_position``: their a_i / N (vLLM's replay rates; placeholders when
    None); ``max_gamma``: the largest K' asked (K' above ``gamma`` cannot be replayed)."""
    batches = sorted({int(b) for b in batches})
    if not batches or batches[0] < 1:
        raise ValueError("the measurement plan needs batch sizes >= 1")
    if gamma < 1:
        raise ValueError(f"the counters' draft length is {gamma}: need at least 1")
    top = gamma if max_gamma is None else max_gamma
    replay = [g for g in range(1, min(top, gamma) + 1) if g != gamma]
    out = ["# Measurement plan", "",
           f"Runs at every batch size {', '.join(map(str, batches))}: speculation off (K' = 0) "
           f"and at the counters' K = {gamma}, with the counters scraped before and after; "
           "where the engine replays acceptance (vLLM), also at every K' = 1.."
           f"{min(top, gamma)} with the counters' per-position rates. Then the last command of "
           "each section gives the schedule from the engine's own measurements.", "",
           "- Each server command runs in its own terminal (it replaces the previous server; "
           "wait until it is ready); the benchmark commands run in order beside it.",
           "- `<prompts.json>`: prompts like your traffic (a ShareGPT-format file): the "
           "counters measure acceptance on them.",
           "- `--num-prompts` is max(64, 8 b), so every run holds its concurrency b for most "
           "of its duration.", ""]
    if top > gamma:
        out += [f"K' = {gamma + 1}..{top} cannot be replayed: the counters do not identify "
                "acceptance beyond K; measure them with the real drafter at that K.", ""]
    out += _vllm(batches, gamma, per_position, method, replay)
    out += _sglang(batches, gamma, method)
    out += _tensorrt_llm(batches, gamma)
    out += _llama_cpp(batches, gamma, method)
    return "\n".join(out) + "\n"
