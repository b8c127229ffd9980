"""Engine metrics files -> AcceptanceCounts: every format from fixtures shaped as the engines
write them (tests/data/engine/), the vLLM counters' round trip, every refusal's one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specsim.acceptance.counts import AcceptanceCounts
from specsim.acceptance.prometheus import parse_exposition
from specsim.acceptance.readers import (
    MetricsError,
    read_counts,
    read_many,
    read_metrics,
    to_prometheus,
)

DATA = Path(__file__).resolve().parents[2] / "data" / "engine"

# vLLM's SpecDecodingLogging.log format string (vllm/v1/spec_decode/metrics.py), verbatim
VLLM_FMT = ("SpecDecoding metrics: Mean acceptance length: %.2f, Accepted throughput: %.2f "
            "tokens/s, Drafted throughput: %.2f tokens/s, Accepted: %d tokens, Drafted: %d "
            "tokens, Per-position acceptance rate: %s, Avg Draft acceptance rate: %.1f%%")


def vllm_line(n: int, a: tuple[int, ...], drafted: int | None = None) -> str:
    drafted = n * len(a) if drafted is None else drafted
    rates = ", ".join(f"{x / n:.3f}" for x in a)
    acc = sum(a)
    return ("INFO 06-12 14:03:11 [metrics.py:96] "
            + VLLM_FMT % (1 + acc / n, acc / 10, drafted / 10, acc, drafted, rates,
                          100 * acc / drafted))


def write(tmp_path: Path, text: str, name: str = "m.txt") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def refused(path: Path, *fragments: str, **kw: object) -> str:
    with pytest.raises(MetricsError) as err:
        read_metrics(path, **kw)  # type: ignore[arg-type]
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith(str(path)), msg
    for f in fragments:
        assert f in msg, (f, msg)
    return msg


# --------------------------------------------------------------------------- fixtures
@pytest.mark.parametrize(("name", "rounds", "accepted", "kw"), [
    ("vllm_metrics.prom", 157, (120, 84, 51), {}),
    ("vllm_metrics_two_engines.prom", 203, (150, 101, 66), {"labels": {"engine": "1"}}),
    ("vllm_metrics_two_engines.prom", 157, (120, 84, 51), {"labels": {"engine": 0}}),
    ("vllm_specdecode.log", 157, (120, 77, 44), {}),
    ("vllm_specdecode.log", 57, (40, 22, 9), {"lines": "last"}),
    ("vllm_requests.json", 68, (24, 19, 13), {}),
    ("sglang_requests.json", 35, (31, 24, 8), {"draft_length": 3}),
    ("llamacpp_trace.log", 40, (30, 20, 12), {}),
    ("llamacpp_server.log", 127, (100, 75, 54), {"short_drafts": True}),
    ("llamacpp_server.log", 40, (30, 20, 12), {"lines": "last"}),
])
def test_fixture(name: str, rounds: int, accepted: tuple[int, ...], kw: dict) -> None:
    c = read_metrics(DATA / name, **kw)
    assert (c.rounds, c.accepted) == (rounds, accepted)
    assert c.source.startswith(str(DATA / name))


@pytest.mark.parametrize(("name", "fmt"), [
    ("vllm_metrics.prom", "prometheus"), ("vllm_specdecode.log", "vllm-log"),
    ("vllm_requests.json", "histograms"), ("sglang_sglext.json", "histograms"),
    ("llamacpp_trace.log", "llamacpp"), ("llamacpp_metrics.prom", "prometheus"),
    ("trtllm_metrics.prom", "prometheus"), ("llamacpp_stats.log", "llamacpp"),
    ("vllm_stream.sse", "histograms"), ("vllm_requests_by_length.jsonl", "histograms")])
def test_autodetect_names_the_format(name: str, fmt: str) -> None:
    assert read_metrics(DATA / name).source.endswith(f"({fmt})")
    assert read_metrics(DATA / name, format=fmt).source.endswith(f"({fmt})")


# --------------------------------------------------------------------------- prometheus
def test_writer_writes_vllms_counters_exactly() -> None:
    """The spec-decode part of the vLLM-shaped scrape, less its _created samples."""
    c = AcceptanceCounts(157, (120, 84, 51))
    text = to_prometheus(c, {"model_name": "meta-llama/Llama-3.1-8B-Instruct", "engine": "0"})
    scrape = (DATA / "vllm_metrics.prom").read_text().splitlines()
    start = scrape.index("# HELP vllm:spec_decode_num_drafts_total Number of spec decoding "
                         "drafts.")
    want = [ln for ln in scrape[start:] if "_created" not in ln]
    assert text.splitlines() == want


@pytest.mark.parametrize("labels", [None, {"engine": "2", "model_name": 'a "q" \\ b\nc'}])
def test_round_trip(tmp_path: Path, labels: dict | None) -> None:
    c = AcceptanceCounts(2_345_678, (2_000_001, 1_500_000, 999_999, 12))
    p = write(tmp_path, to_prometheus(c, labels), "m.prom")
    back = read_metrics(p, labels=labels)
    assert (back.rounds, back.accepted) == (c.rounds, c.accepted)
    assert "2.345678e+06" in p.read_text()


def test_exposition_syntax(tmp_path: Path) -> None:
    """Escapes, timestamps, exponents, a trailing comma, an exemplar, # EOF."""
    text = "\n".join([
        "# some comment",
        'vllm:spec_decode_num_drafts_total{engine="0",model_name="x\\"y"} 1e1 1712345678901',
        'vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="x\\"y",} 2.0E1',
        'vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="x\\"y"} 12 # '
        '{trace_id="abc"} 1.0',
        'vllm:spec_decode_num_accepted_tokens_per_pos_total{ engine="0", model_name="x\\"y", '
        'position="1"} 5.0',
        'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="x\\"y",'
        'position="0"} 7',
        'vllm:spec_decode_num_drafts_created{engine="0",model_name="x\\"y"} 1.7e9',
        "# EOF", ""])
    samples = parse_exposition(text)
    assert samples[0].labels == (("engine", "0"), ("model_name", 'x"y'))
    c = read_metrics(write(tmp_path, text))
    assert (c.rounds, c.accepted) == (10, (7, 5))


