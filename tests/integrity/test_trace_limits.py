"""A trace is bounded before it is decoded (specsim.trace_limits): rows, kept support entries
and decoded bytes from the Parquet footer, the widest support once the offsets are read; the
settings that record a trace are held to the same limits; the limits are stated in the config
reference (the schema's descriptions)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import SCHEMA

from specsim import trace_limits as limits
from specsim.pairs.realtext import record
from specsim.realtext_settings import Settings
from specsim.traces.format import META_KEY, TraceFileError, read_trace, write_trace
from specsim.traces.trace import Trace, from_full_rows, trace_meta


def _trace(n: int = 12, vocab: int = 9) -> Trace:
    rng = np.random.default_rng(0)
    P = rng.dirichlet(np.ones(vocab), size=n)
    Q = 0.5 * P + 0.5 * rng.dirichlet(np.ones(vocab), size=n)
    return Trace(trace_meta(pair="t", vocab=vocab, documents=2), np.array([0, 5, n]),
                 np.zeros(n, dtype=np.int64), *from_full_rows(P, Q, 3))


def test_a_small_file_declaring_millions_of_rows_is_refused_before_decoding(tmp_path) -> None:
    rows = limits.MAX_POSITIONS + 1
    path = tmp_path / "bomb.parquet"
    table = pa.table({"doc": pa.array(np.zeros(rows, dtype=np.int64))})
    pq.write_table(table.replace_schema_metadata(
        {META_KEY: json.dumps({"vocab": 5, "documents": 1}).encode()}), path,
        compression="zstd")
    assert path.stat().st_size < 200_000  # ~40 MB of rows from a few kilobytes
    with pytest.raises(TraceFileError, match=rf"column 'doc': {rows} positions, over the limit "
                                             rf"of {limits.MAX_POSITIONS}"):
        read_trace(path)


@pytest.mark.parametrize(("limit", "value", "said"), [
    ("MAX_ENTRIES", 20, r"column 'support': \d+ kept support entries, over the limit of 20"),
    ("MAX_DECODED_BYTES", 1000, r"column '\*': \d+ bytes decoded, over the limit of 1000"),
    ("MAX_SUPPORT", 2, r"column 'support': row 0 keeps \d tokens, over the limit of 2"),
])
def test_entries_bytes_and_support_over_their_limits_are_refused(
        tmp_path, monkeypatch: pytest.MonkeyPatch, limit: str, value: int, said: str) -> None:
    path = tmp_path / "t.parquet"
    write_trace(path, _trace())
    read_trace(path)  # within the limits: read
    monkeypatch.setattr(limits, limit, value)
    with pytest.raises(TraceFileError, match=said) as err:
        read_trace(path)
    assert str(path) in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize(("trace", "said"), [
    ({"documents": 1_000_000, "length": 100_000}, "1000000 x 100000 positions"),
    ({"documents": 8192, "length": 1024, "top_k": 16}, "8192 x 1024 positions"),
])
def test_settings_recording_a_trace_over_the_limits_are_refused(trace: dict, said: str) -> None:
    with pytest.raises(ValueError, match=r"trace\.documents x trace\.length") as err:
        Settings.from_dict({"trace": trace}, partial=True)
    assert said in str(err.value) and limits.stated() in str(err.value)


def test_the_limits_are_stated_in_the_config_reference() -> None:
    text = SCHEMA.read_text()
    assert text.count(limits.stated()) == 2  # models.<name>.file and realtext.trace.documents


def test_long_documents_go_fewer_to_a_block() -> None:
    """A block's full rows stay ~BLOCK_POSITIONS positions whatever trace.length (the recorder
    held 64 documents of 100000 characters' rows at once: past 3 GB)."""
    def docs(length: int) -> int:
        return record.block_documents(Settings.from_dict({"trace": {"length": length,
                                                                    "documents": 2}},
                                                         partial=True))
    assert docs(128) == record.BLOCK == 64  # the default: parts of earlier runs still match
    assert docs(1024) == 8 and docs(100_000) == 1
    assert all(docs(n) * n <= max(record.BLOCK_POSITIONS, n) for n in (1, 7, 500, 9000))


