"""This CPU on the roofline: measured peak matmul rate and copy bandwidth, the weight-streaming
rate of single matmuls, and SmolLM2-135M's arithmetic intensity against the measured T(k)/T(1)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from specsim import timing
from specsim.intensity import Device, pass_cost, ridge_macs_per_byte
from specsim.pairs.llm.loading import SMOLLM2_135M
from specsim.pairs.llm.settings import Settings


def measure_device(s: Settings) -> tuple[Device, timing.Timings]:
    """Peak matmul FLOP/s (float32 n x n @ n x n) and copy bandwidth (bytes read + written),
    from the medians of ``cost_repeats`` interleaved repeats; and the timings themselves."""
    import torch

    n = s.matmul_size
    a, b = torch.randn(n, n), torch.randn(n, n)
    elems = s.copy_mib * (1 << 20) // 4
    src, dst = torch.randn(elems), torch.empty(elems)
    tm = timing.measure({"matmul": lambda r: torch.mm(a, b), "copy": lambda r: dst.copy_(src)},
                        s.cost_repeats)
    device = Device(f"this CPU ({s.threads} threads)", 2.0 * n**3 / tm["matmul"].median,
                    2.0 * 4 * elems / tm["copy"].median)
    return device, tm


def kernel_table(s: Settings, ks: Sequence[int] = (1, 2, 3, 4, 8, 16)) -> pd.DataFrame:
    """``F.linear`` alone on SmolLM2's three weight shapes for k rows: seconds and the weight
    bytes streamed per second. At k = 1 PyTorch calls a matrix-vector kernel, at k >= 2 a
    matrix-matrix one -- the step in T(k)/T(1) that the roofline does not predict. Every
    (matrix, k) is timed in one interleaved measurement; ratios are paired per repeat."""
    import torch

    shapes = {"mlp up/gate 576->1536": (1536, 576), "mlp down 1536->576": (576, 1536),
              "lm_head 576->49152": (49152, 576)}
    fns = {}
    for name, (out_f, in_f) in shapes.items():
        w = torch.randn(out_f, in_f)
        for k in ks:
            x = torch.randn(k, in_f)
            fns[f"{name} k={k}"] = lambda r, x=x, w=w: torch.nn.functional.linear(x, w)
    tm = timing.measure(fns, s.cost_repeats, min_seconds=0.02)
    rows = []
    for name, (out_f, in_f) in shapes.items():
        nbytes = out_f * in_f * 4
        for k in ks:
            t = tm[f"{name} k={k}"]
            rows.append({"matrix": name, "weight_bytes": nbytes, "rows_k": k,
                         **timing.columns(seconds=t, ratio=tm.ratio(f"{name} k={k}",
                                                                    f"{name} k={ks[0]}")),
                         "weight_gb_per_s": nbytes / t.median / 1e9, "threads": s.threads,
                         "repeats": s.cost_repeats, **tm.load.columns()})
    return pd.DataFrame(rows)


def pass_macs_bytes(k: int, n_ctx: int) -> tuple[int, int]:
    """MACs and bytes of one SmolLM2-135M pass over k new tokens after n_ctx cached ones.

    :func:`specsim.intensity.pass_cost` counts an untied lm_head and the whole embedding table
    as read; SmolLM2 ties them, so the table is read once (as the lm_head; the embedding
    gather touches k rows): one table's bytes are taken off. KV cache in float32.
    """
    cost = pass_cost(SMOLLM2_135M, k, n_ctx, kv_bytes_per_elem=4)
    table = SMOLLM2_135M.vocab * SMOLLM2_135M.d_model * SMOLLM2_135M.bytes_per_param
    return cost.macs, cost.bytes - table


def intensity_table(device: Device, costs: pd.DataFrame, n_ctx: int) -> pd.DataFrame:
    """Per k: MACs, bytes, MACs/byte, roofline T(k)/T(1) on this CPU, measured T(k)/T(1) (the
    costs table's medians, and whether their repeats agreed)."""
    measured = costs[costs["model"] == "target"].set_index("positions")
    rows = []
    t1 = None
    for k in measured.index:
        macs, nbytes = pass_macs_bytes(int(k), n_ctx)
        t = max(macs / device.peak_macs, nbytes / device.mem_bw)
        t1 = t if t1 is None else t1
        rows.append({"positions": int(k), "n_ctx": n_ctx, "macs": macs, "bytes": nbytes,
                     "macs_per_byte": macs / nbytes,
                     "ridge_macs_per_byte": ridge_macs_per_byte(device),
                     "roofline_seconds": t, "roofline_ratio": t / t1,
                     "measured_seconds": float(measured.loc[k, "seconds"]),
                     "measured_ratio": float(measured.loc[k, "ratio"]),
                     "roofline_fraction": t / float(measured.loc[k, "seconds"]),
                     "measured_reliable": bool(measured.loc[k, "reliable"])})
    return pd.DataFrame(rows)




def device_record(device: Device, tm: timing.Timings | None = None) -> dict[str, Any]:
    """What the ``device`` step writes (device.json) and the ``intensity`` step reads back;
    with the timings: their medians, quartiles, verdict and the load."""
    out = {"name": device.name, "peak_flops": device.peak_flops, "mem_bw": device.mem_bw,
           "ridge_macs_per_byte": ridge_macs_per_byte(device)}
    if tm is not None:
        out |= {**timing.columns(matmul_seconds=tm["matmul"], copy_seconds=tm["copy"]),
                "repeats": len(tm["matmul"].samples), **tm.load.columns()}
    return out


def device_from_record(record: dict[str, Any]) -> Device:
    return Device(record["name"], float(record["peak_flops"]), float(record["mem_bw"]))
