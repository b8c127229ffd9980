"""The resumable trace writer both backends' recorders use (:mod:`specsim.pairs.recording`),
on synthetic documents: resuming after a kill, parts of other settings, batches of another
size, the lock and the paths in the way. The backends' own recorders are tested in
test_realtext_record.py and test_llm_pairs.py."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from specsim.errors import InputError
from specsim.pairs import recording
from specsim.seeds import seed_for
from specsim.traces.format import Trace, concat_traces, from_full_rows, read_trace, trace_meta

V = 12
PAIRS = ("a", "b")


def _doc(pair: str, d: int) -> Trace:
    """Document d of ``pair``: drawn from its own generator, whatever batch it is made in."""
    rng = np.random.default_rng(seed_for(1, "doc", pair, d))
    P, Q = rng.dirichlet(np.full(V, 0.3), size=(2, 4))
    return Trace(trace_meta(pair=pair, vocab=V, documents=1), np.array([0, 4]),
                 rng.integers(0, V, 4), *from_full_rows(P, Q, 6))


class Maker:
    """``make`` of :func:`recording.record_traces` for both pairs, noting the batches it was
    asked for; ``crash_at``: the document whose batch is killed."""

    def __init__(self, crash_at: int | None = None) -> None:
        self.batches: list[list[int]] = []
        self.crash_at = crash_at

    def __call__(self, ds: list[int]) -> dict[str, Trace]:
        self.batches.append(ds)
        if self.crash_at in ds:
            raise KeyboardInterrupt
        return {p: concat_traces([_doc(p, d) for d in ds]) for p in PAIRS}


def _record(out: Path, make: Maker, batch: int, key: str = "k", documents: int = 5,
            **kw: object) -> recording.Recorded:
    paths = {p: out / f"{p}.parquet" for p in PAIRS}
    meta = {p: trace_meta(pair=p, vocab=V, documents=documents) for p in PAIRS}
    return recording.record_traces(paths, make, documents, batch, key, meta, flag="--out",
                                   **kw)  # type: ignore[arg-type]


def test_a_killed_recording_resumes_in_batches_of_another_size_and_writes_the_same_file(
        tmp_path: Path) -> None:
    whole = _record(tmp_path / "whole", Maker(), 1)
    assert (whole.recorded, whole.reused) == (5, 0) and whole.traces["a"].n_docs == 5
    out = tmp_path / "t"
    make = Maker(crash_at=3)
    with pytest.raises(KeyboardInterrupt):
        _record(out, make, 2)
    assert make.batches == [[0, 1], [2, 3]] and not (out / "a.parquet").exists()
    assert sorted(p.name for p in (out / "a.parquet.parts").glob("*.parquet")) == [
        "part-00000.parquet"]
    make, lines = Maker(), []
    got = _record(out, make, 3, say=lines.append)
    assert make.batches == [[2, 3, 4]]  # the finished documents were not made again
    assert (got.recorded, got.reused) == (1, 1)
    assert lines == ["record: documents 0-1 reused", "record: documents 2-4 recorded (5/5)"]
    for p in PAIRS:
        assert (out / f"{p}.parquet").read_bytes() == (tmp_path / "whole" / f"{p}.parquet"
                                                       ).read_bytes()
        assert not (out / f"{p}.parquet.parts").exists()
        assert read_trace(out / f"{p}.parquet").meta["documents"] == 5


def test_parts_of_another_key_or_of_one_pair_only_are_recorded_again(tmp_path: Path) -> None:
    out = tmp_path / "t"
    first = _record(out, Maker(), 2, stop_after=2)  # killed after two batches
    assert (first.recorded, first.reused) == (2, 0) and first.traces == {}
    (out / "b.parquet.parts" / "part-00002.parquet").unlink()  # one pair's part lost
    make = Maker()
    again = _record(out, make, 2)
    assert make.batches == [[2, 3], [4]] and (again.recorded, again.reused) == (2, 1)
    _record(tmp_path / "u", Maker(), 2, stop_after=1)
    make = Maker()
    other = _record(tmp_path / "u", make, 2, key="other settings")
    assert make.batches == [[0, 1], [2, 3], [4]] and other.reused == 0


def test_batches_are_runs_of_consecutive_documents() -> None:
    assert recording._batches([0, 1, 2, 4, 5, 9], 2) == [[0, 1], [2], [4, 5], [9]]
    assert recording._batches([], 3) == []


def test_the_key_is_the_digest_of_what_shapes_the_documents() -> None:
    key = recording.record_key({"seed": 1, "settings": {"top_k": 4}})
    assert key == recording.record_key({"settings": {"top_k": 4}, "seed": 1})  # order-free
    assert key != recording.record_key({"seed": 2, "settings": {"top_k": 4}})
    assert len(key) == 64


def test_a_second_recorder_and_a_directory_in_the_way_are_refused(tmp_path: Path) -> None:
    out = tmp_path / "t"
    with recording.exclusive(out / "a.parquet", "--out"), \
            pytest.raises(InputError, match=f"another recorder \\(pid {os.getpid()}\\)"):
        _record(out, Maker(), 2)
    assert not (out / "a.parquet").exists()
    (out / "b.parquet").mkdir(parents=True)
    with pytest.raises(InputError, match=r"b\.parquet is a directory.*another --out"):
        _record(out, Maker(), 2)
    (out / "b.parquet").rmdir()
    assert _record(out, Maker(), 2).recorded == 3
    assert sorted(p.name for p in out.iterdir() if not p.name.endswith(".sha256")) == [
        "a.parquet", "b.parquet"]  # no parts, no lock left behind
