"""Log lines that print acceptance *rates*: vLLM's ``SpecDecoding metrics:`` line and
llama-server's ``draft acceptance = ...`` line (formats and sources: :mod:`.readers`).

A line gives Accepted (and Drafted) as counts but the per-position acceptance as rates
a_i / N printed to 3 decimals and N only through the mean acceptance length 1 + Accepted / N
printed to 2: :func:`recover` finds every (N, a_1..a_K) that prints as the line -- each a_i the
one whole number within half a printed unit of rate_i * N, summing to Accepted, non-increasing
-- and takes it only if it is unique (among several, the one with N*K = Drafted).
"""

from __future__ import annotations

import re
from fractions import Fraction
from math import ceil, floor
from typing import TYPE_CHECKING

import numpy as np

from specsim.acceptance.counts import AcceptanceCounts

if TYPE_CHECKING:
    from specsim.acceptance.readers import ReadContext

__all__ = ["llamacpp", "recover", "vllm_log"]

_NUM = r"(\d+(?:\.\d+)?)"
_RATES = r"(\d+\.\d+(?:\s*,\s*\d+\.\d+)*)"
_VLLM = {"mean": rf"Mean acceptance length: {_NUM}", "accepted": r"Accepted: (\d+) tokens",
         "drafted": r"Drafted: (\d+) tokens", "rates": rf"Per-position acceptance rate: {_RATES}"}
_LLAMA = re.compile(r"draft acceptance(?: rate)? = \s*" + _NUM + r"\s*\(\s*(\d+) accepted "
                    r"/\s*(\d+) generated\)(?:, mean (?:acceptance length|len) =\s*" + _NUM + r")?"
                    r"(?:, acceptance rate per position = \(" + _RATES + r"\))?")
_LLAMA_POS = re.compile(r"acc per pos = \(" + _RATES + r"\)")


def vllm_log(text: str, ctx: ReadContext) -> AcceptanceCounts:
    found = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if "SpecDecoding metrics:" not in line:
            continue
        body = line.split("SpecDecoding metrics:", 1)[1]
        got = {k: re.search(r, body) for k, r in _VLLM.items()}
        absent = [_VLLM[k].split(":")[0] for k, m in got.items() if m is None]
        if "Per-position acceptance rate" in absent:
            raise ctx.error("no 'Per-position acceptance rate': the counts per position are "
                            "needed", lineno)
        if absent:
            raise ctx.error(f"rates without counts: no {', '.join(map(repr, absent))}", lineno)
        g = {k: m.group(1) for k, m in got.items() if m is not None}
        found.append((lineno, int(g["accepted"]), int(g["drafted"]), g["mean"], g["rates"]))
    if not found:
        raise ctx.error("no 'SpecDecoding metrics:' line")
    return _pool_lines(found, ctx)


def llamacpp(text: str, ctx: ReadContext) -> AcceptanceCounts:
    rows = text.splitlines()
    found = []
    for lineno, line in enumerate(rows, 1):
        m = _LLAMA.search(line)
        if m is None:
            continue
        _, accepted, generated, mean, rates = m.groups()
        if rates is None and lineno < len(rows):
            nxt = _LLAMA_POS.search(rows[lineno])
            rates = nxt.group(1) if nxt else None
        if rates is None or mean is None:
            raise ctx.error("draft acceptance without per-position rates (and mean length): "
                            "the counts per position cannot be recovered (llama-server prints "
                            "them since PR #24536; 'acc per pos' needs trace verbosity)", lineno)
        found.append((lineno, int(accepted), int(generated), mean, rates))
    if not found:
        raise ctx.error("no llama.cpp 'draft acceptance = ... (A accepted / G generated)' line")
    return _pool_lines(found, ctx)


def _pool_lines(found: list[tuple[int, int, int, str, str]], ctx: ReadContext) -> AcceptanceCounts:
    if ctx.lines == "last":
        found = found[-1:]
    counts = [recover(*row, ctx) for row in found]
    total = counts[0]
    for (lineno, *_), c in zip(found[1:], counts[1:], strict=True):
        if c.max_gamma != total.max_gamma:
            raise ctx.error(f"{c.max_gamma} positions, earlier lines {total.max_gamma}: one "
                            f"draft length per file", lineno)
        total = total + c
    return total


def _digits(s: str) -> tuple[int, int]:
    """A printed decimal as (integer of its digits, number of decimals)."""
    whole, _, frac = s.partition(".")
    return int(whole + frac), len(frac)


def recover(lineno: int, accepted: int, drafted: int, mean: str, rates_text: str,
             ctx: ReadContext) -> AcceptanceCounts:
    """The one (N, a_1..a_K) that prints as this line, or a refusal."""
    rates = [_digits(r.strip()) for r in rates_text.split(",")]
    k = len(rates)
    m, e = _digits(mean)
    lo_n, hi_n = max(ceil(drafted / k), 1), max(drafted, 1)  # each round drafts 1..K tokens
    if accepted == 0:  # mean 1.00 says nothing of N: only Drafted = N*K does
        lo_n = hi_n = drafted // k if drafted % k == 0 else 0
    else:  # mean - 1 = accepted / N within half a printed unit
        over = Fraction(2 * m + 1 - 2 * 10**e, 2 * 10**e)
        under = Fraction(2 * m - 1 - 2 * 10**e, 2 * 10**e)
        if over <= 0:
            raise ctx.error(f"mean acceptance length {mean} with {accepted} accepted", lineno)
        lo_n = max(lo_n, ceil(accepted / over))
        if under > 0:
            hi_n = min(hi_n, floor(accepted / under))
    if hi_n - lo_n > 10**7:
        raise ctx.error(f"counts cannot be recovered exactly: mean length {mean} leaves "
                        f"{hi_n - lo_n + 1} round counts N", lineno)
    ns = np.arange(max(lo_n, 1), hi_n + 1, dtype=np.int64)
    a = np.empty((k, ns.size), dtype=np.int64)
    ok = np.ones(ns.size, dtype=bool)
    for i, (r, d) in enumerate(rates):  # a_i / N within half a unit of the printed r / 10^d
        lo = -((-(2 * r - 1) * ns) // (2 * 10**d))
        a[i] = ((2 * r + 1) * ns) // (2 * 10**d)
        ok &= lo == a[i]
    prev = np.vstack([ns, a[:-1]])
    ok &= (a.sum(axis=0) == accepted) & (a <= prev).all(axis=0)
    fits = [(int(n), tuple(int(x) for x in col)) for n, col in zip(ns[ok], a[:, ok].T, strict=True)]
    if len(fits) > 1:
        fits = [f for f in fits if f[0] * k == drafted] or fits
    if not fits:
        span = f"N in {lo_n}..{hi_n}" if lo_n <= hi_n and lo_n > 0 else "no N"
        raise ctx.error(f"counts cannot be recovered exactly: {span} fits mean length {mean} "
                        f"and {accepted} accepted, but none turns the rates ({rates_text}) into "
                        f"whole counts summing to {accepted} (3 decimals fix them only below "
                        f"~1000 rounds a line: use the Prometheus counters)", lineno)
    if len(fits) > 1:
        raise ctx.error(f"counts cannot be recovered exactly: {len(fits)} round counts N "
                        f"({fits[0][0]}..{fits[-1][0]}) reproduce the line", lineno)
    n, counts = fits[0]
    ctx.check_drafted(drafted, n, k, lineno)
    return AcceptanceCounts(n, counts, ctx.source)