# a small scrape of one series: drafts, draft tokens, accepted tokens, per-position counts
POS = ('vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",'
       'position="%s"} %s')
TOT = 'vllm:spec_decode_num_%s_total{engine="0",model_name="m"} %s'


def prom_text(n: object = 10, dt: object = 30, acc: object = 15,
              pos: tuple[tuple[str, object], ...] = (("0", 8), ("1", 5), ("2", 2))) -> str:
    lines = [TOT % ("drafts", n), TOT % ("draft_tokens", dt), TOT % ("accepted_tokens", acc)]
    return "\n".join(lines + [POS % p for p in pos]) + "\n"


@pytest.mark.parametrize(("text", "frags"), [
    (prom_text(acc=-15), [":3:", "-15.0 is not a count"]),
    (prom_text(n=10.5), [":1:", "10.5 is not a count"]),
    (prom_text(pos=(("0", 8), ("1", 9), ("2", 2))), [":5:", "position 1: 9 accepted exceeds "
                                                     "position 0's 8", "must not increase"]),
    (prom_text(n=7, dt=21), [":4:", "position 0: 8 accepted exceeds 7 drafts"]),
    (prom_text(acc=16, pos=(("0", 8), ("1", 5), ("3", 3))), ["position 2 missing",
                                                             "positions 0,1,3"]),
    (prom_text(pos=(("0", 8), ("x", 5))), [":5:", "position 'x' is not a 0-based index"]),
    (prom_text(acc=16), [":3:", "num_accepted_tokens_total 16 != 15, the sum"]),
    (prom_text(dt=31), [":2:", "31 draft tokens exceed 10 rounds x 3 positions"]),
    (prom_text(dt=28), [":2:", "28 draft tokens < 10 rounds x 3 positions",
                        "--short-drafts", "K changed with load"]),
    (prom_text(pos=()), ["no vllm:spec_decode_num_accepted_tokens_per_pos_total counters"]),
    ("\n".join(prom_text().splitlines()[1:]), ["no vllm:spec_decode_num_drafts_total"]),
    (prom_text(n=0, dt=0, acc=0, pos=(("0", 0),)), ["0 drafting rounds"]),
    ("# TYPE vllm:spec_decode_num_drafts_total counter\nvllm:num_requests_running 1\n",
     ["no speculative-decoding counters", "was speculative decoding on?"]),
    (prom_text() + TOT % ("drafts", 11) + "\n", [":7:", "again (first on line 1)",
                                                 "one scrape per file"]),
    ('vllm:spec_decode_num_drafts_total{engine="0} 1\n', [":1:", "unterminated value"]),
    ('vllm:spec_decode_num_drafts_total{engine="\\t"} 1\n', [":1:", "bad escape"]),
    ('vllm:spec_decode_num_drafts_total{engine=0} 1\n', [":1:", "malformed label"]),
    ("vllm:spec_decode_num_drafts_total twelve\n", [":1:", "'twelve' is not a number"]),
    ("vllm:spec_decode_num_drafts_total 1 2 3\n", [":1:", "expected a value"]),
    ("vllm:spec_decode_num_drafts_total 1 soon\n", [":1:", "timestamp 'soon'"]),
    ('vllm:spec_decode_num_drafts_total{a="1",a="2"} 1\n', [":1:", "a label repeated"]),
])
def test_prometheus_refusals(tmp_path: Path, text: str, frags: list[str]) -> None:
    refused(write(tmp_path, text), *frags)


