"""The engine configurations specsim writes, run through each engine's own validation and
batch-size lookup (re-implemented from the engine's source in tests/engine_reference.py, file
and commit on each function): every snippet is accepted, and the K the engine then drafts at
each batch size b is the schedule's -- for many schedules (a single range, K = 0 ranges,
speculation off from some batch, K rising again, a schedule not starting at batch 1)."""

from __future__ import annotations

import itertools
import json
import re

import engine_reference as ref
import numpy as np
import pytest

from specsim.acceptance.counts import AcceptanceCounts
from specsim.acceptance.engines import llama_cpp, plan, sglang, tensorrt_llm, vllm
from specsim.acceptance.engines.ranges import from_one, k_at, stops_at
from specsim.acceptance.snippets import render, snippets

FIXED = [
    [(1, 1, 5), (2, 6, 3)],                      # a deployment's form: two ranges
    [(1, 64, 3)],                                # a single range
    [(1, 4, 4), (5, 12, 2), (13, 40, 0)],        # speculation off from batch 13
    [(1, 3, 0), (4, 9, 2), (10, 16, 0)],         # no speculation at small batches
    [(1, 8, 0)],                                 # never pays
    [(1, 2, 2), (3, 7, 4), (8, 20, 1)],          # K rising again (noise)
    [(4, 8, 3), (9, 32, 1)],                     # measured from batch 4 only
    [(1, 1, 1), (2, 2, 0), (3, 3, 1), (4, 4, 0)],
]


def _random_schedules(n: int, seed: int) -> list[list[tuple[int, int, int]]]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        lo = int(rng.choice([1, 1, 1, 2, 5]))
        ranges = []
        for _ in range(int(rng.integers(1, 6))):
            hi = lo + int(rng.integers(0, 20))
            ranges.append((lo, hi, int(rng.integers(0, 7))))
            lo = hi + 1
        out.append(ranges)
    return out


SCHEDULES = FIXED + _random_schedules(150, 41)
METHODS = ["draft_model", "eagle3", "mtp", "ngram"]


def _expected(ranges, b: int, beyond: int | None) -> int:
    full, _ = from_one(ranges)
    return k_at(full, b) if b <= full[-1][1] else (full[-1][2] if beyond is None else beyond)


# ------------------------------------------------------------------ vLLM
@pytest.mark.parametrize("ranges", SCHEDULES)
def test_vllm_accepts_the_schedule_and_drafts_it_at_every_batch(ranges) -> None:
    code = vllm.snippet(ranges, "eagle3").code
    if all(k == 0 for *_, k in ranges):
        assert "--speculative-config '" not in code
        return
    cfg = json.loads(re.search(r"--speculative-config '(.*)'", code).group(1))
    ref.vllm_validate_config(cfg)
    sched = cfg["num_speculative_tokens_per_batch_size"]
    assert sched[0][0] == 1 and all(a[1] + 1 == b[0] for a, b in itertools.pairwise(sched))
    assert max(k for *_, k in sched) == cfg["num_speculative_tokens"]   # nothing clamped
    top = ranges[-1][1] + 7
    dense = ref.vllm_lookup(sched, top, cfg["num_speculative_tokens"])
    assert [dense[b] for b in range(1, top + 1)] == \
        [_expected(ranges, b, None) for b in range(1, top + 1)]


def test_vllm_refuses_what_the_pr_thread_format_and_a_gap_would_have_been() -> None:
    with pytest.raises(ValueError, match="3-item"):
        ref.vllm_validate_schedule([{"1-1": 5}])
    with pytest.raises(ValueError, match="start at 1"):
        ref.vllm_validate_schedule([[2, 6, 3]])
    with pytest.raises(ValueError, match="Adaptive verification"):
        ref.vllm_validate_config({"method": "eagle3", "num_speculative_tokens": 2,
                                  "enable_adaptive_verification": True})


# ------------------------------------------------------------------ TensorRT-LLM
def _trt(code: str) -> tuple[int, dict[int, int]]:
    kmax = int(re.search(r"max_draft_len: (\d+)", code).group(1))
    body = code.split("draft_len_schedule:", 1)[1]
    return kmax, {int(b): int(k) for b, k in re.findall(r"^ {4}(\d+): (\d+)$", body, re.M)}


@pytest.mark.parametrize("ranges", SCHEDULES)
def test_tensorrt_llm_accepts_the_schedule_and_drafts_it_at_every_batch(ranges) -> None:
    part = tensorrt_llm.snippet(ranges, "draft_model")
    k1 = from_one(ranges)[0][0][2]
    if k1 == 0:
        assert "draft_len_schedule" not in part.code
        return
    kmax, sched = _trt(part.code)
    sched = ref.trt_validate(kmax, sched)
    clipped = any(k > k1 for *_, k in ranges)
    assert clipped == any("Clipped" in n for n in part.notes)
    for floor in (0, 1):
        top = ranges[-1][1] + 7
        got = [ref.trt_lookup(sched, b, kmax, floor) for b in range(1, top + 1)]
        want = [max(min(_expected(ranges, b, 0), k1), floor) for b in range(1, top + 1)]
        assert got == want
    if stops_at(ranges) is not None and tensorrt_llm.FLOOR["Draft_Target"]:
        assert any("K = 0 range at K = 1" in n for n in part.notes)


