"""Traces of the n-gram pairs (specsim.pairs.realtext.record), predicted vs measured tokens per call
(specsim.pairs.realtext.pairs), `specsim record`, and trace files refused naming file and column."""

from __future__ import annotations

import json
import re
from pathlib import Path

import mc
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from ngram_corpus import corpus, model

from specsim import cli, ngram
from specsim.checks import pair_checks
from specsim.pairs.measure import measure
from specsim.pairs.realtext import pairs, record
from specsim.pairs.realtext.backend import NGramBackend
from specsim.realtext_settings import TRACE_PATH, Settings, trace_pairs
from specsim.traces.format import META_KEY, TraceFileError, read_trace
from specsim.traces.positional import paired_difference

TINY = {"model": {"draft_orders": [2, 4]},
        "trace": {"documents": 6, "length": 20, "top_k": 8},
        "speculative": {"gamma": [1, 3]}, "costs": {"gamma": [1]},
        "pair_accept": {"replicas": 2},
        "pair_optimal": {"gamma_max": 6, "c": [0.05, 0.5]}}




@pytest.fixture
def model_file(tmp_path: Path) -> Path:
    path = tmp_path / "model.npz"
    model().save(path)
    return path


def settings(**trace: int) -> Settings:
    return Settings.from_dict({**TINY, "trace": {**TINY["trace"], **trace}})


def quiet(_line: str) -> None:
    pass


def run(s: Settings, model_file: Path, out: Path, **kw: object) -> record.Recorded:
    return record.record_ngram(model(), model_file, corpus(), s, 7, out, say=quiet, **kw)


def test_a_step_checks_across_sections_only_when_passed_both() -> None:
    """A step's job gets only its sections: speculative.gamma [1, 2] is fine for the
    speculative step, and refused where costs.gamma (default [1, 2, 4, 8]) is also given."""
    step = {"model": {}, "speculative": {"gamma": [1, 2]}}
    assert Settings.from_dict(step, partial=True).gamma == (1, 2)
    with pytest.raises(ValueError, match=r"costs\.gamma"):
        Settings.from_dict(step)
    with pytest.raises(ValueError, match=r"costs\.gamma"):
        Settings.from_dict({**step, "costs": {}}, partial=True)


# --- recording --------------------------------------------------------------------------------
def test_names_and_paths() -> None:
    assert trace_pairs(Settings.from_dict(TINY)) == ["ngram_o2", "ngram_o4"]
    assert trace_pairs(TINY) == ["ngram_o2", "ngram_o4"]  # the config section works too
    assert TRACE_PATH.format(pair="ngram_o2") == "results/traces/ngram_o2.parquet"


def test_recording_is_deterministic_and_right(tmp_path: Path, model_file: Path) -> None:
    s = settings()
    a = run(s, model_file, tmp_path / "a")
    b = run(s, model_file, tmp_path / "b")
    assert a.recorded == b.recorded == 1 and a.reused == 0
    for pair in trace_pairs(s):
        assert (tmp_path / "a" / f"{pair}.parquet").read_bytes() == \
            (tmp_path / "b" / f"{pair}.parquet").read_bytes()
        assert not (tmp_path / "a" / f"{pair}.parquet.parts").exists()
    # the trace is what it says: α at every position is Σ min(p, q) of the full rows in the
    # context the target's own text built, and the text is the recorded tokens
    for k, pair in zip(s.draft_orders, trace_pairs(s), strict=True):
        t = read_trace(a.paths[pair])
        assert t.n_docs == 6 and np.all(t.doc_lengths == 20) and t.meta["pair"] == pair
        assert t.meta["temperature"] == 1.0 and t.meta["top_k"] == 8
        assert t.meta["text"] == "target" and t.meta["prompt_seed"] == 7
        ctx = np.repeat(np.asarray(t.meta["prompt_contexts"]), 20)
        tokens = t.token.reshape(6, 20)
        c = np.asarray(t.meta["prompt_contexts"])
        ctxs = np.empty((6, 20), dtype=np.int64)
        for j in range(20):
            ctxs[:, j] = c
            c = ngram.append(c, tokens[:, j], 4)
        ctx = ctxs.reshape(-1)
        np.testing.assert_allclose(t.alpha, ngram.overlap(model(), ctx, 5, k), atol=1e-12)
        assert [len(p) for p in t.meta["prompts"]] == [4] * 6


