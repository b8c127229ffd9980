"""``make gpu-check``: the transformers backend on a GPU records the rows the CPU records.

A small trace of the tier's pair (SmolLM2-135M and its first ``--skip`` layers, saved once as a
local directory) is recorded with ``specsim record hf`` on the CPU in float32, one document at
a time (the reference), then on ``--device`` in each ``--dtypes``, ``--batch`` documents per
forward pass. Each is compared with the reference (:func:`compare`) and judged against its
dtype's tolerance (:data:`TOLERANCE`); one line per comparison, exit 0 when all pass, 1 when one
fails, :data:`NO_DEVICE` when the device is not here (nothing was compared: not a pass).

Rows are comparable only in the same context. Both traces draw document d's tokens from the
same uniforms, so they agree until a uniform falls between the two devices' CDFs; from there on
the contexts differ. :func:`compare` therefore compares, per document, the positions up to and
including the first one whose token differs (its context is still shared), and reports how
many that was.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from specsim.pairs.llm.settings import DTYPES
from specsim.traces.format import Trace

#: Exit status when the device to check is not on this machine (distinct from pass and fail).
NO_DEVICE = 3


@dataclass(frozen=True)
class Tolerance:
    """The largest |Δ| of a kept probability (p, q, and α) and the smallest mean support overlap
    (|A ∩ B| / |A ∪ B| of the kept supports) a dtype may show against the float32 CPU rows."""

    max_abs: float
    overlap: float


#: Per dtype, against the CPU float32 rows. float32: another device's (or batch's) kernels
#: round differently, ~1e-6 on a probability; bfloat16 keeps 8 significant bits, float16 11.
#: Measured on this CPU (``python -m specsim.pairs.llm.gpu_check --device cpu --documents 4
#: --prompt-tokens 24 --length 12``, SmolLM2-135M / skip-10, batch 4 vs the reference's 1):
#: float32 max |dp| 4.6e-6, overlap 1.000; bfloat16 2.8e-2, 0.984 (10 of 48 positions in
#: shared context); float16 4.5e-3, 0.997 (24 of 48). The tolerances leave room for a GPU's
#: kernels; ``tests/unit/pairs/test_llm_device.py`` checks they pass a bfloat16 trace and fail
#: a perturbed one.
TOLERANCE = {"float32": Tolerance(1e-4, 0.98), "bfloat16": Tolerance(0.1, 0.8),
             "float16": Tolerance(0.03, 0.9)}


@dataclass(frozen=True)
class Comparison:
    """Rows of a trace against the reference's at the positions of shared context."""

    positions: int  # compared (shared context)
    of: int  # positions in the trace
    max_abs_p: float
    max_abs_q: float
    max_abs_alpha: float
    overlap: float  # mean over compared positions of |A ∩ B| / |A ∪ B| of the kept supports

    def passes(self, tol: Tolerance) -> bool:
        return (self.positions > 0 and max(self.max_abs_p, self.max_abs_q, self.max_abs_alpha)
                <= tol.max_abs and self.overlap >= tol.overlap)

    def line(self, name: str, tol: Tolerance) -> str:
        return (f"{'PASS' if self.passes(tol) else 'FAIL'} {name}: max |dp| {self.max_abs_p:.2e}"
                f", |dq| {self.max_abs_q:.2e}, |dalpha| {self.max_abs_alpha:.2e} "
                f"(tolerance {tol.max_abs:g}); support overlap {self.overlap:.3f} "
                f"(>= {tol.overlap:g}); {self.positions}/{self.of} positions in shared context")


def shared_positions(ref: Trace, got: Trace) -> list[int]:
    """The positions whose context both traces share: per document, up to and including the
    first position where their tokens differ."""
    if not np.array_equal(ref.doc_start, got.doc_start):
        raise ValueError("the traces hold documents of different lengths: not comparable")
    out: list[int] = []
    for lo, hi in zip(ref.doc_start[:-1], ref.doc_start[1:], strict=True):
        differ = np.flatnonzero(ref.token[lo:hi] != got.token[lo:hi])
        end = lo + (int(differ[0]) + 1 if differ.size else hi - lo)
        out.extend(range(lo, end))
    return out