def test_tensorrt_llm_validation_is_the_engines() -> None:
    with pytest.raises(ValueError, match="smallest"):
        ref.trt_validate(4, {4: 2, 8: 4})
    with pytest.raises(ValueError, match="mutually exclusive"):
        ref.trt_validate(4, {4: 4}, max_concurrency=8)
    assert ref.trt_lookup({4: 4, 8: 2, 32: 1}, 33, 4, 1) == 1   # the engine's own example


# ------------------------------------------------------------------ SGLang
def _sglang(code: str) -> tuple[dict | None, list[list[str]]]:
    lines = code.splitlines()
    cfg = next((json.loads(lines[i + 1]) for i, s in enumerate(lines)
                if s.startswith("cat > adaptive.json")), None)
    cmds = [s.split() for s in lines if s.startswith("python -m sglang.launch_server")]
    return cfg, cmds


@pytest.mark.parametrize("ranges", SCHEDULES)
@pytest.mark.parametrize("method", ["eagle3", "draft_model"])
def test_sglang_accepts_the_flags_and_routes_every_batch_to_its_k(ranges, method) -> None:
    cfg, cmds = _sglang(sglang.snippet(ranges, method).code)
    slots = ref.sglang_load_adaptive_config(cfg) if cfg else None
    union = sorted({s for c in (slots or {}).values() for s in c})
    for argv in cmds:
        ref.sglang_check_flags(argv, union)
    if all(k == 0 for *_, k in ranges):
        assert not cmds
    full, _ = from_one(ranges)
    if slots is None:
        assert method == "draft_model" or len(full) == 1
        return
    ends = [hi for _, hi, _ in full]
    for graphs in (None, ends, sorted(set(ends) | {1, 2, 4, 8, 16, 24, 32})):
        for b in range(1, ranges[-1][1] + 8):
            (step,) = slots[ref.sglang_route(list(slots), b, graphs)]
            assert step == _expected(ranges, b, None), (b, graphs)


@pytest.mark.parametrize("ranges", SCHEDULES[:40])
def test_sglang_names_the_graph_sizes_routing_needs(ranges) -> None:
    """A CUDA-graph list keeps every batch in its range iff no range end it needs is missing."""
    cfg = sglang.adaptive_config(ranges)
    slots = ref.sglang_load_adaptive_config(cfg)
    rng = np.random.default_rng(ranges[-1][1])
    for _ in range(5):
        graphs = sorted({int(g) for g in rng.integers(1, ranges[-1][1] + 4, 4)})
        exact = all(slots[ref.sglang_route(list(slots), b, graphs)] ==
                    [_expected(ranges, b, None)] for b in range(1, ranges[-1][1] + 8))
        assert exact == (not sglang.missing_graph_sizes(ranges, graphs)) or \
            len({k for *_, k in from_one(ranges)[0]}) == 1


def test_sglang_compares_with_its_default_adaptive_config() -> None:
    rows = sglang.default_agreement([(1, 4, 5), (5, 40, 1), (41, 80, 2)])
    assert (1, 4, 5, (1, 3, 5, 7)) in rows and (8, 31, 1, (0, 1, 3)) in rows
    assert (64, 80, 2, (0,)) in rows            # the default drafts nothing from batch 64


# ------------------------------------------------------------------ llama.cpp
@pytest.mark.parametrize("ranges", SCHEDULES[:60])
@pytest.mark.parametrize("method", METHODS)
def test_llama_cpp_parses_the_current_flags(ranges, method) -> None:
    part = llama_cpp.snippet(ranges, method)
    cmd = [s for s in part.code.splitlines() if s.startswith("llama-server")]
    k1 = from_one(ranges)[0][0][2]
    assert bool(cmd) == (k1 > 0)
    if cmd:
        flags = ref.llamacpp_parse(cmd[0])
        n_max = flags.get("--spec-draft-n-max", flags.get("--spec-ngram-mod-n-max"))
        assert int(n_max) == k1


def test_llama_cpp_refuses_the_removed_flags() -> None:
    with pytest.raises(ValueError, match="removed"):
        ref.llamacpp_parse("llama-server -m t.gguf --draft-max 4")


# ------------------------------------------------------------------ the document
@pytest.mark.parametrize("ranges", FIXED)
@pytest.mark.parametrize("method", METHODS)
def test_no_snippet_writes_a_removed_option(ranges, method) -> None:
    for part in snippets(ranges, method).values():
        for gone in ("disable_by_batch_size", "--draft-max", "--draft-min", '"1-1"'):
            assert gone not in part.code
    assert "## TensorRT-LLM" in render(ranges, method)