def test_documents_do_not_depend_on_blocks(tmp_path: Path, model_file: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    s = settings()
    run(s, model_file, tmp_path / "one")
    monkeypatch.setattr(record, "BLOCK", 4)
    run(s, model_file, tmp_path / "two")
    for pair in trace_pairs(s):
        one, two = read_trace(tmp_path / "one" / f"{pair}.parquet"), \
            read_trace(tmp_path / "two" / f"{pair}.parquet")
        assert np.array_equal(one.token, two.token) and np.array_equal(one.alpha, two.alpha)


def test_a_killed_recording_resumes_from_its_parts(tmp_path: Path, model_file: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(record, "BLOCK", 2)  # 6 documents: 3 blocks
    s = settings()
    whole = run(s, model_file, tmp_path / "whole")
    assert (whole.recorded, whole.reused) == (3, 0)
    out = tmp_path / "killed"
    first = run(s, model_file, out, stop_after=1)  # what a job killed after one block leaves
    assert (first.recorded, first.reused) == (1, 0)
    assert not any(p.exists() for p in first.paths.values())
    parts = sorted((out / "ngram_o2.parquet.parts").iterdir())
    assert [p.name for p in parts] == ["part-00000.parquet", "part-00000.parquet.sha256"]
    stamp = parts[0].stat().st_mtime_ns
    # a half-written part (a temporary file) is ignored; a part of other settings is redone
    (out / "ngram_o2.parquet.parts" / ".part-00002.parquet.x.tmp").write_bytes(b"junk")
    resumed = run(s, model_file, out)
    assert (resumed.recorded, resumed.reused) == (2, 1)
    for pair in trace_pairs(s):
        assert (out / f"{pair}.parquet").read_bytes() == \
            (tmp_path / "whole" / f"{pair}.parquet").read_bytes()
        assert not (out / f"{pair}.parquet.parts").exists()
    # parts recorded with another seed are not reused
    run(s, model_file, tmp_path / "other", stop_after=1)
    again = record.record_ngram(model(), model_file, corpus(), s, 8, tmp_path / "other",
                                say=quiet)
    assert (again.recorded, again.reused) == (3, 0)
    assert stamp > 0


# --- predicted vs measured ---------------------------------------------------------------------
@pytest.fixture
def traces(tmp_path: Path, model_file: Path) -> dict[str, object]:
    s = Settings.from_dict({**TINY, "trace": {"documents": 24, "length": 24, "top_k": 8}})
    done = run(s, model_file, tmp_path / "traces")
    return {pair: read_trace(path) for pair, path in done.paths.items()}


def test_predicted_vs_measured_on_a_tiny_setting(traces: dict) -> None:
    s = Settings.from_dict({**TINY, "trace": {"documents": 24, "length": 24, "top_k": 8}})
    df = pairs.pair_accept_table(model(), traces, s, 3)
    assert list(df["pair"]) == ["ngram_o2", "ngram_o2", "ngram_o4", "ngram_o4"]
    for side in ("predicted", "measured"):
        tok = df[f"tokens_{side}"]
        assert np.all((tok >= 1) & (tok <= df["gamma"] + 1))
        assert np.all((df[f"tokens_{side}_ci_low"] <= tok) & (tok <= df[f"tokens_{side}_ci_high"]))
    assert np.all(df["difference_ci_low"] <= df["difference_ci_high"])
    np.testing.assert_allclose(df["difference"], df["tokens_predicted"] - df["tokens_measured"])
    # the positional model is close on real text: within mc.bound bootstrap standard errors
    # (mc.FAIL_PROB over the rows: ~5.3 SE; a difference of 7.7 SE fails 99% of the time)
    mc.assert_close(df["difference"], df["difference_se"], 0.0, assertions=len(df))
    assert df["covered"].dtype == bool
    # a better draft is accepted more and gives more tokens
    o2, o4 = df[df["pair"] == "ngram_o2"], df[df["pair"] == "ngram_o4"]
    assert np.all(o4["tokens_measured"].to_numpy() > o2["tokens_measured"].to_numpy())
    assert np.all(o4["alpha_mean"].to_numpy() > o2["alpha_mean"].to_numpy())
    # and the checks read it: one check per pair
    checks = pair_checks(df)
    assert [c.check for c in checks] == ["pair_predicted_vs_measured[ngram_o2]",
                                         "pair_predicted_vs_measured[ngram_o4]"]


def test_one_character_documents_take_one_call_each() -> None:
    """length 1: every chain's one round emits the document: 1 token per call, exactly."""
    pair = pairs.NGramPair(model(), 5, 3)
    start = np.arange(5, dtype=np.int64) * 1000
    m = measure(NGramBackend(pair), start, 1, 3, 4, np.random.SeedSequence(1))
    assert np.array_equal(m["calls"], np.full(5, 3.0))
    assert np.array_equal(m["tested"], np.full(5, 3.0))  # one draft inside each document


def test_paired_difference_of_identical_ratios_is_zero() -> None:
    rng = np.random.default_rng(0)
    num, den = rng.random(30) + 1, rng.random(30) + 1
    lo, hi, se = paired_difference(num, den, num, den, np.random.SeedSequence(2))
    assert lo == hi == se == 0.0


def test_checks_fail_a_pair_off_beyond_its_error() -> None:
    base = {"pair": "p", "gamma": 1, "tokens_predicted": 2.0, "tokens_measured": 2.0,
            "difference_ci_low": -0.01, "difference_ci_high": 0.01, "covered": True}
    good = pd.DataFrame([base | {"difference": 0.001, "difference_se": 0.005}])
    bad = pd.DataFrame([base | {"difference": 0.1, "difference_se": 0.005}])
    assert pair_checks(good)[0].passed and not pair_checks(bad)[0].passed


def test_optimal_gamma_and_break_even(traces: dict) -> None:
    s = Settings.from_dict(TINY)
    df = pairs.pair_optimal_table(traces, s)
    assert len(df) == 4
    for name, trace in traces.items():
        tokens = pairs.exact_tokens(trace, 6)
        g = np.arange(1, 7)
        for _, r in df[df["pair"] == name].iterrows():
            assert r["gamma_opt"] == g[np.argmax(tokens / (1 + g * r["c"]))]
            assert r["c_break_even"] == pytest.approx(((tokens - 1) / g).max())
    costs = pd.DataFrame(
        [{"batch": 1, "measure": "target_call", "positions": k, "ratio": 1 + 0.1 * (k - 1),
          "reliable": k != 3} for k in range(1, 5)]
        + [{"batch": 1, "measure": "draft_step", "draft_order": k, "positions": 1, "c": c,
            "reliable": True} for k, c in ((2, 0.1), (4, 0.3))])
    pc = pairs.pair_costs_table(traces, s, costs)
    assert list(pc["gamma"]) == [1, 2, 3] * 2  # T(γ+1) is timed up to 4 positions
    o4 = pc[pc["pair"] == "ngram_o4"]
    np.testing.assert_allclose(o4["speedup_cost_model"],
                               o4["tokens_exact"] / (o4["gamma"] * 0.3 + o4["verify_ratio"]))
    assert o4["optimal_thm38"].sum() == 1
    # γ = 2 verifies 3 positions, whose timing was unreliable: the row says so
    assert list(o4["costs_reliable"]) == [True, False, True]


# --- bad trace files ----------------------------------------------------------------------------
def _good(tmp_path: Path, model_file: Path) -> Path:
    done = run(settings(documents=3, length=5), model_file, tmp_path / "good")
    return done.paths["ngram_o2"]


def _rewrite(src: Path, dst: Path, table: pa.Table | None = None,
             meta: dict | None = None) -> Path:
    """A copy of ``src`` as a file written elsewhere would be (no specsim digest)."""
    t = pq.read_table(src)
    m = json.loads(t.schema.metadata[META_KEY])
    t = table if table is not None else t
    t = t.replace_schema_metadata({META_KEY: json.dumps(meta or m).encode()})
    pq.write_table(t, dst)
    return dst


def _set(t: pa.Table, name: str, values: pa.Array) -> pa.Table:
    return t.set_column(t.column_names.index(name), name, values)


def bad_files(src: Path, d: Path) -> dict[str, tuple[Path, str]]:
    """name -> (bad file, the column or key the refusal must name)."""
    t = pq.read_table(src)
    meta = json.loads(t.schema.metadata[META_KEY])
    p_tail = t.column("p_tail").to_numpy().copy()
    p_tail[4] += 0.01
    alpha = t.column("alpha").to_numpy().copy()
    alpha[2] = 1.5
    low = t.column("alpha").to_numpy().copy()
    low[3] = 0.0
    truncated = d / "truncated.parquet"
    data = src.read_bytes()
    truncated.write_bytes(data[: len(data) // 2])
    return {
        "truncated": (truncated, "Parquet"),
        "missing column": (_rewrite(src, d / "missing.parquet", t.drop_columns(["q_tail"])),
                           "q_tail"),
        "not a distribution (tail)": (_rewrite(src, d / "tail.parquet",
                                               _set(t, "p_tail", pa.array(p_tail))), "p"),
        "alpha above 1": (_rewrite(src, d / "alpha.parquet", _set(t, "alpha", pa.array(alpha))),
                          "alpha"),
        "alpha below the kept overlap": (_rewrite(src, d / "alpha_low.parquet",
                                                  _set(t, "alpha", pa.array(low))), "alpha"),
        "a document with no positions": (_rewrite(src, d / "docs.parquet",
                                                  meta=meta | {"documents": 4}), "doc"),
        "documents out of order": (_rewrite(src, d / "order.parquet", _set(
            t, "doc", pa.array(t.column("doc").to_numpy()[::-1].copy()))), "doc"),
        "wrong type": (_rewrite(src, d / "type.parquet", _set(
            t, "doc", pa.array(t.column("doc").to_numpy().astype(str)))), "doc"),
        "positions wrong": (_rewrite(src, d / "pos.parquet", _set(
            t, "pos", pa.array(t.column("pos").to_numpy() + 1))), "pos"),
        "no metadata": (_rewrite(src, d / "meta.parquet", meta={"pair": "x"}), "vocab"),
    }


def test_bad_trace_files_are_refused_naming_file_and_column(tmp_path: Path,
                                                            model_file: Path) -> None:
    good = _good(tmp_path, model_file)
    read_trace(_rewrite(good, tmp_path / "elsewhere.parquet"))  # no digest: still fine
    for what, (path, column) in bad_files(good, tmp_path).items():
        with pytest.raises(TraceFileError) as err:
            read_trace(path)
        msg = str(err.value)
        assert str(path) in msg and column in msg, (what, msg)
    # a file specsim wrote, edited in place: its checksum refuses it
    t = pq.read_table(good)
    edited = tmp_path / "edited.parquet"
    pq.write_table(_set(t, "token", pa.array(t.column("token").to_numpy() * 0)), edited)
    with pytest.raises(TraceFileError, match=re.escape(str(edited))):
        read_trace(edited)


def test_cli_record_check(tmp_path: Path, model_file: Path,
                          capsys: pytest.CaptureFixture[str]) -> None:
    good = _good(tmp_path, model_file)
    assert cli.main(["record", "check", str(good)]) == 0
    out = capsys.readouterr().out
    assert f"{good}: ok" in out and "3 documents, 15 positions" in out
    bad, column = bad_files(good, tmp_path)["missing column"]
    assert cli.main(["record", "check", str(good), str(bad)]) == 1
    err = capsys.readouterr().err
    assert str(bad) in err and column in err and len(err.strip().splitlines()) == 1


def test_cli_record_ngram_is_the_realtext_step(tmp_path: Path, model_file: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    c = tmp_path / "corpus.npz"
    ngram.save_corpus(corpus(), c)
    tiny = json.dumps({**TINY, "trace": {"documents": 3, "length": 4, "top_k": 4}})
    common = ["--corpus", str(c), "--model", str(model_file)]
    assert cli.main(["record", "ngram", "--settings", tiny, "--seed", "5", *common,
                     "--out-dir", str(tmp_path / "a")]) == 0
    assert "ngram_o4.parquet: ok" in capsys.readouterr().out
    assert cli.main(["realtext", "--settings", tiny, "--seed", "5", "record", *common,
                     "--out-dir", str(tmp_path / "b")]) == 0
    for pair in ("ngram_o2", "ngram_o4"):
        assert (tmp_path / "a" / f"{pair}.parquet").read_bytes() == \
            (tmp_path / "b" / f"{pair}.parquet").read_bytes()
    traces = [str(tmp_path / "a" / f"{p}.parquet") for p in ("ngram_o2", "ngram_o4")]
    results = ["--results-dir", str(tmp_path / "results")]
    assert cli.main(["realtext", "--settings", tiny, *results, "pair_optimal", "--traces",
                     *traces]) == 0
    assert len(pd.read_csv(tmp_path / "results" / "tables" / "pair_optimal.csv")) == 4
    with pytest.raises(ValueError, match="expected"):  # the pairs in the settings' order
        cli.main(["realtext", "--settings", tiny, *results, "pair_optimal", "--traces",
                  *traces[::-1]])


def test_readme_logprobs_example_writes_a_valid_trace(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The docs' "Your model pair: traces" example (docs/howto/pair.md: vLLM-style logprobs ->
    trace) runs and its file passes every check."""
    page = (Path(__file__).resolve().parents[3] / "docs/howto/pair.md").read_text()
    section = page[page.index("## Your model pair: traces"):]
    code = re.findall(r"```python\n(.*?)```", section, re.S)[0]
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "docs/howto/pair.md", "exec"), {})
    t = read_trace(tmp_path / "mine.parquet")
    assert t.n_docs == 2 and t.n_positions == 3 and t.meta["pair"] == "mine"
