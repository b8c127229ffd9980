"""Every current engine format, variable draft lengths, cumulative counters: the fixtures in
tests/data/engine/ are written as the engines' source writes them (each reader's docstring
names the file and commit), and every expected count below is worked out by hand from them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specsim.acceptance.counts import AcceptanceCounts
from specsim.acceptance.formats.rounding import RoundedCounts
from specsim.acceptance.readers import (
    MetricsError,
    ReadOptions,
    read_counts,
    read_metrics,
    to_prometheus,
)

DATA = Path(__file__).resolve().parents[2] / "data" / "engine"
VLLM_LABELS = {"model_name": "meta-llama/Llama-3.1-8B-Instruct", "engine": "0"}
# vLLM's SpecDecodingLogging.log format (vllm/v1/spec_decode/metrics.py), verbatim
VLLM_FMT = ("SpecDecoding metrics: Mean acceptance length: %.2f, Accepted throughput: %.2f "
            "tokens/s, Drafted throughput: %.2f tokens/s, Accepted: %d tokens, Drafted: %d "
            "tokens, Per-position acceptance rate: %s, Avg Draft acceptance rate: %.1f%%")
# the same line for an interval that observed no draft: 0 / 0 prints nan
IDLE = ("INFO 06-12 14:03:21 [metrics.py:96] SpecDecoding metrics: Mean acceptance length: "
        "nan, Accepted throughput: 0.00 tokens/s, Drafted throughput: 0.00 tokens/s, "
        "Accepted: 0 tokens, Drafted: 0 tokens, Per-position acceptance rate: nan, nan, nan, "
        "Avg Draft acceptance rate: nan%")


def vllm_line(n: int, a: tuple[int, ...], prefix: str = "INFO 06-12 14:03:11 [metrics.py:96] ",
              drafted: int | None = None) -> str:
    drafted = n * len(a) if drafted is None else drafted
    acc = sum(a)
    return prefix + VLLM_FMT % (1 + acc / n, acc / 10, drafted / 10, acc, drafted,
                                ", ".join(f"{x / n:.3f}" for x in a), 100 * acc / drafted)


def write(tmp_path: Path, text: str, name: str = "m.txt") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def refused(paths: list[Path], *fragments: str, baselines: tuple[Path, ...] = (),
            **kw: object) -> str:
    with pytest.raises(MetricsError) as err:
        read_counts(paths, ReadOptions(**kw), baselines)  # type: ignore[arg-type]
    msg = str(err.value)
    assert "\n" not in msg and "Traceback" not in msg, msg
    for f in fragments:
        assert f in msg, (f, msg)
    return msg


# --------------------------------------------------------------------------- every fixture
@pytest.mark.parametrize(("name", "kw", "gamma", "rounds", "accepted"), [
    # llama-server /metrics: N = 812, a = (601, 422, 277), 2436 = 812 x 3 draft tokens
    ("llamacpp_metrics.prom", {}, 3, 812, (601, 422, 277)),
    # TensorRT-LLM: drafted 500 at every position, accepted 380, 260, 150
    ("trtllm_metrics.prom", {}, 3, 500, (380, 260, 150)),
    # drafted 500, 420, 300: every round drafted position 1 only -> exact at K = 1
    ("trtllm_metrics_varying.prom", {}, 1, 500, (380,)),
    ("trtllm_metrics_varying.prom", {"short_drafts": True}, 3, 500, (380, 250, 0)),
    # statistics lines, last per slot: slot 0 (40; 30, 20, 12) + slot 1 (25; 20, 14, 9)
    ("llamacpp_stats.log", {"format": "llamacpp-stats"}, 3, 65, (50, 34, 21)),
    # its per-request lines: 8 + 25 + 32 rounds, the same totals
    ("llamacpp_stats.log", {}, 3, 65, (50, 34, 21)),
    # SSE: K=3 rows [4,3,2,6] + [2,1,4,5] = [6,4,6,11]; the K=2 row [3,2,1]
    ("vllm_stream.sse", {}, 3, 27, (21, 17, 11)),
    ("vllm_stream.sse", {"draft_length": 2}, 2, 6, (3, 1)),
    ("vllm_stream.sse", {"short_drafts": True}, 3, 33, (24, 18, 11)),  # [9, 6, 7, 11]
    # by draft length: K=3 rows [10,8,6,20] + [6,5,4,9] = [16,13,10,29]; K=2 [5,4,3]; K=1 [2,3]
    ("vllm_requests_by_length.jsonl", {}, 3, 68, (52, 39, 29)),
    ("vllm_requests_by_length.jsonl", {"draft_length": 2}, 2, 12, (7, 3)),
    ("vllm_requests_by_length.jsonl", {"draft_length": 1}, 1, 5, (3,)),
    ("vllm_requests_by_length.jsonl", {"short_drafts": True}, 3, 85, (62, 42, 29)),
    # SGLang sglext: K=3 requests [3,5,12] + [4,2,3,6] = [7,7,15,6]; K=4 [1,2,2,1,4]
    ("sglang_sglext.json", {}, 4, 10, (9, 7, 5, 4)),
    ("sglang_sglext.json", {"draft_length": 3}, 3, 35, (28, 21, 6)),
])
def test_fixture_counts(name: str, kw: dict, gamma: int, rounds: int,
                        accepted: tuple[int, ...]) -> None:
    r = read_counts([DATA / name], ReadOptions(**kw))
    assert (r.gamma, r.counts.rounds, r.counts.accepted) == (gamma, rounds, accepted)
    assert r.cut_short == bool(kw.get("short_drafts"))
    if r.cut_short:
        assert "the cost (fewer than K drafts a round) and the tail beyond K" in r.summary()


def test_the_data_say_which_draft_lengths_they_hold() -> None:
    r = read_counts([DATA / "vllm_requests_by_length.jsonl"])
    assert dict(r.by_length) == {1: 5, 2: 12, 3: 68}
    text = r.summary()
    assert text.startswith("counters at draft length K = 3 (68 rounds)")
    assert "K=1: 5 rounds, K=2: 12 rounds, K=3: 68 rounds (--draft-length to choose)" in text
    assert "2 rounds with no valid draft (draft length 0) skipped" in text
    note = read_counts([DATA / "trtllm_metrics_varying.prom"]).summary()
    assert "rounds by draft length (1: 80, 2: 120, 3: 300)" in note and "--short-drafts" in note


# --------------------------------------------------------------------------- rounding
def test_llama_server_rounded_round_count_widens_the_interval() -> None:
    """2.34568e+06 rounds: N in 2345675..2345685, a_i exact; the accepted total
    4.30012e+06 matches sum(a) = 4300124 within its printed half-unit (5)."""
    c = read_metrics(DATA / "llamacpp_metrics_busy.prom")
    assert isinstance(c, RoundedCounts)
    assert (c.rounds, c.accepted) == (2345680, (1900001, 1400000, 1000123))
    assert c.other_rounds == (2345675, 2345685)
    t = c.tokens_per_call(3)
    for n in (2345675, 2345685):
        end = AcceptanceCounts(n, c.accepted).tokens_per_call(3)
        assert t.low <= end.low and end.high <= t.high
    assert t.mean == AcceptanceCounts(2345680, c.accepted).tokens_per_call(3).mean


def test_busy_vllm_lines_carry_their_rounding(tmp_path: Path) -> None:
    """5000 rounds a line: a_1 in 3998..4002 prints 0.800 (slack 4 each). T(1) can be off by
    min(4, 4 + 4) / 5000; T(3) = 1 + 9000 / 5000 is printed exactly."""
    lines = [vllm_line(5000, (4000, 3000, 2000)), IDLE, vllm_line(40, (30, 20, 12))]
    r = read_counts([write(tmp_path, "\n".join(lines), "vllm.log")])
    c = r.counts
    assert isinstance(c, RoundedCounts) and c.slack == (4, 4, 4)
    assert (c.rounds, c.accepted) == (5040, (4030, 3020, 2012))
    low_corner = AcceptanceCounts(5040, (4026, 3020, 2016)).tokens_per_call(1)
    assert c.tokens_per_call(1).low == low_corner.low
    plain = AcceptanceCounts(5040, c.accepted)
    assert c.tokens_per_call(3).mean == plain.tokens_per_call(3).mean
    assert c.tokens_per_call(1).high > plain.tokens_per_call(1).high
    notes = r.summary()
    assert "1 of 2 lines print rates that several whole counts match" in notes
    assert "1 idle 'nan' lines (intervals with no draft) skipped" in notes


def test_a_log_starting_with_a_bracket_is_a_log(tmp_path: Path) -> None:
    p = write(tmp_path, vllm_line(40, (30, 20, 12), prefix="[2026-12-05 11:00:01] INFO ") + "\n")
    r = read_counts([p])
    assert r.counts.source.endswith("(vllm-log)") and r.counts.accepted == (30, 20, 12)


# --------------------------------------------------------------------------- scrapes
def test_openmetrics_escaped_names(tmp_path: Path) -> None:
    text = (DATA / "vllm_metrics.prom").read_text().replace("vllm:", "vllm_") + "# EOF\n"
    c = read_metrics(write(tmp_path, text))
    assert (c.rounds, c.accepted) == (157, (120, 84, 51))


def test_baseline_takes_the_difference(tmp_path: Path) -> None:
    before = write(tmp_path, to_prometheus(AcceptanceCounts(57, (40, 22, 9)), VLLM_LABELS),
                   "before.prom")
    r = read_counts([DATA / "vllm_metrics.prom"], baselines=[before])
    assert (r.counts.rounds, r.counts.accepted) == (100, (80, 62, 42))
    restart = write(tmp_path, to_prometheus(AcceptanceCounts(300, (200, 100, 60)), VLLM_LABELS),
                    "big.prom")
    msg = refused([DATA / "vllm_metrics.prom"], "went down from 300", "restarted",
                  baselines=(restart,))
    assert 'vllm:spec_decode_num_drafts_total{engine="0",model_name=' in msg
    refused([DATA / "vllm_specdecode.log"], "--baseline", "not a Prometheus scrape",
            baselines=(before,))
    refused([DATA / "vllm_metrics.prom", DATA / "vllm_metrics.prom"], "--baseline: 1 files for 2",
            baselines=(before,))


def test_sum_series_pools_one_k(tmp_path: Path) -> None:
    two = DATA / "vllm_metrics_two_engines.prom"
    r = read_counts([two], ReadOptions(sum_series=True))
    assert (r.counts.rounds, r.counts.accepted) == (157 + 203, (270, 185, 117))
    assert "2 series pooled (--sum-series)" in r.summary()
    k2 = to_prometheus(AcceptanceCounts(10, (8, 5)), {"engine": "1", "model_name": "m"})
    mixed = to_prometheus(AcceptanceCounts(10, (8, 5, 2)), {"engine": "0", "model_name": "m"})
    p = write(tmp_path, mixed + "\n".join(ln for ln in k2.splitlines() if not ln.startswith("#")))
    refused([p], "--sum-series: the series ran different draft lengths", "K=3", "K=2",
            "--label", sum_series=True)


@pytest.mark.parametrize(("text", "frags"), [
    ("# TYPE sglang:spec_accept_length gauge\nsglang:spec_accept_length{model_name=\"q\"} 2.4\n",
     ["SGLang's sglang:spec_accept_length", "carry no per-position counts; use",
      "spec_correct_drafts_histogram"]),
    ("trtllm_spec_decode_num_draft_tokens_total{model_name=\"m\"} 40.0\n",
     ["TensorRT-LLM's trtllm_spec_decode_num_draft_tokens_total",
      "carry no per-position counts", "token_position"]),
])
def test_scrapes_without_positions_are_refused(tmp_path: Path, text: str,
                                               frags: list[str]) -> None:
    refused([write(tmp_path, text, "m.prom")], *frags)


def test_trtllm_refusals(tmp_path: Path) -> None:
    text = (DATA / "trtllm_metrics.prom").read_text()
    refused([write(tmp_path, text.replace('token_position="1"} 260.0',
                                          'token_position="1"} 510.0'), "t.prom")],
            "position 1: drafted 500, accepted 510", "must not increase")
    refused([DATA / "trtllm_metrics_varying.prom"], "--label engine_type=x: no counters with "
            "it (values: trtllm)", labels={"engine_type": "x"})


# --------------------------------------------------------------------------- logs
def test_llamacpp_statistics_lines(tmp_path: Path) -> None:
    stats = [ln for ln in (DATA / "llamacpp_stats.log").read_text().splitlines()
             if "statistics" in ln or ("slot" in ln and "draft acceptance" not in ln)]
    only = write(tmp_path, "\n".join(stats) + "\n", "stats.log")
    r = read_counts([only])
    assert r.counts.source.endswith("(llamacpp-stats)")
    assert (r.counts.rounds, r.counts.accepted) == (65, (50, 34, 21))
    ngram = ("0.42.130.633 I spec common_specu: statistics        ngram-mod: #calls(b,g,a) =    "
             "4    542     31, #gen drafts =     31, #acc drafts =    28, #gen tokens =    920, "
             "#acc tokens =   527, #mean acc len = 18.00, #acc rate/pos = (0.903, 0.806), "
             "dur(b,g,a) = 0.688, 0.851, 0.021 ms")
    both = write(tmp_path, "\n".join([*stats, ngram]) + "\n", "both.log")
    refused([both], "several drafters (draft-mtp, ngram-mod)", "--label type=draft-mtp")
    assert read_counts([both], ReadOptions(labels={"type": "draft-mtp"})).counts.rounds == 65
    # its two printed rates (28, 25 of 31) cannot sum to the 527 accepted tokens
    refused([both], "counts cannot be recovered", labels={"type": "ngram-mod"})
    refused([both], "--label type=eagle3: no statistics line of it", labels={"type": "eagle3"})


def test_idle_lines_alone_are_refused(tmp_path: Path) -> None:
    refused([write(tmp_path, IDLE + "\n")], "no 'SpecDecoding metrics:' line with counts")


# --------------------------------------------------------------------------- requests
def sglext(h: list[int], **extra: object) -> dict:
    det = {"spec_verify_ct": sum(h), "spec_num_correct_drafts": sum(j * c for j, c in
                                                                    enumerate(h)),
           "spec_correct_drafts_histogram": h, **extra}
    return {"id": "x", "object": "chat.completion", "choices": [], "sglext": {
        "spec_tokens_details": det}}


def test_sglang_draft_length_that_changed_within_a_request(tmp_path: Path) -> None:
    """Adaptive steps: 57 drafts over 20 rounds cannot be one K; a proposed-length
    histogram over two lengths neither. Refused unless --short-drafts."""
    adaptive = write(tmp_path, json.dumps([sglext([3, 5, 12], spec_num_proposed_drafts=57)]),
                     "a.json")
    refused([adaptive], "57 proposed drafts over 20 verify rounds (2.85 a round)",
            "changed within the request", "--short-drafts")
    r = read_counts([adaptive], ReadOptions(short_drafts=True))
    assert (r.gamma, r.counts.rounds, r.counts.accepted) == (3, 20, (17, 12, 0))
    hist = write(tmp_path, json.dumps([sglext([3, 5, 12], spec_num_proposed_drafts=55,
                                              spec_proposed_drafts_histogram=[0, 0, 5, 15])]),
                 "h.json")
    refused([hist], "proposed draft lengths [2, 3]", "cannot be split by K")


def test_sglang_needs_its_draft_length(tmp_path: Path) -> None:
    """No round accepted all 4 drafts: the histogram stops at 3; K = 4 must be given."""
    p = write(tmp_path, json.dumps([{"meta_info": {"spec_verify_ct": 10,
                                                   "spec_accept_histogram": [2, 3, 4, 1]}}]),
              "s.json")
    refused([p], "the draft length is unknown", "longest accepted run (here 3)",
            "--draft-length K")
    c = read_counts([p], ReadOptions(draft_length=4)).counts
    assert (c.max_gamma, c.rounds, c.accepted) == (4, 10, (8, 5, 1, 0))


@pytest.mark.parametrize(("doc", "frags"), [
    ({"id": "c", "timings": {"predicted_n": 64, "draft_n": 40, "draft_n_accepted": 31}},
     ["llama.cpp's timings.draft_n", "carry no per-position counts; use llama-server's "
      "/metrics"]),
    ({"iter": 12, "iterLatencyMS": 14.2, "specDecodingStats": {"numDraftTokens": 9,
                                                               "numAcceptedTokens": 5}},
     ["TensorRT-LLM iteration stats", "carry no per-position counts"]),
    ({"meta_info": {"spec_verify_ct": 20, "spec_accept_length": 2.5}},
     ["spec_accept_length / spec_verify_ct carry no per-position counts"]),
    ({"metrics": {"speculative_decoding": {"acceptance_histogram": [3, 2, 1, 1],
                                           "acceptance_histogram_by_draft_length": {
                                               "3": [3, 2, 1, 0]}}}},
     ["acceptance_histogram [3, 2, 1, 1] is not the sum of its rows by draft length"]),
])
def test_json_refusals(tmp_path: Path, doc: dict, frags: list[str]) -> None:
    refused([write(tmp_path, json.dumps([doc]), "r.json")], *frags)


def test_sse_stream_keeps_each_streams_last_statistics(tmp_path: Path) -> None:
    """A stream whose chunks each carry the running statistics counts once, at its last."""
    def chunk(h: list[int]) -> str:
        return "data: " + json.dumps({"id": "s1", "metrics": {"speculative_decoding": {
            "acceptance_histogram": h, "num_spec_tokens": 2}}})
    p = write(tmp_path, "\n\n".join([chunk([1, 1, 0]), chunk([2, 1, 3]), "data: [DONE]"]),
              "s.sse")
    c = read_metrics(p)
    assert (c.rounds, c.accepted) == (6, (4, 3))


# --------------------------------------------------------------------------- the command
PROFILE = """role,batch,tokens,seconds
target,1,1,0.020
target,1,5,0.022
target,4,1,0.024
target,4,5,0.030
draft,1,1,0.003
draft,4,1,0.004
"""


def test_advise_names_the_draft_length_and_notes(tmp_path: Path, capsys) -> None:
    from specsim.cli import main

    (tmp_path / "lat.csv").write_text(PROFILE)
    out = tmp_path / "advice"
    assert main(["advise", "--metrics", str(DATA / "vllm_requests_by_length.jsonl"),
                 "--latency", str(tmp_path / "lat.csv"), "--out", str(out),
                 "--draft-length", "2"]) == 0
    text = capsys.readouterr().out
    assert "counters at draft length K = 2 (12 rounds)" in text
    assert "--draft-length to choose" in text and (out / "schedule.csv").is_file()


@pytest.mark.parametrize(("args", "message"), [
    (["--metrics", str(DATA / "vllm_metrics_two_engines.prom")], "--sum-series"),
    (["--metrics", str(DATA / "llamacpp_server.log")], "--short-drafts"),
    (["--metrics", str(DATA / "vllm_metrics.prom"), "--baseline", str(DATA / "vllm_metrics.prom"),
      str(DATA / "vllm_metrics.prom")], "--baseline: 2 files for 1"),
])
def test_advise_refusals_name_flags_and_write_nothing(tmp_path: Path, capsys, args: list,
                                                      message: str) -> None:
    from specsim.cli import main

    (tmp_path / "lat.csv").write_text(PROFILE)
    out = tmp_path / "advice"
    assert main(["advise", *args, "--latency", str(tmp_path / "lat.csv"), "--out",
                 str(out)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("specsim advise: error: ") and message in err, err
    assert err.count("\n") == 1 and not out.exists()
    assert "allow_short" not in err and "=True" not in err


@pytest.mark.parametrize(("args", "message"), [
    (["--draft-length", "0"], "argument --draft-length: must be >= 1, got 0"),
    (["--max-gamma", "-1"], "argument --max-gamma: must be >= 1"),
    (["--batch", "4", "x"], "argument --batch: not an integer: 'x'"),
    (["--label", "engine"], "argument --label: 'engine': give NAME=VALUE"),
])
def test_advise_usage_errors_exit_2_naming_the_flag(tmp_path: Path, capsys, args: list,
                                                    message: str) -> None:
    """A bad flag value is a usage error (exit status 2, one line naming the flag), answered
    before any file is read; nothing is written."""
    from specsim.cli import main

    out = tmp_path / "advice"
    with pytest.raises(SystemExit) as stop:
        main(["advise", "--metrics", str(DATA / "vllm_metrics.prom"), *args, "--latency",
              str(tmp_path / "missing.csv"), "--out", str(out)])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("specsim advise: error: ") and message in err, err
    assert err.count("\n") == 1 and not out.exists()


def test_detection_parses_json_past_its_head(tmp_path: Path) -> None:
    """A JSON document longer than the head read for detection (long generated texts) is
    read whole; a long log whose lines start with '[' is a log."""
    doc = [{"text": "x" * 40_000, "meta_info": {"spec_verify_ct": 20,
                                                "spec_correct_drafts_histogram": [3, 5, 12],
                                                "spec_num_proposed_drafts": 60}}] * 3
    c = read_metrics(write(tmp_path, json.dumps(doc), "big.json"))
    # 3 x [3, 5, 12]; K = 60 / 20 = 3 though no round accepted 3 (the histogram stops at 2)
    assert (c.rounds, c.accepted) == (60, (51, 36, 0))
    log = "\n".join(vllm_line(40, (30, 20, 12), prefix=f"[2026-12-05 11:00:{i % 60:02d}] ")
                    for i in range(400))
    r = read_counts([write(tmp_path, log, "big.log")])
    assert r.counts.source.endswith("(vllm-log)") and r.counts.rounds == 400 * 40


def test_rounded_files_pool_their_slack(tmp_path: Path) -> None:
    busy = write(tmp_path, vllm_line(5000, (4000, 3000, 2000)) + "\n", "busy.log")
    c = read_counts([busy, busy]).counts
    assert isinstance(c, RoundedCounts)
    assert (c.rounds, c.accepted, c.slack) == (10000, (8000, 6000, 4000), (8, 8, 8))


def test_vllm_detailed_per_step_arrays(tmp_path: Path) -> None:
    """``detailed``: one (drafted, accepted) per step -> rows K=3 [1, 1, 0, 1], K=2 [0, 0, 1]."""
    doc = [{"metrics": {"speculative_decoding": {"per_step_drafted": [3, 3, 2, 3],
                                                 "per_step_accepted": [1, 3, 2, 0],
                                                 "num_spec_tokens": 3}}}]
    p = write(tmp_path, json.dumps(doc), "d.json")
    r = read_counts([p])
    assert (r.gamma, r.counts.rounds, r.counts.accepted) == (3, 3, (2, 1, 1))
    assert read_counts([p], ReadOptions(draft_length=2)).counts.accepted == (1, 1)


def test_advise_flags_rounded_counts(tmp_path: Path, capsys) -> None:
    from specsim.cli import main

    (tmp_path / "lat.csv").write_text(PROFILE)
    log = write(tmp_path, "\n".join([vllm_line(5000, (4000, 3000, 2000)), IDLE]), "v.log")
    assert main(["advise", "--metrics", str(log), "--latency", str(tmp_path / "lat.csv"),
                 "--out", str(tmp_path / "advice")]) == 0
    text = capsys.readouterr().out
    assert "rounding is carried into the intervals" in text
    assert "1 idle 'nan' lines" in text