def test_a_bad_schedule_is_refused_in_one_line() -> None:
    for bad, word in (([], "empty"), ([(1, 2, 3), (4, 5, 1)], "contiguous"),
                      ([(0, 2, 1)], "batch 0"), ([(1, 2, -1)], "< 0")):
        with pytest.raises(ValueError, match=word):
            render(bad)


# ------------------------------------------------------------------ the measurement plan
def test_replay_rates_are_what_vllm_accepts_and_the_counters_rates() -> None:
    c = AcceptanceCounts.from_histogram([300, 200, 250, 250])
    for g in (1, 2, 3):
        rates = plan.replay_rates(c.per_position, g)
        ref.vllm_validate_config({"method": "eagle3", "num_speculative_tokens": g,
                                  "rejection_sample_method": "synthetic",
                                  "synthetic_acceptance_rates": rates})
        assert rates == pytest.approx(c.per_position[:g], abs=1e-6)
    with pytest.raises(ValueError, match="identify"):
        plan.replay_rates(c.per_position, 4)


def test_the_plan_runs_every_batch_at_zero_and_k_and_ends_in_a_measured_advise() -> None:
    c = AcceptanceCounts.from_histogram([300, 200, 250, 250])
    text = plan.measurement_plan([1, 4, 16], c.max_gamma, c.per_position, "eagle3", 5)
    vllm_part = text.split("## vLLM", 1)[1].split("## SGLang", 1)[0]
    for b in (1, 4, 16):
        assert f"--max-concurrency {b} --save-result" in vllm_part
        for g in (0, 1, 2, 3):
            assert f"k={g}:runs/vllm_k{g}_b{b}.json" in vllm_part
    advise = next(s for s in vllm_part.splitlines() if s.startswith("specsim advise"))
    assert "--baseline vllm_before.prom" in advise and "--metrics vllm_after.prom" in advise
    served = [json.loads(m) for m in re.findall(r"--speculative-config '(\{.*)'", vllm_part)]
    for cfg in served:
        ref.vllm_validate_config(cfg)
    assert {c["num_speculative_tokens"] for c in served} == {1, 2, 3}
    assert all(f"vllm_schedule_b{b}.json" in vllm_part for b in (1, 4, 16))
    assert "K' = 4..5 cannot be replayed" in text
    for line in text.splitlines():
        if line.startswith("llama-server"):
            ref.llamacpp_parse(line)


def test_advise_writes_the_plan_with_the_counters_rates(tmp_path) -> None:
    """``specsim advise`` writes measurement_plan.md: a run per batch asked, and vLLM replays of
    exactly the counters' a_i / N (read back from the same metrics file)."""
    from pathlib import Path

    from specsim.acceptance.readers import read_metrics
    from specsim.cli import main

    metrics = Path(__file__).resolve().parents[2] / "data" / "engine" / "vllm_metrics.prom"
    (tmp_path / "lat.csv").write_text(
        "role,batch,tokens,seconds\ntarget,1,1,0.020\ntarget,1,9,0.025\ntarget,16,1,0.030\n"
        "target,16,9,0.100\ndraft,1,1,0.003\ndraft,16,1,0.006\n")
    out = tmp_path / "advice"
    assert main(["advise", "--metrics", str(metrics), "--latency", str(tmp_path / "lat.csv"),
                 "--out", str(out), "--batch", "1", "2", "16"]) == 0
    text = (out / "measurement_plan.md").read_text()
    counts = read_metrics(metrics)
    assert all(f"--max-concurrency {b} --save-result" in text for b in (1, 2, 16))
    replayed = [json.loads(m)["synthetic_acceptance_rates"]
                for m in re.findall(r"--speculative-config '(.*)'", text)
                if "synthetic" in m]
    assert len(replayed) == counts.max_gamma - 1
    for rates in replayed:
        assert rates == pytest.approx(counts.per_position[:len(rates)], abs=1e-6)


def test_tensorrt_llm_max_concurrency_is_the_same_schedule_where_it_is_offered() -> None:
    """``max_concurrency: c`` is translated by TensorRT-LLM to ``{c: max_draft_len}``
    (llm_args.py at 011d0933dcb5e592f5fa2626beaf42a96324c578): offered only when it looks up
    the same K at every batch as the schedule."""
    offered = 0
    for ranges in SCHEDULES:
        part = tensorrt_llm.snippet(ranges, "ngram")
        note = next((n for n in part.notes if "max_concurrency: " in n), None)
        if note is None:
            continue
        offered += 1
        c = int(re.search(r"max_concurrency: (\d+)", note).group(1))
        kmax, _ = _trt(part.code)
        for b in range(1, ranges[-1][1] + 8):
            assert ref.trt_lookup({c: kmax}, b, kmax, 0) == _expected(ranges, b, 0)
    assert offered >= 2
