"""Arithmetic intensity of a decoding forward pass: why speculative tokens are nearly free.

A decode step streams every weight from memory once, whether the pass processes one new
token or k. Verifying k drafted tokens in one pass therefore multiplies the arithmetic by
~k while the bytes moved barely change, so MACs per byte grows ~linearly in k until it
reaches the device's ridge point and the pass becomes compute-bound.

Conventions: 1 MAC (multiply-accumulate) = 2 FLOPs. Intensities are in MACs per byte.
Byte counts are for weights and KV cache only; activations, logits and the embedding
gather are neglected (they are < 1% of traffic at the sizes tabulated here).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the tables import pandas when built: the grid's checks read the shapes
    import pandas as pd

__all__ = [
    "A100_80GB",
    "DEFAULT_TOKENS",
    "DEVICES",
    "H100_SXM",
    "H200",
    "LLAMA2_7B",
    "LLAMA2_13B",
    "LLAMA2_70B",
    "PUBLISHED_PARAMS",
    "SEED_WEIGHT_BYTES_7B",
    "SHAPES",
    "Device",
    "PassCost",
    "TransformerShape",
    "batch_roofline_time",
    "intensity_table",
    "kv_cache_bytes",
    "max_tokens_memory_bound",
    "pass_cost",
    "ridge_macs_per_byte",
    "ridge_table",
    "roofline_time",
    "seed_macs_per_token",
]


@dataclass(frozen=True)
class TransformerShape:
    """Shape of a Llama-style decoder (GQA attention, SwiGLU MLP, RMSNorm, untied lm_head)."""

    name: str
    d_model: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    d_ff: int
    vocab: int
    bytes_per_param: int = 2

    def __post_init__(self) -> None:
        if self.d_model % self.n_heads:
            raise ValueError("d_model must be divisible by n_heads")
        if self.n_heads % self.n_kv_heads:
            raise ValueError("n_heads must be divisible by n_kv_heads")

    @property
    def head_dim(self) -> int:
        """Per-head width d_model / n_heads."""
        return self.d_model // self.n_heads

    @property
    def d_kv(self) -> int:
        """Width of the K (and of the V) projection: d_model * n_kv_heads / n_heads."""
        return self.head_dim * self.n_kv_heads

    def param_breakdown(self) -> dict[str, int]:
        """Parameter counts by component (all layers summed)."""
        d, L = self.d_model, self.n_layers
        return {
            "attn_qo": L * 2 * d * d,
            "attn_kv": L * 2 * d * self.d_kv,
            "mlp": L * 3 * d * self.d_ff,
            "norms": L * 2 * d + d,  # two RMSNorm gains per layer + final norm
            "embed": self.vocab * d,
            "lm_head": self.vocab * d,  # untied
        }

    def param_count(self) -> int:
        """Total parameter count."""
        return sum(self.param_breakdown().values())

    def matmul_params(self) -> int:
        """Parameters used as a matmul per token: all but embedding (a gather) and norms."""
        b = self.param_breakdown()
        return self.param_count() - b["embed"] - b["norms"]

    def weight_bytes(self) -> int:
        """Bytes to read every parameter once."""
        return self.param_count() * self.bytes_per_param


LLAMA2_7B = TransformerShape("Llama-2-7B", 4096, 32, 32, 32, 11008, 32000)
LLAMA2_13B = TransformerShape("Llama-2-13B", 5120, 40, 40, 40, 13824, 32000)
LLAMA2_70B = TransformerShape("Llama-2-70B", 8192, 80, 64, 8, 28672, 32000)
SHAPES: tuple[TransformerShape, ...] = (LLAMA2_7B, LLAMA2_13B, LLAMA2_70B)

#: Published (rounded) parameter counts; the seed program used 6.74e9 for the 7B model.
PUBLISHED_PARAMS: dict[str, float] = {
    "Llama-2-7B": 6.74e9,
    "Llama-2-13B": 13.0e9,
    "Llama-2-70B": 69.0e9,
}
#: Seed program demo 6: fp16 weight bytes of the 7B model, int(6.74e9 * 2).
SEED_WEIGHT_BYTES_7B = int(6.74e9 * 2)


@dataclass(frozen=True)
class Device:
    """An accelerator on the roofline: dense bf16 peak FLOP/s and HBM bandwidth in B/s."""

    name: str
    peak_flops: float
    mem_bw: float

    @property
    def peak_macs(self) -> float:
        """Peak MAC/s (1 MAC = 2 FLOPs)."""
        return self.peak_flops / 2.0


A100_80GB = Device("A100-80GB", 312e12, 2.039e12)
H100_SXM = Device("H100-SXM", 989e12, 3.35e12)
H200 = Device("H200", 989e12, 4.8e12)
DEVICES: tuple[Device, ...] = (A100_80GB, H100_SXM, H200)

DEFAULT_TOKENS: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)


@dataclass(frozen=True)
class PassCost:
    """MACs and bytes of one forward pass, with the terms that make them up."""

    tokens_in_pass: int
    n_ctx: int
    weight_macs: int
    attn_macs: int
    weight_bytes: int
    kv_read_bytes: int
    kv_write_bytes: int

    @property
    def macs(self) -> int:
        """Total MACs."""
        return self.weight_macs + self.attn_macs

    @property
    def bytes(self) -> int:
        """Total bytes moved to/from memory."""
        return self.weight_bytes + self.kv_read_bytes + self.kv_write_bytes

    @property
    def macs_per_byte(self) -> float:
        """Arithmetic intensity in MACs per byte."""
        return self.macs / self.bytes


def kv_cache_bytes(shape: TransformerShape, n_tokens: int, kv_bytes_per_elem: int = 2) -> int:
    """Bytes of K and V for n_tokens positions: 2 * n_layers * n_tokens * d_kv * kv_bytes."""
    return 2 * shape.n_layers * n_tokens * shape.d_kv * kv_bytes_per_elem


def pass_cost(
    shape: TransformerShape, tokens_in_pass: int, n_ctx: int, kv_bytes_per_elem: int = 2
) -> PassCost:
    """Cost of one forward pass over `tokens_in_pass` new tokens after n_ctx cached ones.

    With t = tokens_in_pass, d = d_model, L = n_layers:

    MACs
      weight_macs = t * matmul_params: q, k, v, o projections, the 3 SwiGLU matrices and the
        lm_head, once per token. The lm_head runs on every token because verification needs
        a next-token distribution at every position. Excluded: the input embedding (a table
        lookup, no MACs) and RMSNorm/RoPE/softmax/SiLU (elementwise, O(d) per token).
      attn_macs = L * 2 * d * sum_{i=1..t} (n_ctx + i) = L * 2 * d * (t*n_ctx + t(t+1)/2).
        New token i (1-based) attends causally to n_ctx' = n_ctx + i positions (the cache
        plus new tokens 1..i); per position it spends d MACs on q.k (all n_heads heads of
        head_dim; GQA shares K/V but not the work) and d MACs on weights.V.

    Bytes
      weight_bytes = param_count * bytes_per_param: every parameter read once per pass,
        independent of t. This counts the whole embedding table although only t rows are
        gathered (an overcount of ~(vocab - t) * d elements, ~4% of the 7B total).
      kv_read_bytes = 2 * L * n_ctx * d_kv * kv_bytes: K and V of the cached tokens, once.
      kv_write_bytes = 2 * L * t * d_kv * kv_bytes: K and V of the new tokens, written once;
        they are consumed from on-chip memory within the pass, so not re-read.
    """
    if tokens_in_pass < 1 or n_ctx < 0:
        raise ValueError("need tokens_in_pass >= 1 and n_ctx >= 0")
    t, d, L = tokens_in_pass, shape.d_model, shape.n_layers
    attended = t * n_ctx + t * (t + 1) // 2
    return PassCost(
        tokens_in_pass=t,
        n_ctx=n_ctx,
        weight_macs=t * shape.matmul_params(),
        attn_macs=L * 2 * d * attended,
        weight_bytes=shape.weight_bytes(),
        kv_read_bytes=kv_cache_bytes(shape, n_ctx, kv_bytes_per_elem),
        kv_write_bytes=kv_cache_bytes(shape, t, kv_bytes_per_elem),
    )


def seed_macs_per_token(d_model: int, d_ff: int, layers: int, n_ctx: int) -> int:
    """SEED PROGRAM's formula, verbatim: layers * (4 d^2 + 2 d n_ctx + 2 d d_ff).

    Simpler than `pass_cost`: 4 d^2 assumes full MHA (no GQA), 2 d d_ff assumes a 2-matrix
    MLP (SwiGLU has 3), no lm_head, and attention over a fixed n_ctx for every token.
    """
    return layers * (4 * d_model * d_model + 2 * d_model * n_ctx + 2 * d_model * d_ff)


def ridge_macs_per_byte(device: Device) -> float:
    """Ridge point in MACs/byte: peak_flops / 2 / mem_bw (1 MAC = 2 FLOPs)."""
    return device.peak_flops / 2.0 / device.mem_bw


def roofline_time(cost: PassCost, device: Device) -> float:
    """Roofline time in seconds: max(macs / (peak_flops / 2), bytes / mem_bw)."""
    return max(cost.macs / device.peak_macs, cost.bytes / device.mem_bw)


def batch_roofline_time(
    shape: TransformerShape,
    device: Device,
    tokens_per_seq: int,
    batch: int,
    n_ctx: int,
    kv_bytes_per_elem: int = 2,
) -> float:
    """Roofline time of one pass over ``batch`` sequences, each processing ``tokens_per_seq``
    new tokens after its own n_ctx cached ones: ``batch`` times the MACs of :func:`pass_cost`,
    the weights read once for the whole batch, each sequence's KV cache read and written.
    ``batch`` = 1 is :func:`roofline_time` of :func:`pass_cost`."""
    if batch < 1:
        raise ValueError("need batch >= 1")
    one = pass_cost(shape, tokens_per_seq, n_ctx, kv_bytes_per_elem)
    kv = one.kv_read_bytes + one.kv_write_bytes
    return max(batch * one.macs / device.peak_macs,
               (one.weight_bytes + batch * kv) / device.mem_bw)


def max_tokens_memory_bound(
    shape: TransformerShape,
    device: Device,
    n_ctx: int,
    kv_bytes_per_elem: int = 2,
    limit: int = 1 << 30,
) -> int:
    """Largest tokens_in_pass whose MACs/byte is <= the device ridge point (0 if none).

    MACs/byte is strictly increasing in tokens_in_pass, so doubling then bisection finds
    the crossing exactly.
    """
    ridge = ridge_macs_per_byte(device)

    def ok(t: int) -> bool:
        return pass_cost(shape, t, n_ctx, kv_bytes_per_elem).macs_per_byte <= ridge

    if not ok(1):
        return 0
    lo, hi = 1, 2
    while ok(hi):
        lo, hi = hi, hi * 2
        if hi > limit:
            raise ValueError("no crossing below limit")
    while hi - lo > 1:  # invariant: ok(lo) and not ok(hi)
        mid = (lo + hi) // 2
        if ok(mid):
            lo = mid
        else:
            hi = mid
    return lo


def _seed_weight_bytes(shape: TransformerShape) -> int:
    """Weight bytes as the seed reckons them: published params * bytes_per_param."""
    params = PUBLISHED_PARAMS.get(shape.name, float(shape.param_count()))
    return int(params * shape.bytes_per_param)


def intensity_table(
    shapes: Sequence[TransformerShape] = SHAPES,
    tokens: Sequence[int] = DEFAULT_TOKENS,
    n_ctx: int = 512,
    devices: Sequence[Device] = DEVICES,
) -> pd.DataFrame:
    """MACs, bytes and MACs/byte per (formula, shape, tokens_in_pass).

    formula='full' rows come from `pass_cost`; formula='seed' rows are the seed program's
    demo 6: tokens * seed_macs_per_token over published params * bytes_per_param (for the
    7B shape exactly int(6.74e9 * 2)), no KV traffic. One column `roofline_s[<device>]` per
    device gives the roofline time of the pass.
    """
    import pandas as pd

    rows: list[dict[str, object]] = []
    for formula in ("full", "seed"):
        for shape in shapes:
            seed_per_tok = seed_macs_per_token(shape.d_model, shape.d_ff, shape.n_layers, n_ctx)
            for t in tokens:
                if formula == "full":
                    cost = pass_cost(shape, t, n_ctx)
                    macs, nbytes = cost.macs, cost.bytes
                else:
                    macs, nbytes = t * seed_per_tok, _seed_weight_bytes(shape)
                row: dict[str, object] = {
                    "shape": shape.name,
                    "tokens_in_pass": t,
                    "n_ctx": n_ctx,
                    "macs": macs,
                    "bytes": nbytes,
                    "macs_per_byte": macs / nbytes,
                    "formula": formula,
                }
                for dev in devices:
                    row[f"roofline_s[{dev.name}]"] = max(macs / dev.peak_macs, nbytes / dev.mem_bw)
                rows.append(row)
    return pd.DataFrame(rows)


def ridge_table(
    shapes: Sequence[TransformerShape] = SHAPES,
    devices: Sequence[Device] = DEVICES,
    n_ctx: int = 512,
    ratio_tokens: int = 5,
) -> pd.DataFrame:
    """Per (shape, device): ridge point, memory-bound token limit and roofline times.

    time_ratio = T(ratio_tokens) / T(1) from the roofline: ~1 means the extra verified
    tokens are free.
    """
    import pandas as pd

    rows: list[dict[str, object]] = []
    for shape in shapes:
        one = pass_cost(shape, 1, n_ctx)
        k_cost = pass_cost(shape, ratio_tokens, n_ctx)
        for dev in devices:
            k_max = max_tokens_memory_bound(shape, dev, n_ctx)
            t1 = roofline_time(one, dev)
            rows.append(
                {
                    "shape": shape.name,
                    "device": dev.name,
                    "n_ctx": n_ctx,
                    "ridge_macs_per_byte": ridge_macs_per_byte(dev),
                    "max_tokens_memory_bound": k_max,
                    "time_one_token_s": t1,
                    "time_at_max_tokens_s": (
                        roofline_time(pass_cost(shape, k_max, n_ctx), dev)
                        if k_max
                        else float("nan")
                    ),
                    "ratio_tokens": ratio_tokens,
                    "time_ratio": roofline_time(k_cost, dev) / t1,
                }
            )
    return pd.DataFrame(rows)