def test_prometheus_short_drafts_taken_when_allowed(tmp_path: Path) -> None:
    c = read_metrics(write(tmp_path, prom_text(dt=28)), short_drafts=True)
    assert (c.rounds, c.accepted) == (10, (8, 5, 2))


def test_two_engines_and_label_choice(tmp_path: Path) -> None:
    two = DATA / "vllm_metrics_two_engines.prom"
    refused(two, "2 series: label 'engine' ('0', '1')", "--label engine=0", "--sum-series")
    refused(two, "--label engine=7: no counters with it (values: 0, 1)", labels={"engine": "7"})
    refused(two, "no label 'gpu' on the counters (labels: engine, model_name)",
            labels={"gpu": "0"})
    both = (two.read_text().replace('engine="1",model_name="meta-llama/Llama-3.1-8B-Instruct"',
                                    'engine="0",model_name="other/model"'))
    p = write(tmp_path, both, "models.prom")
    refused(p, "label 'model_name' ('meta-llama/Llama-3.1-8B-Instruct', 'other/model')",
            labels={"engine": "0"})
    assert read_metrics(p, labels={"model_name": "other/model"}).rounds == 203


# --------------------------------------------------------------------------- vLLM log
def test_vllm_log_lines_recovered_exactly(tmp_path: Path) -> None:
    a1, a2 = (512, 301, 122), (3, 1, 0)
    p = write(tmp_path, "\n".join(["junk", vllm_line(640, a1), vllm_line(7, a2)]))
    c = read_metrics(p)
    assert (c.rounds, c.accepted) == (647, (515, 302, 122))
    assert read_metrics(p, lines="last").accepted == a2