def compare(ref: Trace, got: Trace) -> Comparison:
    """Max |Δ| of p and q on the tokens both kept, of α, and the supports' overlap, over the
    positions of shared context (:func:`shared_positions`)."""
    dp = dq = 0.0
    overlaps = []
    positions = shared_positions(ref, got)
    for i in positions:
        a = slice(ref.offsets[i], ref.offsets[i + 1])
        b = slice(got.offsets[i], got.offsets[i + 1])
        both, ia, ib = np.intersect1d(ref.support[a], got.support[b], return_indices=True)
        if both.size:
            dp = max(dp, float(np.abs(ref.p[a][ia] - got.p[b][ib]).max()))
            dq = max(dq, float(np.abs(ref.q[a][ia] - got.q[b][ib]).max()))
        overlaps.append(both.size / np.union1d(ref.support[a], got.support[b]).size)
    idx = np.asarray(positions, dtype=np.int64)
    dalpha = float(np.abs(ref.alpha[idx] - got.alpha[idx]).max(initial=0.0))
    return Comparison(len(positions), ref.n_positions, dp, dq, dalpha,
                      float(np.mean(overlaps)) if overlaps else 0.0)


def _record(target: Path, draft: Path, out: Path, device: str, dtype: str, batch: int,
            args: argparse.Namespace) -> None:
    """``specsim record hf`` as a user runs it (its own process: its memory goes with it)."""
    import subprocess

    code = subprocess.run(
        [sys.executable, "-c", "import sys; from specsim import cli; "
         "sys.exit(cli.main(sys.argv[1:]))", "record", "hf", "--target", str(target),
         "--draft", str(draft), "--out", str(out), "--device", device, "--dtype", dtype,
         "--batch", str(batch), "--documents", str(args.documents),
         "--prompt-tokens", str(args.prompt_tokens), "--length", str(args.length),
         "--top-k", str(args.top_k), "--seed", str(args.seed)], check=False).returncode
    if code:
        raise SystemExit(code)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m specsim.pairs.llm.gpu_check", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cuda", help="the device checked (default cuda)")
    p.add_argument("--dtypes", nargs="+", default=list(DTYPES), choices=DTYPES,
                   help="dtypes recorded on --device (default: all)")
    p.add_argument("--batch", type=int, default=4, help="documents per forward pass there")
    p.add_argument("--documents", type=int, default=8)
    p.add_argument("--prompt-tokens", type=int, default=32)
    p.add_argument("--length", type=int, default=16)
    p.add_argument("--top-k", type=int, default=16)
    p.add_argument("--skip", type=int, default=10, help="the draft: the target's first layers")
    p.add_argument("--seed", type=int, default=20221117)
    p.add_argument("--work", default=None, help="directory for the traces (default: temporary)")
    args = p.parse_args(argv)
    from specsim.pairs.llm.loading import available_devices, cache_dir, load_target, skip_copy

    here = available_devices()
    if args.device not in here:
        print(f"gpu-check: no {args.device} device on this machine (available: "
              f"{', '.join(here)}): nothing compared", file=sys.stderr)
        return NO_DEVICE
    from specsim.traces.format import read_trace

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(args.work or tmp)
        draft = work / f"skip-{args.skip}"
        model, tok = load_target()
        skip_copy(model, args.skip).save_pretrained(draft)
        tok.save_pretrained(draft)
        target = cache_dir()
        ref_path = work / "cpu-float32.parquet"
        _record(target, draft, ref_path, "cpu", "float32", 1, args)
        ref = read_trace(ref_path)
        failed = 0
        for dtype in args.dtypes:
            path = work / f"{args.device}-{dtype}.parquet"
            _record(target, draft, path, args.device, dtype, args.batch, args)
            tol = TOLERANCE[dtype]
            result = compare(ref, read_trace(path))
            print(result.line(f"{args.device} {dtype} (batch {args.batch}) vs cpu float32",
                              tol), flush=True)
            failed += not result.passes(tol)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
