"""Tests for specsim.figures: every figure renders to a valid PDF + PNG from small tables; every
output is declared once, with one builder (specsim.outputs)."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import matplotlib.image as mpimg
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from matplotlib.legend import Legend
from matplotlib.lines import Line2D
from matplotlib.text import Text

from specsim import exact, intensity
from specsim.figures import README_FIGURES, copy_readme_figures, make_figure
from specsim.figures.roofline import roofline_spread
from specsim.figures.style import MIN_FONTSIZE, RULE_ORDER, STYLE
from specsim.grid import Grid
from specsim.io import write_checksum
from specsim.outputs import FIGURE_NEEDS, FIGURES, available_figures, stage_figures, table
from specsim.verify import CLASSIC_RULES, RULES

REPO = Path(__file__).resolve().parents[3]
MARKOV = {"family": "markov", "vocab": 6, "target": {"seed": 1, "sharpness": 2.5}}
CONFIG = {
    "latency": [[0.010, 0.001], [0.030, 0.002]],
    "models": {
        "calibrated": {**MARKOV, "draft": {"kind": "calibrated", "other": "far"}},
        "seed_med": {**MARKOV, "draft": {"kind": "blend", "weight": 0.55,
                                         "other": {"seed": 2, "sharpness": 2.5}}},
        "seed_poor": {**MARKOV, "draft": {"kind": "blend", "weight": 0.2,
                                          "other": {"seed": 3, "sharpness": 2.5}}},
        "seed_temper": {**MARKOV, "draft": {"kind": "temper", "temperature": 1.3}},
        "stub": {"family": "iid", "vocab": 20, "sigma": 1.0, "noise": 0.3, "share": "round",
                 "seed": 7, "draft": {"kind": "noise"}},
    },
    "studies": {
        "equivalence": {"analysis": "equivalence", "models": ["calibrated", "stub"]},
        "accept_curve": {"analysis": "accept_curve", "models": ["calibrated", "seed_med"]},
        "quality": {"analysis": "temperature", "models": ["seed_med"], "draft": [0.2, 0.55, 1]},
        "mismatch": {"analysis": "temperature", "models": ["seed_temper"], "draft": [0.5, 1, 2]},
        "sampling": {"analysis": "temperature", "models": ["calibrated"],
                     "temperature": [0.0, 1.0]},
        "optimal_k": {"analysis": "optimal_k", "models": ["seed_med", "calibrated"]},
        "break_even": {"analysis": "break_even", "models": ["seed_poor", "calibrated"],
                       "expect_slower": [{"model": "seed_poor", "c": 0.25,
                                          "label": "quarter-size poor draft"}]},
        "schemes": {"analysis": "schemes", "models": ["seed_med"]},
    },
}


def _grid(config: dict) -> Grid:
    studies = {name: {"analysis": s["analysis"], "points": [], "c": [0.1]}
               for name, s in config["studies"].items()}
    return Grid(config=config, points=(), studies=studies)


def _ci(df: pd.DataFrame, col: str, half: float) -> pd.DataFrame:
    return df.assign(**{f"{col}_ci_low": df[col] - half, f"{col}_ci_high": df[col] + half})


def _long_run(rows: list[dict]) -> pd.DataFrame:
    """Tokens columns of a long-run table from model/alpha/gamma rows (Eq. 1 plus jitter)."""
    df = pd.DataFrame(rows)
    a = df["alpha"].fillna(df["alpha_exact"]).to_numpy(float)
    df["tokens_closed_form"] = exact.expected_tokens(a, df["gamma"].to_numpy(float))
    df["tokens_exact"] = df["tokens_closed_form"] - np.where(df["alpha"].isna(), 1e-4, 0.0)
    df["tokens_exact_se"] = 0.0
    df["tokens_per_round"] = df["tokens_exact"] + 1e-3
    df["tokens_closed_form_mc"] = df["tokens_closed_form"] + 5e-4
    df = df.rename(columns={"tokens_per_round": "tokens"})
    df = _ci(df, "tokens", 2e-3).rename(columns={"tokens": "tokens_per_round"})
    return df


def write_tables(d: Path) -> None:
    """Small tables with the columns the figures read (values from exact theory)."""
    d.mkdir(parents=True, exist_ok=True)
    nan = float("nan")
    eq = []
    for model, alpha, floor in (("calibrated", 0.7, 2e-3), ("stub", nan, 7e-3)):
        for rule, tv in (("correct", 1e-17), ("greedy", 0.2), ("no_resample", 0.03),
                         ("continue", 0.01)):
            eq.append({"model": model, "alpha": alpha, "rule": rule, "trials_total": 10_000,
                       "tv_exact": tv, "tv_mc": max(tv, floor), "tv_floor": floor,
                       "verdict": "lossless" if rule == "correct" else "biased"})
    pd.DataFrame(eq).to_csv(d / "equivalence.csv", index=False)

    rows = [{"study": "accept_curve", "model": "calibrated", "alpha": a, "gamma": g,
             "alpha_exact": a} for a in (0.5, 0.9) for g in (1, 2, 4)]
    rows += [{"study": "accept_curve", "model": "seed_med", "alpha": nan, "gamma": g,
              "alpha_exact": 0.706} for g in (1, 2, 4)]
    _long_run(rows).to_csv(d / "accept_curve.csv", index=False)

    rows = [{"study": "quality", "model": "seed_med", "draft": "blend", "knob": k,
             "alpha": nan, "gamma": 4, "temperature": 1.0, "c": 0.1,
             "alpha_exact": 0.3 + 0.6 * k} for k in (0.2, 0.55, 1.0)]
    rows += [{"study": "mismatch", "model": "seed_temper", "draft": "temper", "knob": k,
              "alpha": nan, "gamma": 4, "temperature": 1.0, "c": 0.1,
              "alpha_exact": 1 - 0.1 * abs(np.log(k))} for k in (0.5, 1.0, 2.0)]
    rows += [{"study": "sampling", "model": "calibrated", "draft": "calibrated", "knob": nan,
              "alpha": 0.7, "gamma": 4, "temperature": t, "c": 0.1, "alpha_exact": 0.7}
             for t in (0.0, 1.0)]
    t = _long_run(rows)
    t["accept_rate"] = t["alpha_exact"]
    t["alpha_bar"] = np.where(t["temperature"] > 0, t["alpha_exact"], np.nan)
    t.to_csv(d / "temperature.csv", index=False)

    ok, curves = [], []
    for model, knob, alpha, a_ex in (("seed_med", 0.55, nan, 0.706),
                                     ("calibrated", nan, 0.8, 0.8)):
        for c in (0.05, 0.2):
            g_opt, s_opt = exact.optimal_gamma(a_ex, c, 8)
            ok.append({"study": "optimal_k", "model": model, "knob": knob, "alpha": alpha,
                       "temperature": 1.0, "rule": "correct", "c": c, "gammas": "1;2;4;8",
                       "gamma_opt": g_opt, "speedup_opt": s_opt,
                       "speedup_opt_ci_low": s_opt - 0.01, "speedup_opt_ci_high": s_opt + 0.01,
                       "alpha_exact": a_ex, "gamma_opt_closed_form": g_opt})
        curves += [{"study": "optimal_k", "model": model, "knob": knob, "alpha": alpha,
                    "gamma": g, "temperature": 1.0, "rule": "correct",
                    "tokens_stationary": exact.expected_tokens(a_ex, g)} for g in range(1, 9)]
    pd.DataFrame(ok).to_csv(d / "optimal_k.csv", index=False)
    pd.DataFrame(curves).to_csv(d / "optimal_k_exact.csv", index=False)

    be = _long_run([{"model": m, "alpha": a, "gamma": 4, "alpha_exact": ae}
                    for m, a, ae in (("seed_poor", nan, 0.36), ("calibrated", 0.8, 0.8))])
    be["c_star"] = be["c_star_exact"] = (be["tokens_exact"] - 1) / 4
    _ci(be, "c_star", 1e-3).to_csv(d / "break_even.csv", index=False)
    sv = be[["model", "alpha", "gamma", "tokens_exact"]].merge(
        pd.DataFrame({"c": [0.01, 0.25, 1.0]}), how="cross")
    sv["speedup"] = sv["speedup_exact"] = sv["tokens_exact"] / (1 + sv["gamma"] * sv["c"])
    sv = _ci(sv, "speedup", 1e-3)
    sv["slower"] = sv["speedup_ci_high"] < 1
    sv.to_csv(d / "speedup_vs_c.csv", index=False)

    write_scheme_tables(d)
    intensity.intensity_table(tokens=(1, 4, 16, 64, 256, 512)).to_csv(d / "intensity.csv",
                                                                      index=False)
    intensity.ridge_table().to_csv(d / "roofline.csv", index=False)
    for csv in d.glob("*.csv"):  # readers verify each table against its checksum sidecar
        write_checksum(csv, csv.read_bytes())


def write_scheme_tables(d: Path) -> None:
    """schemes.csv and schemes_policies.csv with the columns the figures read, from the exact
    laws of the seed_med pair (simulated columns: exact plus a small offset)."""
    from specsim.exact import first_two_law, stationary_rates
    from specsim.families import family_of, markov_pair
    from specsim.schemes import Scheme
    from specsim.tables.schemes import KNOB_COLUMNS

    P, Q = markov_pair(family_of("markov").build("seed_med", CONFIG["models"]["seed_med"]), 1.0,
                       None)
    target = exact.target_joint(P, 0, 2)
    schemes = [Scheme.build("correct"), Scheme.build("block"),
               Scheme.build("multi_draft", {"drafts": 2}), Scheme.build("spectr", {"drafts": 2}),
               Scheme.build("multi_draft_optimal", {"drafts": 2})]
    schemes += [Scheme.build("lenient", {"lenience": v}) for v in (1.0, 0.7, 0.4)]
    schemes += [Scheme.build("typical", {"epsilon": v}) for v in (0.03, 0.09)]
    rows = []
    for scheme in schemes:
        for g in (1, 2, 3):
            law = scheme.law(P, Q, g)
            rates = stationary_rates(law)
            tokens, drafted = rates.tokens_per_round, rates.drafted_per_round
            tv = exact.tv(first_two_law(law, 0), target)
            study = "schemes_multidraft" if RULES[scheme.rule].multi_draft and scheme.rule != \
                "multi_draft" else "schemes"  # the k-draft schemes beside their bound
            row = {"study": study, "model": "seed_med", "alpha": float("nan"), "gamma": g,
                   "temperature": 1.0, "rule": scheme.rule, "policy": "fixed",
                   "lossless": scheme.lossless, "tv_exact": tv, "tv_mc": max(tv, 3e-3),
                   "tv_floor": 3e-3, "verdict": "biased" if tv > 3e-3 else "lossless",
                   "tokens_exact": tokens, "tokens_stationary": tokens,
                   "tokens_per_call": tokens + 1e-3, "drafted_exact": drafted}
            row |= {k: dict(scheme.rule_knobs).get(k, float("nan")) for k in KNOB_COLUMNS}
            s = tokens / (1 + 0.1 * drafted)
            row |= {"speedup_exact_c0.1": s, "speedup_c0.1": s + 1e-3}
            rows.append(row)
    df = _ci(pd.DataFrame(rows), "tokens_per_call", 2e-3)
    df = df.rename(columns={"tokens_per_call_ci_low": "tokens_ci_low",
                            "tokens_per_call_ci_high": "tokens_ci_high"})
    df = _ci(df, "speedup_c0.1", 2e-3).rename(columns={
        "speedup_c0.1_ci_low": "speedup_ci_low_c0.1", "speedup_c0.1_ci_high":
        "speedup_ci_high_c0.1"})
    df.to_csv(d / "schemes.csv", index=False)
    pol = []
    for c in (0.05, 0.2):
        base = {"study": "policies", "model": "seed_med", "alpha": float("nan"),
                "temperature": 1.0, "c": c}
        pol.append(base | {"policy": "best_fixed", "gamma": 4, "scheme": "best fixed (γ=4)",
                           "speedup_exact": 2.0 - c})
        for policy, gamma, thr, label in (("fixed", 20, float("nan"), "fixed (γ=20)"),
                                          ("confidence", 20, 0.4, "confidence 0.4 (γ=20)"),
                                          ("heuristic", 5, float("nan"), "heuristic (γ=5)")):
            s = 1.5 - c + (0.1 if policy == "heuristic" else 0.0)
            pol.append(base | {"policy": policy, "gamma": gamma, "threshold": thr,
                               "scheme": label, "speedup_exact": s, "speedup": s + 1e-3,
                               "speedup_ci_low": s - 1e-2, "speedup_ci_high": s + 1e-2,
                               "vs_best_fixed": s / (2.0 - c)})
    pd.DataFrame(pol).to_csv(d / "schemes_policies.csv", index=False)
    cost = []
    for model in ("seed_med", "ngram_o4"):
        for device in ("A100-80GB", "H100-SXM"):
            for b in (1, 4, 16, 64, 256):
                g = max(1, 6 - int(np.log2(b)) // 2)
                cost.append({"model": model, "target": "Llama-2-70B",
                             "draft_model": "Llama-2-7B", "device": device, "batch": b,
                             "n_ctx": 512, "c": 0.1, "gamma_best": g, "gamma_constant": 6,
                             "speedup_best": 1 + 0.3 * g, "kdraft_sequential_speedup": 1 + 0.2 * g,
                             "kdraft_batched_speedup": 1 + 0.25 * g,
                             # Sequoia's best budget: a table model's only (NaN: none drawn)
                             "sequoia_budget": 4 * g if model == "seed_med" else np.nan,
                             "sequoia_speedup": 1 + 0.28 * g if model == "seed_med" else np.nan})
    pd.DataFrame(cost).to_csv(d / "cost_batch.csv", index=False)


def write_llm_tables(d: Path) -> None:
    """The three CSVs specsim.pairs.llm's figures read, with the real run's draft names."""
    d.mkdir(parents=True, exist_ok=True)
    k = np.array([1, 2, 3, 4, 5, 8, 16])
    pd.DataFrame({"positions": k, "macs_per_byte": 0.25 * k, "ridge_macs_per_byte": 6.0,
                  "measured_ratio": 1 + 0.1 * k, "roofline_ratio": np.maximum(1, k / 24)}
                 ).to_csv(d / "intensity.csv", index=False)
    rows = [{"draft": "none (target only)", "gamma": 0, "c": np.nan, "accept_rate": np.nan,
             "speedup_measured": 1.0, "speedup_thm38": np.nan, "speedup_cost_model": np.nan}]
    for i, (name, c, a) in enumerate((("ngram-3", 0.02, 0.35), ("int8", 0.6, 0.9),
                                      ("skip-20", 0.85, 0.7))):
        rows += [{"draft": name, "gamma": g, "c": c, "accept_rate": a,
                  "speedup_measured": 1 + 0.1 * g - 0.05 * i, "speedup_thm38": 1 + 0.12 * g,
                  "speedup_cost_model": 1 + 0.11 * g} for g in (1, 2, 4)]
    spec = pd.DataFrame(rows)
    spec["speedup_measured_q25"] = spec["speedup_measured"] - 0.03  # quartiles over prompts
    spec["speedup_measured_q75"] = spec["speedup_measured"] + 0.04
    spec["reliable"] = spec["gamma"] != 4  # one hollow marker per draft
    spec.to_csv(d / "speculative.csv", index=False)
    names = ["target", "ngram-1", "ngram-2", "ngram-3", "int8 (batched pass)", "int8",
             "skip-10", "skip-20"]
    held = np.array([1.0, 0.2, 0.3, 0.35, 0.5, 0.9, 0.4, 0.7])
    loops = [("specsim", "target alone", 0, 0.0, 1.0, 6.5), ("transformers", "target alone", 0,
                                                               0.0, 1.0, 6.9)]
    loops += [("specsim", "int8", g, g, 1 + 0.5 * g, 6.0 + 0.3 * g) for g in (1, 2, 4)]
    loops += [("transformers-fixed", "int8", g, 0.95 * g, 1 + 0.4 * g, 6.2) for g in (1, 2, 4)]
    loops += [("transformers-default", "int8", 20, 1.3, 1.8, 6.5)]
    a = pd.DataFrame(loops, columns=["loop", "draft", "gamma", "gamma_mean", "tokens_per_call",
                                     "tokens_per_second"])
    a["tokens_eq1"] = a["tokens_per_call"] - 0.02
    a["speedup_measured"] = a["tokens_per_second"] / 6.5
    a["speedup_thm38"] = a["speedup_measured"] + 0.05
    a["speedup_cost_model"] = a["speedup_measured"] - 0.1
    a["speedup_measured_q25"] = a["speedup_measured"] - 0.03
    a["speedup_measured_q75"] = a["speedup_measured"] + 0.04
    a["reliable"] = a["gamma"] != 2
    a.to_csv(d / "assisted.csv", index=False)
    pd.DataFrame({"draft": names, "alpha_heldout": held, "alpha_median": held,
                  "alpha_p10": held * 0.5, "alpha_p90": np.minimum(1, held * 1.3)}
                 ).to_csv(d / "alpha.csv", index=False)
    for csv in d.glob("*.csv"):  # readers verify each table against its checksum sidecar
        write_checksum(csv, csv.read_bytes())


def _assert_pdf_png(pdf: Path) -> None:
    data = pdf.read_bytes()
    assert data.startswith(b"%PDF-") and b"%%EOF" in data[-64:]
    png = pdf.with_suffix(".png")
    assert png.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    img = mpimg.imread(png)
    height, width = img.shape[:2]
    assert 300 < width <= 7.0 * 200 + 1 and 300 < height < 2000
    assert img[..., :3].std() > 0.01  # something was drawn


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("tables")
    write_tables(d)
    return d


GRID_FIGURES = sorted(FIGURE_NEEDS)  # the grid's (a stage's figures are drawn by its step)


@pytest.mark.parametrize("name", GRID_FIGURES)
def test_figure_from_synthetic_tables(name: str, synthetic: Path, tmp_path: Path) -> None:
    out = tmp_path / f"{name}.pdf"
    make_figure(_grid(CONFIG), str(synthetic), name, str(out))
    _assert_pdf_png(out)


@pytest.mark.slow
@pytest.mark.parametrize("name", GRID_FIGURES)
def test_figure_from_real_tables(name: str, tmp_path: Path) -> None:
    tables, grid_json = REPO / "results" / "tables", REPO / "results" / "grid.json"
    if not grid_json.exists():
        pytest.skip("no results/ (run snakemake first)")
    grid = Grid.from_json(json.loads(grid_json.read_text()))
    if name not in available_figures(grid):
        pytest.skip(f"{name} not in this config")
    out = tmp_path / f"{name}.pdf"
    make_figure(grid, str(tables), name, str(out))
    _assert_pdf_png(out)


def test_figure_is_deterministic(synthetic: Path, tmp_path: Path) -> None:
    a, b = tmp_path / "a.pdf", tmp_path / "b.pdf"
    for out in (a, b):
        make_figure(_grid(CONFIG), str(synthetic), "break_even", str(out))
    # identity is the claim: the same figure drawn twice by the same code, byte for byte
    assert a.read_bytes() == b.read_bytes()
    assert a.with_suffix(".png").read_bytes() == b.with_suffix(".png").read_bytes()


def test_available_figures_drops_absent_analyses() -> None:
    only_eq = {**CONFIG, "studies": {"equivalence": CONFIG["studies"]["equivalence"]}}
    names = available_figures(_grid(only_eq))
    assert names == ["equivalence", "optimal_k_heatmap", "roofline"]
    assert set(available_figures(_grid(CONFIG))) == set(FIGURE_NEEDS)
    assert set(FIGURE_NEEDS) == {n for n, f in FIGURES.items() if not f.step}


def test_unknown_figure_is_refused(synthetic: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown figure"):
        make_figure(_grid(CONFIG), str(synthetic), "nope", str(tmp_path / "x.pdf"))


def test_copy_readme_figures(tmp_path: Path) -> None:
    src, dst = tmp_path / "figs", tmp_path / "docs" / "figures"
    src.mkdir()
    for n in README_FIGURES[:-1]:
        (src / f"{n}.png").write_bytes(b"\x89PNG\r\n\x1a\n" + n.encode())
    with pytest.raises(FileNotFoundError, match=README_FIGURES[-1]):
        copy_readme_figures(src, dst)
    assert not dst.exists()
    (src / f"{README_FIGURES[-1]}.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    copied = copy_readme_figures(src, dst)
    assert [p.name for p in copied] == [f"{n}.png" for n in README_FIGURES]
    assert (dst / "roofline.png").read_bytes() == (src / "roofline.png").read_bytes()


# --- first-hour readability: fonts, rule names, the roofline's overlapping lines ----------------
ALL_FIGURES = [*GRID_FIGURES, *(f"llm:{f.name}" for f in stage_figures("llm", "figures"))]


@pytest.fixture(scope="module")
def llm_tables(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("llm")
    write_llm_tables(d)
    return d


def _drawn(name: str, synthetic: Path, llm_tables: Path) -> plt.Figure:
    """The figure laid out and drawn exactly as ``save`` writes it (same style, size, layout)."""
    with plt.rc_context(STYLE):
        if name.startswith("llm:"):  # a stage figure reads its declared tables by name
            fig = FIGURES[name[4:]].build()(
                lambda t: pd.read_csv(llm_tables / Path(table(t).path).name))
        else:
            fig = FIGURES[name].build()(_grid(CONFIG), str(synthetic))
        if fig.get_layout_engine() is None:
            fig.tight_layout()
        fig.canvas.draw()
    return fig


def _texts(fig: plt.Figure) -> list[Text]:
    return [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]


@pytest.mark.parametrize("name", ALL_FIGURES)
def test_every_text_is_readable_at_the_saved_size(name: str, synthetic: Path,
                                                  llm_tables: Path) -> None:
    """No text under MIN_FONTSIZE pt (figures are saved at their figsize, never scaled)."""
    fig = _drawn(name, synthetic, llm_tables)
    try:
        small = [(t.get_text(), t.get_fontsize()) for t in _texts(fig)
                 if t.get_fontsize() < MIN_FONTSIZE]
        assert not small, f"{name}: text under {MIN_FONTSIZE} pt: {small}"
        assert len(_texts(fig)) > 5
    finally:
        plt.close(fig)


@pytest.mark.parametrize("name", ALL_FIGURES)
def test_no_text_or_legend_is_cut_off(name: str, synthetic: Path, llm_tables: Path) -> None:
    """Larger fonts must not push a legend or a label past the edge of the saved canvas."""
    fig = _drawn(name, synthetic, llm_tables)
    try:
        r = fig.canvas.get_renderer()
        drawn, box = fig.get_tightbbox(r), fig.bbox_inches  # inches: all that is drawn
        tol = 1.0 / fig.dpi
        for a in fig.findobj(Legend):
            e = a.get_window_extent(r).transformed(fig.dpi_scale_trans.inverted())
            assert e.x0 >= -tol and e.x1 <= box.x1 + tol, f"{name}: legend cut off: {e}"
        assert (drawn.x0 >= -tol and drawn.y0 >= -tol and drawn.x1 <= box.x1 + tol
                and drawn.y1 <= box.y1 + tol), f"{name}: drawn {drawn} past the figure {box}"
    finally:
        plt.close(fig)


def test_rule_legend_uses_the_config_names(synthetic: Path, llm_tables: Path) -> None:
    """config.yaml and equivalence.csv say no_resample / continue: so must the legend, first."""
    fig = _drawn("equivalence", synthetic, llm_tables)
    try:
        legends = fig.findobj(Legend)
        rule_legend = next(lg for lg in legends if lg.get_title().get_text() == "rule")
        labels = [t.get_text() for t in rule_legend.get_texts()]
        drawn = [r for r in RULE_ORDER if r in CLASSIC_RULES]  # the table's rules
        assert len(labels) == len(drawn)
        for rule, label in zip(drawn, labels, strict=True):
            assert label.split()[0] == rule, (rule, label)
    finally:
        plt.close(fig)


def test_heatmap_digits_are_readable(synthetic: Path, llm_tables: Path) -> None:
    fig = _drawn("optimal_k_heatmap", synthetic, llm_tables)
    try:
        digits = [t for t in _texts(fig) if t.get_text().isdigit()
                  and t.get_fontweight() == "bold"]
        assert len(digits) == 2  # the two optimal_k points in the synthetic table
        assert all(t.get_fontsize() >= MIN_FONTSIZE for t in digits)
        # each in a box drawn around it, so two-digit values are not clipped by a marker
        assert all(t.get_bbox_patch() is not None for t in digits)
    finally:
        plt.close(fig)


def test_roofline_shows_every_model(synthetic: Path, llm_tables: Path) -> None:
    """The sizes' lines coincide (to a few %): each must still be visible and distinguishable
    -- stacked, each later one narrower with a smaller marker of another shape -- and the
    figure must say that they overlap."""
    shapes = [s.name for s in intensity.SHAPES]
    fig = _drawn("roofline", synthetic, llm_tables)
    try:
        ax = fig.axes[0]
        for formula in ("full count", "seed formula"):
            lines = {ln.get_label(): ln for ln in ax.get_lines()}
            drawn = [lines[f"{s} ({formula})"] for s in shapes]
            assert all(ln.get_visible() and ln.get_alpha() in (None, 1.0) for ln in drawn)
            assert len({ln.get_color() for ln in drawn}) == len(shapes)
            z = [ln.get_zorder() for ln in drawn]
            lw = [ln.get_linewidth() for ln in drawn]
            assert z == sorted(z) and len(set(z)) == len(z)  # drawn in order ...
            assert lw == sorted(lw, reverse=True) and len(set(lw)) == len(lw)  # ... narrower
            if formula == "full count":
                ms = [ln.get_markersize() for ln in drawn]
                assert ms == sorted(ms, reverse=True) and len(set(ms)) == len(ms)
                assert len({ln.get_marker() for ln in drawn}) == len(shapes)
        # the legend has one entry per model, with that model's marker and width
        entries = {t.get_text(): h for lg in fig.findobj(Legend)
                   for t, h in zip(lg.get_texts(), lg.legend_handles, strict=True)}
        for s in shapes:
            h, ln = entries[s], {x.get_label(): x for x in ax.get_lines()}[f"{s} (full count)"]
            assert isinstance(h, Line2D)
            assert (h.get_marker(), h.get_linewidth()) == (ln.get_marker(), ln.get_linewidth())
        note = " ".join(t.get_text() for t in _texts(fig))
        assert "overlap" in note
    finally:
        plt.close(fig)


def test_the_sizes_truly_coincide() -> None:
    """What the roofline's note claims: full-count intensity depends on the model's size by
    a few % only (each weight is read once and used once per token, at any size)."""
    it = intensity.intensity_table()
    assert 0.0 < roofline_spread(it) < 0.05
    assert roofline_spread(it, "seed") < 0.2


def test_every_output_is_declared_once_with_one_builder() -> None:
    """Each table and figure is declared once (specsim.outputs) and names its builder; each
    builder is a function of the module it names, drawn or built for one declaration only,
    and every builder-shaped function of those modules is declared (none forgotten)."""
    import inspect

    from specsim import outputs

    built = [t for t in outputs.TABLES.values() if t.builder] + list(outputs.FIGURES.values())
    paths = [d.builder for d in built]
    assert len(paths) == len(set(paths))
    for d in built:
        assert callable(d.build()), d.name
    for module in {p.partition(":")[0] for p in paths}:
        mod = importlib.import_module(module)
        public = {f"{module}:{n}" for n, f in vars(mod).items()
                  if inspect.isfunction(f) and f.__module__ == module and not n.startswith("_")
                  and list(inspect.signature(f).parameters)[:1] == ["grid"]}  # (grid, ...)
        assert public <= set(paths), f"not declared in specsim.outputs: {public - set(paths)}"