def test_the_recorders_declared_memory_grows_with_its_trace() -> None:
    """realtext_record declares record_memory_mb: 1500 MB for the default, more for long
    traces, above the peaks measured at length 100000 (RECORD_* in specsim.realtext_settings:
    1076 MB at 2 documents, 3272 MB at 10, the most the trace limits admit there)."""
    from specsim.realtext_settings import record_memory_mb

    assert record_memory_mb(None) == record_memory_mb({}) == 1500
    assert record_memory_mb({"trace": {"documents": 2, "length": 100_000}}) >= 1076
    assert record_memory_mb({"trace": {"documents": 10, "length": 100_000}}) >= 3272
    with pytest.raises(ValueError, match="trace limits"):  # past them: nothing to declare
        record_memory_mb({"trace": {"documents": 11, "length": 100_000}})


def child_peak_mb(cmd: list[str], err_path) -> float:
    """Run ``cmd`` to success and return its own peak RSS in MB (os.wait4 of that child:
    RUSAGE_CHILDREN is the largest of every child the process ever waited for -- another
    test's, under pytest-xdist)."""
    import os
    import subprocess

    with open(err_path, "wb") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
    assert proc.returncode == 0, Path(err_path).read_text()[-2000:]
    return usage.ru_maxrss * 1024 / 1e6


def test_the_recorders_measured_peak_is_within_its_declaration(tmp_path) -> None:
    """One recording job, its own peak RSS against record_memory_mb."""
    import sys

    from specsim import ngram
    from specsim.realtext_settings import record_memory_mb

    corpus = ngram.build_corpus(max_files=10)
    ngram.save_corpus(corpus, tmp_path / "c.npz")
    ngram.NGramModel.fit(corpus.train, 5).save(tmp_path / "m.npz")
    section = {"model": {"draft_orders": [4]}, "trace": {"documents": 2, "length": 3000}}
    peak_mb = child_peak_mb([sys.executable, "-m", "specsim.cli", "record", "ngram",
                             "--corpus", str(tmp_path / "c.npz"), "--model",
                             str(tmp_path / "m.npz"), "--settings", json.dumps(section),
                             "--out-dir", str(tmp_path / "o")], tmp_path / "record.err")
    assert 0 < peak_mb <= record_memory_mb(section)


def test_a_point_job_on_a_large_trace_stays_within_its_declared_memory(
        tmp_path, tiny_config: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    """A trace read dominates its point job's peak: the job's own peak RSS against
    declared_mb, on a trace of 150000 positions keeping ~40 entries each."""
    import sys

    from specsim.config import load_grid
    from specsim.job import describe
    from specsim.work import declared_mb

    rng = np.random.default_rng(5)
    n, vocab = 150_000, 64
    P = rng.dirichlet(np.full(vocab, 0.3), size=n)
    Q = 0.7 * P + 0.3 * rng.dirichlet(np.full(vocab, 0.3), size=n)
    cols = from_full_rows(P, Q, 24)
    del P, Q
    trace = Trace(trace_meta(pair="big", vocab=vocab, documents=3),
                  np.array([0, 50_000, 100_000, n]), np.zeros(n, dtype=np.int64), *cols)
    write_trace(tmp_path / "big.parquet", trace)
    monkeypatch.chdir(tmp_path)
    tiny_config["models"] = {"big": {"family": "trace", "file": "big.parquet"}}
    tiny_config["studies"] = {"ac": {"analysis": "accept_curve", "models": ["big"],
                                     "gamma": [4]}}
    for key in ("cost", "worked_example"):
        tiny_config.pop(key, None)
    grid = load_grid(tiny_config, SCHEMA)
    (point,) = grid.points
    peak_mb = child_peak_mb([sys.executable, "-m", "specsim.cli", "point", "--job",
                             json.dumps(describe(grid, point)), "--sim", "s.parquet",
                             "--exact", "e.parquet"], tmp_path / "job.err")
    assert declared_mb(grid, point) > 500 and peak_mb <= declared_mb(grid, point)