@pytest.mark.parametrize(("line", "frags", "kw"), [
    (vllm_line(100, (80, 55, 35)).replace("Accepted: 170", "Accepted: 171"),
     [":1:", "counts cannot be recovered", "summing to 171", "Prometheus counters"], {}),
    (vllm_line(100, (80, 55, 35)).replace("Accepted: 170 tokens, Drafted: 300 tokens, ", ""),
     [":1:", "rates without counts: no 'Accepted', 'Drafted'"], {}),
    (vllm_line(100, (80, 55, 35)).split(", Per-position")[0],
     [":1:", "no 'Per-position acceptance rate'"], {}),
    (vllm_line(100, (80, 55, 35), drafted=290), [":1:", "290 draft tokens < 100 rounds x 3"],
     {}),
    ("INFO Engine 000: Avg prompt throughput: 0.0 tokens/s", ["no 'SpecDecoding metrics:'"],
     {"format": "vllm-log"}),
    (vllm_line(100, (80, 55, 35)) + "\n" + vllm_line(50, (40, 20)),
     [":2:", "2 positions, earlier lines 3"], {}),
])
def test_vllm_log_refusals(tmp_path: Path, line: str, frags: list[str], kw: dict) -> None:
    refused(write(tmp_path, line + "\n"), *frags, **kw)


def test_vllm_log_no_acceptance_uses_drafted(tmp_path: Path) -> None:
    c = read_metrics(write(tmp_path, vllm_line(40, (0, 0, 0))))
    assert (c.rounds, c.accepted) == (40, (0, 0, 0))


# --------------------------------------------------------------------------- llama.cpp
def test_llamacpp_short_drafts_refused_by_default() -> None:
    path = DATA / "llamacpp_server.log"
    refused(path, f"{path}:5:", "259 draft tokens < 87 rounds x 3 positions")


@pytest.mark.parametrize("line", [
    "slot print_timing: id  0 | task 0 | draft acceptance = 0.64479 (  167 accepted /   259 "
    "generated)",
    "slot print_timing: id  0 | task 0 | draft acceptance rate = 0.57576 (  171 accepted /   "
    "297 generated)",
    "slot print_timing: id  0 | task 0 | draft acceptance = 0.51667 (   62 accepted /   120 "
    "generated), mean len =  2.55",
])
def test_llamacpp_without_positions_refused(tmp_path: Path, line: str) -> None:
    p = write(tmp_path, "srv  update_slots: all slots are idle\n" + line + "\n")
    refused(p, f"{p}:2:", "without per-position rates", "cannot be recovered")


def test_llamacpp_line_not_found(tmp_path: Path) -> None:
    refused(write(tmp_path, "n_draft   = 16\nn_accept  = 71\n"), "unknown format")
    refused(write(tmp_path, "n_accept  = 71\n"), "no llama.cpp 'draft acceptance",
            format="llamacpp")


# --------------------------------------------------------------------------- histograms
def test_histogram_shapes(tmp_path: Path) -> None:
    lists = read_metrics(write(tmp_path, "[[39, 1, 0, 3], [5, 4, 6, 10]]", "h.json"))
    vllm = read_metrics(DATA / "vllm_requests.json")
    assert (lists.rounds, lists.accepted) == (vllm.rounds, vllm.accepted)
    dense = [{"metrics": {"speculative_decoding": {"acceptance_histogram": [39, 1, 0, 3],
                                                   "num_spec_tokens": 3}}}]
    assert read_metrics(write(tmp_path, json.dumps(dense), "d.json")).rounds == 43
    jsonl = "\n".join(json.dumps(x) for x in json.loads((DATA / "sglang_requests.json")
                                                        .read_text()))
    sg = read_metrics(write(tmp_path, jsonl, "s.jsonl"), draft_length=3)
    assert (sg.rounds, sg.accepted) == (35, (31, 24, 8))
    declared = [{"spec_accept_histogram": [3, 5, 12], "num_spec_tokens": 4}]
    assert read_metrics(write(tmp_path, json.dumps(declared), "k.json")).accepted == (17, 12,
                                                                                    0, 0)


