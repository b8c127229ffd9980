"""Tests for specsim.intensity: parameter counts, seed formula, roofline ridge points."""

from dataclasses import replace

import pytest

from specsim.intensity import (
    DEVICES,
    LLAMA2_7B,
    LLAMA2_13B,
    LLAMA2_70B,
    PUBLISHED_PARAMS,
    SEED_WEIGHT_BYTES_7B,
    SHAPES,
    intensity_table,
    kv_cache_bytes,
    max_tokens_memory_bound,
    pass_cost,
    ridge_macs_per_byte,
    ridge_table,
    seed_macs_per_token,
)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.name)
def test_param_count_within_1pct_of_published(shape):
    assert shape.param_count() == pytest.approx(PUBLISHED_PARAMS[shape.name], rel=0.01)


def test_param_counts_exact():
    # Hand-computed from the published shapes (q,o,k,v + SwiGLU + norms + embed + lm_head).
    assert LLAMA2_7B.param_count() == 6_738_415_616
    assert LLAMA2_13B.param_count() == 13_015_864_320
    assert LLAMA2_70B.param_count() == 68_976_648_192
    assert LLAMA2_70B.d_kv == 1024


def test_seed_formula_reproduces_demo_6():
    d, ff, layers, n = 4096, 11008, 32, 512
    by_hand = layers * (4 * d * d + 2 * d * n + 2 * d * ff)
    assert by_hand == 32 * (67_108_864 + 4_194_304 + 90_177_536)
    assert seed_macs_per_token(d, ff, layers, n) == by_hand == 5_167_382_528
    assert SEED_WEIGHT_BYTES_7B == 13_480_000_000
    # Demo 6 prints k * per_token and k * per_token / weight_bytes with "%8.2f".
    printed = {1: "0.38", 2: "0.77", 4: "1.53", 8: "3.07", 16: "6.13"}
    seed = intensity_table([LLAMA2_7B], tokens=tuple(printed), devices=())
    seed = seed[seed["formula"] == "seed"].set_index("tokens_in_pass")
    for k, text in printed.items():
        assert seed.loc[k, "macs"] == k * by_hand
        assert seed.loc[k, "bytes"] == SEED_WEIGHT_BYTES_7B
        assert f"{seed.loc[k, 'macs_per_byte']:.2f}" == text
    assert seed.loc[16, "macs"] == 82_678_120_448


def test_pass_cost_terms_by_hand():
    s, t, n = LLAMA2_7B, 4, 512
    c = pass_cost(s, t, n)
    d, L = s.d_model, s.n_layers
    per_tok = L * (4 * d * d + 3 * d * s.d_ff) + s.vocab * d
    assert c.weight_macs == t * per_tok
    assert c.attn_macs == L * 2 * d * sum(n + i for i in range(1, t + 1))
    assert c.weight_bytes == 2 * s.param_count()
    assert c.kv_read_bytes == 2 * L * n * d * 2
    assert c.kv_write_bytes == 2 * L * t * d * 2
    assert c.macs_per_byte == c.macs / c.bytes


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.name)
def test_intensity_nearly_linear_at_small_k(shape):
    r = pass_cost(shape, 16, 512).macs_per_byte / pass_cost(shape, 1, 512).macs_per_byte
    assert 14 < r < 16.01


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.name)
@pytest.mark.parametrize("device", DEVICES, ids=lambda d: d.name)
@pytest.mark.parametrize("n_ctx", [0, 512, 4096])
def test_max_tokens_is_the_crossing(shape, device, n_ctx):
    ridge = ridge_macs_per_byte(device)
    assert ridge == device.peak_flops / 2 / device.mem_bw
    k = max_tokens_memory_bound(shape, device, n_ctx)
    assert k >= 1
    assert pass_cost(shape, k, n_ctx).macs_per_byte <= ridge
    assert pass_cost(shape, k + 1, n_ctx).macs_per_byte > ridge


def test_gqa_cuts_70b_kv_bytes_8x():
    mha = replace(LLAMA2_70B, name="Llama-2-70B-MHA", n_kv_heads=64)
    assert kv_cache_bytes(mha, 512) == 8 * kv_cache_bytes(LLAMA2_70B, 512)
    gqa_c, mha_c = pass_cost(LLAMA2_70B, 8, 512), pass_cost(mha, 8, 512)
    assert mha_c.kv_read_bytes + mha_c.kv_write_bytes == 8 * (
        gqa_c.kv_read_bytes + gqa_c.kv_write_bytes
    )
    assert mha_c.attn_macs == gqa_c.attn_macs  # GQA shares K/V, not the dot products


def test_tables_shape_and_columns():
    it = intensity_table()
    assert len(it) == 2 * len(SHAPES) * 10
    assert set(it["formula"]) == {"full", "seed"}
    assert {"shape", "tokens_in_pass", "n_ctx", "macs", "bytes", "macs_per_byte"} <= set(it)
    rt = ridge_table()
    assert len(rt) == len(SHAPES) * len(DEVICES)
    assert (rt["time_ratio"] < 1.001).all()  # 5 verified tokens cost ~ the same as 1
    assert (rt["time_at_max_tokens_s"] >= rt["time_one_token_s"]).all()
