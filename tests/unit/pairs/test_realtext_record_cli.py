"""`specsim record ngram` (= `specsim realtext record`) refuses bad arguments and unusable paths in
one line naming the argument or the path: exit status 2 for usage, 1 for input, no traceback,
nothing half-written; a second recorder of the same traces is refused naming the first."""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from specsim import cli, ngram
from specsim.pairs import recording

TINY = json.dumps({"model": {"target_order": 3, "draft_orders": [2]},
                   "trace": {"documents": 3, "length": 4, "top_k": 4}})


@functools.cache
def _corpus() -> ngram.Corpus:
    return ngram.build_corpus(max_files=10)


@pytest.fixture
def inputs(tmp_path: Path) -> tuple[Path, Path]:
    corpus, model = tmp_path / "corpus.npz", tmp_path / "model.npz"
    ngram.save_corpus(_corpus(), corpus)
    ngram.NGramModel.fit(_corpus().train, 3).save(model)
    return corpus, model


def _record(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    """Exit status and stderr of ``specsim record ngram ARGS`` (argparse's exit included)."""
    try:
        status = cli.main(["record", "ngram", *args])
    except SystemExit as stop:
        status = int(stop.code or 0)
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return status, err


def _one_line(err: str, *words: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and all(w in lines[0] for w in words), err


def _sealed(path: Path, data: bytes) -> Path:
    """``data`` at ``path`` with a matching sidecar (garbage that passes its checksum)."""
    path.write_bytes(data)
    path.with_name(path.name + ".sha256").write_text(
        f"{hashlib.sha256(data).hexdigest()}  {path.name}\n")
    return path


@pytest.mark.parametrize(("flag", "value", "words"), [
    ("--settings", "{bad", ["--settings", "not JSON"]),
    ("--settings", '{"trace": {"documents": 1}}', ["--settings", "trace.documents"]),
    ("--settings", '{"trace": {"top_k": -3}}', ["--settings", "trace.top_k", "-3"]),
    ("--settings", '{"trace": {"top_k": 500}}', ["--settings", "trace.top_k", "96"]),
    ("--settings", '{"trace": {"length": "x"}}', ["--settings", "trace.length", "integer"]),
    ("--settings", '{"bogus": {}}', ["--settings", "bogus"]),
    ("--settings", '{"trace": {"nope": 1}}', ["--settings", "trace.nope"]),
    ("--settings", "[1]", ["--settings", "JSON object"]),
    ("--seed", "-1", ["--seed", "-1"]),
    ("--temperature", "-0.5", ["--temperature"]),
    ("--temperature", "nan", ["--temperature"]),
])
def test_bad_arguments_are_usage_errors(tmp_path: Path, inputs: tuple[Path, Path],
                                        capsys: pytest.CaptureFixture[str], flag: str,
                                        value: str, words: list[str]) -> None:
    corpus, model = inputs
    args = {"--corpus": str(corpus), "--model": str(model), "--out-dir": str(tmp_path / "o"),
            "--settings": TINY, flag: value}
    status, err = _record(capsys, *[x for kv in args.items() for x in kv])
    assert status == 2
    _one_line(err, *words)
    assert not (tmp_path / "o").exists()


def test_missing_inputs_and_a_file_for_a_directory(tmp_path: Path, inputs: tuple[Path, Path],
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    corpus, model = inputs
    (tmp_path / "afile").write_text("x")
    for args, words in [
        (["--corpus", str(tmp_path / "nope.npz"), "--model", str(model)], ["--corpus", "nope"]),
        (["--corpus", str(corpus), "--model", str(tmp_path / "nope.npz")], ["--model", "nope"]),
        (["--corpus", str(corpus), "--model", str(tmp_path)], ["--model", "directory"]),
    ]:
        status, err = _record(capsys, *args, "--out-dir", str(tmp_path / "o"),
                              "--settings", TINY)
        assert status == 2
        _one_line(err, *words)
    for out in (tmp_path / "afile", tmp_path / "afile" / "sub"):
        status, err = _record(capsys, "--corpus", str(corpus), "--model", str(model),
                              "--out-dir", str(out), "--settings", TINY)
        assert status == 2
        _one_line(err, "--out-dir", "afile", "not a directory")


def test_unusable_input_files_are_input_errors(tmp_path: Path, inputs: tuple[Path, Path],
                                               capsys: pytest.CaptureFixture[str]) -> None:
    corpus, model = inputs
    garbage = _sealed(tmp_path / "garbage.npz", bytes(range(256)) * 4)
    objects = tmp_path / "objects.npz"
    buf = tmp_path / "raw.npz"
    np.savez(buf, train=np.array([{"a": 1}], dtype=object))
    _sealed(objects, buf.read_bytes())
    for args, name, words in [
        (["--corpus", str(corpus), "--model", str(garbage)], garbage, ["not a .npz"]),
        (["--corpus", str(garbage), "--model", str(model)], garbage, ["not a .npz"]),
        (["--corpus", str(objects), "--model", str(model)], objects, ["not a .npz"]),
        (["--corpus", str(model), "--model", str(model)], model, ["not a corpus", "train"]),
        (["--corpus", str(corpus), "--model", str(corpus)], corpus, ["not a model"]),
    ]:
        status, err = _record(capsys, *args, "--out-dir", str(tmp_path / "o"),
                              "--settings", TINY)
        assert status == 1
        _one_line(err, str(name), *words)
    assert not list((tmp_path / "o").glob("*.parquet")) if (tmp_path / "o").exists() else True


def test_paths_in_the_way_are_named_and_nothing_is_half_written(
        tmp_path: Path, inputs: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    corpus, model = inputs
    common = ["--corpus", str(corpus), "--model", str(model), "--settings", TINY]
    taken = tmp_path / "taken"
    (taken / "ngram_o2.parquet").mkdir(parents=True)
    status, err = _record(capsys, *common, "--out-dir", str(taken))
    assert status == 1
    _one_line(err, str(taken / "ngram_o2.parquet"), "is a directory")
    blocked = tmp_path / "blocked"
    blocked.mkdir()
    (blocked / "ngram_o2.parquet.parts").write_text("not ours")
    status, err = _record(capsys, *common, "--out-dir", str(blocked))
    assert status == 1
    _one_line(err, "ngram_o2.parquet.parts", "is a file")
    assert sorted(p.name for p in blocked.iterdir()) == ["ngram_o2.parquet.parts"]
    # cleared, the same command records, and leaves neither parts nor its lock behind
    (blocked / "ngram_o2.parquet.parts").unlink()
    status, _ = _record(capsys, *common, "--out-dir", str(blocked))
    assert status == 0
    assert sorted(p.name for p in blocked.iterdir()) == ["ngram_o2.parquet",
                                                         "ngram_o2.parquet.sha256"]


def test_a_second_recorder_of_the_same_pair_is_refused(
        tmp_path: Path, inputs: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    corpus, model = inputs
    out = tmp_path / "traces"
    common = ["--corpus", str(corpus), "--model", str(model), "--settings", TINY,
              "--out-dir", str(out)]
    import os

    # the first recorder, still writing
    with recording.exclusive(out / "ngram_o2.parquet", "--out-dir"):
        status, err = _record(capsys, *common)
        assert status == 1
        _one_line(err, "another recorder", f"pid {os.getpid()}", "ngram_o2.parquet")
        assert not (out / "ngram_o2.parquet").exists()
    status, _ = _record(capsys, *common)  # once it is gone, the same command records
    assert status == 0 and (out / "ngram_o2.parquet").is_file()
    # the realtext step is the same step, with the same refusals
    try:
        cli.main(["realtext", "--settings", '{"trace": {"top_k": 0}}', "record", *common[:4],
                  "--out-dir", str(out)])
    except SystemExit as stop:
        assert stop.code == 2
    _one_line(capsys.readouterr().err, "--settings", "trace.top_k")


def test_a_model_of_lower_order_than_the_settings_is_named(
        tmp_path: Path, inputs: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    corpus, model = inputs  # an order-3 model; the settings ask for order 5
    status, err = _record(capsys, "--corpus", str(corpus), "--model", str(model),
                          "--settings", '{"model": {"target_order": 5, "draft_orders": [2]}}',
                          "--out-dir", str(tmp_path / "o"))
    assert status == 1
    _one_line(err, f"--model {model}", "order-3", "target_order 5")


def test_two_recorders_of_one_pair_at_once(tmp_path: Path, inputs: tuple[Path, Path]) -> None:
    """Two processes: the second, started while the first holds the lock, is refused in one
    line naming the first's pid; the first finishes its traces."""
    import subprocess
    import sys
    import time

    corpus, model = inputs
    out = tmp_path / "traces"
    specsim = str(Path(sys.executable).with_name("specsim"))
    slow = json.dumps({"model": {"target_order": 3, "draft_orders": [2]},
                       "trace": {"documents": 256, "length": 600, "top_k": 4}})
    cmd = [specsim, "record", "ngram", "--corpus", str(corpus), "--model", str(model),
           "--out-dir", str(out)]
    first = subprocess.Popen([*cmd, "--settings", slow], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    lock = out / ".ngram_o2.parquet.lock.tmp"
    for _ in range(400):
        if lock.exists() and lock.read_text().strip():
            break
        time.sleep(0.05)
    second = subprocess.run([*cmd, "--settings", slow], capture_output=True, text=True,
                            check=False)
    still_running = first.poll() is None
    assert first.wait(timeout=600) == 0 and (out / "ngram_o2.parquet").is_file()
    assert still_running  # the refusal below met a live first recorder
    assert second.returncode == 1
    _one_line(second.stderr, "another recorder", f"pid {first.pid}")
    assert not lock.exists()