@pytest.mark.parametrize(("doc", "frags"), [
    ("[]", ["an empty list"]),
    ('[{"text": "hi"}]', ["no entry carries acceptance_histogram or spec_correct_drafts_"]),
    ('[[3, -1, 2]]', ["entry 0: histogram", "needs whole counts >= 0", "-1"]),
    ('[[3, 1.5]]', ["entry 0", "1.5"]),
    ('[{"acceptance_histogram": {"zero": 3}}]', ["entry 0: histogram keys ['zero']"]),
    ('[{"acceptance_histogram": {"0": 3, "1": 2}, "num_spec_steps": 6}]',
     ["entry 0: num_spec_steps 6 != 5"]),
    ('[{"acceptance_histogram": [3, 2], "num_accepted_draft_tokens": 3}]',
     ["num_accepted_draft_tokens 3 != 2"]),
    ('[{"acceptance_histogram": [3, 2, 1, 1], "num_spec_tokens": 2}]',
     ["entry 0: histogram of 4 entries, more than num_spec_tokens 2 + 1"]),
    ('[{"acceptance_histogram": [3, 2], "num_spec_tokens": 2, "num_draft_tokens": 11}]',
     ["entry 0: 11 draft tokens exceed 5 rounds x 2 positions"]),
    ('[{"spec_accept_histogram": [4]}]', ["the draft length is unknown", "--draft-length K"]),
    ('[[1, 2],\n {"a": ]', [":2:", "not JSON"]),
    ('{"acceptance_histogram": [1, 2]}\n{"acceptance_histogram": [1,', [":2:",
                                                                          "not a JSON line"]),
])
def test_histogram_refusals(tmp_path: Path, doc: str, frags: list[str]) -> None:
    refused(write(tmp_path, doc, "h.json"), *frags)


# --------------------------------------------------------------------------- files, pooling
def test_read_many_pools_formats() -> None:
    names = ["vllm_metrics.prom", "vllm_specdecode.log", "vllm_requests.json"]
    c = read_many([DATA / n for n in names])
    assert c.rounds == 157 + 157 + 68
    assert c.accepted == (120 + 120 + 24, 84 + 77 + 19, 51 + 44 + 13)
    assert all(str(DATA / n) in c.source for n in names)


def test_files_of_different_draft_lengths_kept_apart(tmp_path: Path) -> None:
    """Pooled per K, never across K: the largest K is used and the other file named."""
    other = write(tmp_path, "[[1, 2, 3]]", "k2.json")
    both = [DATA / "vllm_metrics.prom", other]
    r = read_counts(both)
    assert (r.gamma, r.counts.rounds, r.counts.accepted) == (3, 157, (120, 84, 51))
    assert dict(r.by_length) == {2: 6, 3: 157}
    assert any(f"not used (no rounds at K = 3): {other}" in n for n in r.notes)
    assert "--draft-length to choose" in r.summary()
    assert read_many(both, draft_length=2).accepted == (5, 3)  # h = (1, 2, 3)
    with pytest.raises(MetricsError, match=r"--draft-length 4: the metrics hold no rounds at "
                                           r"K = 4 \(they hold K=2 \(6 rounds\), K=3"):
        read_many(both, draft_length=4)
    with pytest.raises(MetricsError, match="no metrics file given"):
        read_many([])


def test_file_refusals(tmp_path: Path) -> None:
    refused(write(tmp_path, "  \n\n"), "empty file")
    refused(write(tmp_path, "hello world\n"), "unknown format: not JSON")
    refused(DATA / "vllm_metrics.prom", "unknown --format csv", format="csv")
    refused(DATA / "vllm_metrics.prom", "--lines first", lines="first")
    refused(tmp_path / "absent.prom", "cannot read")
    bad = tmp_path / "bin.prom"
    bad.write_bytes(b"vllm:spec_decode_num_drafts_total \xff\n")
    refused(bad, "not UTF-8")
