"""Log lines that print acceptance *rates* -> counters per draft length.

Read from the engines' source (stored index; commits named):

- **vLLM** ``SpecDecodingLogging.log`` (``vllm/v1/spec_decode/metrics.py`` at
  ee4ceaae5953d367d8edd2132fd86d6c42506e1e), one line per logging interval: ``SpecDecoding
  metrics: Mean acceptance length: %.2f, Accepted throughput: %.2f tokens/s, Drafted
  throughput: %.2f tokens/s, Accepted: %d tokens, Drafted: %d tokens, Per-position acceptance
  rate: %s, Avg Draft acceptance rate: %.1f%%``, the rates ``%.3f`` of the interval's
  per-position sums / drafts. An interval that observed no draft prints ``nan`` (0 / 0): such
  a line is skipped and counted. ``--lines sum`` pools the intervals, ``last`` takes the last.
- **llama-server** per-request line (``tools/server/server-context.cpp``, PR
  ggml-org/llama.cpp#24536): ``draft acceptance = %0.5f (%5d accepted / %5d generated), mean
  acceptance length = %5.2f, acceptance rate per position = (%.3f, ...)``, later ``..., mean
  len = %5.2f`` with ``acc per pos = (...)`` on the next line (trace verbosity); summed.
  Older lines without positions are refused.
- **llama.cpp** ``statistics`` line (``common/speculative.cpp``,
  ``common_speculative_print_stats``, ggml-org/llama.cpp; the index's versions print up to
  ``#acc tokens``, current builds append ``, #mean acc len = %.2f, #acc rate/pos = (%.3f,
  ...)`` once a draft was accepted, as the llama-server logs quoted in the tests show; no
  commit of that form could be pinned): ``statistics %16s: #calls(b,g,a) = ..., #gen drafts
  = N, #acc drafts = a_1,
  #gen tokens = drafted, #acc tokens = accepted, ...``. N and a_1 are printed as counts. The
  numbers are cumulative for one slot's drafter, so the last line of each (slot, drafter
  type) is taken and slots are summed; several drafter types are refused unless
  ``--label type=NAME`` picks one.

A line gives the totals as counts, the positions as rates to 3 decimals: :func:`recover` finds
the counts that print as the line. Below ~1000 rounds a line they are unique; above, several
whole counts print alike, so the line is read at a central value with each a_i's slack (the
width of its printed unit) carried into the intervals (:mod:`.rounding`) and flagged. N must
be pinned: printed (statistics), Drafted = N x K, or the only N the mean length allows.
"""

from __future__ import annotations

import re
from fractions import Fraction
from math import ceil, floor
from typing import NoReturn, TypedDict, Unpack

import numpy as np

from specsim.acceptance.counts import AcceptanceCounts
from specsim.acceptance.formats.context import ReadContext
from specsim.acceptance.formats.rounding import rounded

__all__ = ["llamacpp", "llamacpp_stats", "recover", "vllm_log"]

_NUM = r"(\d+(?:\.\d+)?)"
_RATES = r"(\d+\.\d+(?:\s*,\s*\d+\.\d+)*)"
_VLLM_FAST = re.compile(r"Mean acceptance length: (\d+\.\d+), .*?Accepted: (\d+) tokens, "
                        r"Drafted: (\d+) tokens, Per-position acceptance rate: " + _RATES)
_VLLM = {"mean": rf"Mean acceptance length: {_NUM}", "accepted": r"Accepted: (\d+) tokens",
         "drafted": r"Drafted: (\d+) tokens", "rates": rf"Per-position acceptance rate: {_RATES}"}
_LLAMA = re.compile(r"draft acceptance(?: rate)? = \s*" + _NUM + r"\s*\(\s*(\d+) accepted "
                    r"/\s*(\d+) generated\)(?:, mean (?:acceptance length|len) =\s*" + _NUM + r")?"
                    r"(?:, acceptance rate per position = \(" + _RATES + r"\))?")
_LLAMA_POS = re.compile(r"acc per pos = \(" + _RATES + r"\)")
_STATS = re.compile(r"statistics\s+(\S+): #calls\(b,g,a\) =\s*\d+\s+\d+\s+\d+, #gen drafts =\s*"
                    r"(\d+), #acc drafts =\s*(\d+), #gen tokens =\s*(\d+), #acc tokens =\s*(\d+)"
                    r"(?:, #mean acc len = " + _NUM + r", #acc rate/pos = \(" + _RATES + r"\))?")
_SLOT = re.compile(r"\bid\s+(\d+) \|")

Row = tuple[int, int, int, str, str]  # lineno, accepted, drafted, mean, rates
Line = tuple[int, int, str, str]  # accepted, drafted, mean, rates: what recover() reads


class Known(TypedDict, total=False):
    """What a line may also print: its rounds ``n`` and first position's accepted ``a1``."""

    n: int
    a1: int


class _Pool:
    """Lines pooled as they are read (bounded memory): totals, slack, which were rounded."""

    def __init__(self, ctx: ReadContext) -> None:
        self.ctx, self.n, self.a, self.slack = ctx, 0, [0], [0]
        self.lines = self.rounded = 0
        self.pending: tuple[int, Line, Known] | None = None

    def take(self, lineno: int, *line: *Line, **known: Unpack[Known]) -> None:
        """One line: recovered now, or (``--lines last``) kept until it is the last."""
        if self.ctx.options.lines == "last":
            self.pending = (lineno, line, known)
            return
        self.add(lineno, *recover(lineno, *line, self.ctx, **known))

    def add(self, lineno: int, c: AcceptanceCounts, slack: tuple[int, ...]) -> None:
        if self.lines and c.max_gamma != len(self.a):
            raise self.ctx.error(f"{c.max_gamma} positions, earlier lines {len(self.a)}: one "
                                 f"draft length per file", lineno)
        if not self.lines:
            self.a, self.slack = [0] * c.max_gamma, [0] * c.max_gamma
        self.n += c.rounds
        self.a = [x + y for x, y in zip(self.a, c.accepted, strict=True)]
        self.slack = [x + y for x, y in zip(self.slack, slack, strict=True)]
        self.lines += 1
        self.rounded += any(slack)

    def result(self, what: str) -> dict[int, AcceptanceCounts]:
        if self.pending is not None:
            lineno, line, known = self.pending
            c, slack = recover(lineno, *line, self.ctx, **known)
            self.lines, self.rounded, self.n = 1, int(any(slack)), c.rounds
            self.a, self.slack = list(c.accepted), list(slack)
        if not self.lines:
            raise self.ctx.error(what)
        counts = self.ctx.counts(self.n, self.a)
        why = ""
        if self.rounded:
            why = (f"{self.rounded} of {self.lines} lines print rates that several whole counts "
                   f"match (3 decimals pin them only below ~1000 rounds a line): their rounding "
                   f"is carried into the intervals")
            self.ctx.note(why)
        return {counts.max_gamma: rounded(counts, self.slack, why=why)}


def vllm_log(ctx: ReadContext) -> dict[int, AcceptanceCounts]:
    pool, idle = _Pool(ctx), 0
    with ctx.open() as f:
        for lineno, line in enumerate(f, 1):
            if "SpecDecoding metrics:" not in line:
                continue
            body = line.split("SpecDecoding metrics:", 1)[1]
            m = _VLLM_FAST.search(body)
            if m is None:
                if "Mean acceptance length: nan" in body:
                    idle += 1
                    continue
                got = {k: re.search(r, body) for k, r in _VLLM.items()}
                absent = [_VLLM[k].split(":")[0] for k, g in got.items() if g is None]
                if "Per-position acceptance rate" in absent:
                    raise ctx.error("no 'Per-position acceptance rate': the counts per "
                                    "position are needed", lineno)
                raise ctx.error(f"rates without counts: no {', '.join(map(repr, absent))}",
                                lineno)
            mean, acc, drafted, rates = m.groups()
            pool.take(lineno, int(acc), int(drafted), mean, rates)
    if idle:
        ctx.note(f"{idle} idle 'nan' lines (intervals with no draft) skipped")
    return pool.result("no 'SpecDecoding metrics:' line with counts")


def llamacpp(ctx: ReadContext) -> dict[int, AcceptanceCounts]:
    pool = _Pool(ctx)
    pending: tuple[int, int, int, str] | None = None
    with ctx.open() as f:
        for lineno, line in enumerate(f, 1):
            if pending is not None:
                nxt = _LLAMA_POS.search(line)
                if nxt is None:
                    _no_positions(pending[0], ctx)
                pool.take(pending[0], *pending[1:], nxt.group(1))
                pending = None
            m = _LLAMA.search(line)
            if m is None:
                continue
            _, accepted, generated, mean, rates = m.groups()
            if mean is None:
                _no_positions(lineno, ctx)
            if rates is None:
                pending = (lineno, int(accepted), int(generated), mean)
                continue
            pool.take(lineno, int(accepted), int(generated), mean, rates)
    if pending is not None:
        _no_positions(pending[0], ctx)
    return pool.result("no llama.cpp 'draft acceptance = ... (A accepted / G generated)' line")


def _no_positions(lineno: int, ctx: ReadContext) -> NoReturn:
    raise ctx.error("draft acceptance without per-position rates (and mean length): the counts "
                    "per position cannot be recovered ('acc per pos' needs trace verbosity; the "
                    "'statistics ... #acc rate/pos' lines carry them: --format llamacpp-stats; "
                    "or scrape llama-server's /metrics)", lineno)


def llamacpp_stats(ctx: ReadContext) -> dict[int, AcceptanceCounts]:
    last: dict[tuple[str, str], tuple[int, re.Match[str]]] = {}
    slot = ""
    with ctx.open() as f:
        for lineno, line in enumerate(f, 1):
            if "statistics" not in line:
                if "slot" in line and (s := _SLOT.search(line)):
                    slot = s.group(1)
                continue
            m = _STATS.search(line)
            if m is not None:
                last[(slot, m.group(1))] = (lineno, m)
    kinds = sorted({t for _, t in last})
    want = ctx.labels.get("type")
    if want is not None:
        if want not in kinds:
            raise ctx.error(f"--label type={want}: no statistics line of it (types: "
                            f"{', '.join(kinds)})")
        kinds = [want]
    used = {k: v for k, v in last.items() if k[1] in kinds and int(v[1].group(2)) > 0}
    if len({t for _, t in used}) > 1:
        names = ", ".join(sorted({t for _, t in used}))
        raise ctx.error(f"statistics lines of several drafters ({names}): choose one with "
                        f"--label type={sorted({t for _, t in used})[0]}")
    if not used:
        raise ctx.error("no llama.cpp 'statistics ... #gen drafts = N' line with drafts")
    pool = _Pool(ctx)
    for (_, kind), (lineno, m) in sorted(used.items(), key=lambda kv: kv[1][0]):
        n, a1, drafted, accepted, mean, rates = m.groups()[1:]
        if rates is None:
            raise ctx.error(f"statistics {kind}: no '#acc rate/pos': the counts per position "
                            f"are not in the line (a build printing them is needed)", lineno)
        pool.take(lineno, int(accepted), int(drafted), mean, rates, n=int(n), a1=int(a1))
    return pool.result("no statistics line")


def _digits(s: str) -> tuple[int, int]:
    """A printed decimal as (integer of its digits, number of decimals)."""
    whole, _, frac = s.partition(".")
    return int(whole + frac), len(frac)


def _bands(n: int, rates: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """[lo, hi] of each a_i whose a_i / n prints as the rate (half a unit either side)."""
    return [(-((-(2 * r - 1) * n) // (2 * 10**d)), ((2 * r + 1) * n) // (2 * 10**d))
            for r, d in rates]


def _central(n: int, bands: list[tuple[int, int]], rates: list[tuple[int, int]],
             accepted: int) -> list[int] | None:
    """Counts within their bands, summing to ``accepted``, non-increasing; None if none."""
    a = [min(max(round(r * n / 10**d), lo), hi) for (lo, hi), (r, d) in zip(bands, rates,
                                                                         strict=True)]
    for i in range(1, len(a)):
        a[i] = min(a[i], a[i - 1])
    gap = accepted - sum(a)
    order = range(len(a)) if gap > 0 else reversed(range(len(a)))
    for i in order:
        if gap == 0:
            break
        room = (min(bands[i][1], a[i - 1] if i else n) - a[i]) if gap > 0 else \
            (max(bands[i][0], a[i + 1] if i + 1 < len(a) else 0) - a[i])
        step = max(min(gap, room), 0) if gap > 0 else min(max(gap, room), 0)
        a[i] += step
        gap -= step
    ok = gap == 0 and all(lo <= x <= hi for x, (lo, hi) in zip(a, bands, strict=True))
    return a if ok and all(a[i] <= (a[i - 1] if i else n) for i in range(len(a))) else None


def recover(lineno: int, accepted: int, drafted: int, mean: str, rates_text: str,
            ctx: ReadContext, n: int | None = None,
            a1: int | None = None) -> tuple[AcceptanceCounts, tuple[int, ...]]:
    """The counts that print as this line and each one's slack (0: pinned), or a refusal."""
    rates = [_digits(r.strip()) for r in rates_text.split(",")]
    k = len(rates)
    if n is None and drafted % k == 0 and drafted:  # the usual case first: Drafted = N x K
        got = _at(drafted // k, accepted, mean, rates, a1)
        if got is not None:
            ctx.drafted(drafted, drafted // k, k, lineno)
            return ctx.counts(drafted // k, got[0]), got[1]
    ns = [n] if n is not None else _round_counts(lineno, accepted, drafted, mean, k, ctx)
    exact = _exact(np.array(ns, dtype=np.int64), accepted, rates, a1)
    if len(exact) > 1:
        exact = [f for f in exact if f[0] * k == drafted] or exact
    if len(exact) == 1:
        n0, counts = exact[0]
        ctx.drafted(drafted, n0, k, lineno)
        return ctx.counts(n0, counts), (0,) * k
    pinned = n if n is not None else (drafted // k if drafted % k == 0 and drafted // k in ns
                                      else (ns[0] if len(ns) == 1 else None))
    got = _at(pinned, accepted, mean, rates, a1) if pinned else None
    if pinned is None or got is None:
        span = f"N in {ns[0]}..{ns[-1]}" if ns else "no N"
        raise ctx.error(f"counts cannot be recovered: {span} fits mean length {mean} and "
                        f"{accepted} accepted, and no one N turns the rates ({rates_text}) "
                        f"into whole counts summing to {accepted} (use the engine's "
                        f"Prometheus counters)", lineno)
    ctx.drafted(drafted, pinned, k, lineno)
    return ctx.counts(pinned, got[0]), got[1]


def _at(n: int, accepted: int, mean: str, rates: list[tuple[int, int]],
        a1: int | None) -> tuple[list[int], tuple[int, ...]] | None:
    """At a given N: the central counts and their slacks, if N fits the line."""
    if n <= 0 or (accepted and f"{1 + accepted / n:.{_digits(mean)[1]}f}" != mean):
        return None
    bands = _bands(n, rates)
    if a1 is not None:
        if not bands[0][0] <= a1 <= bands[0][1]:
            return None
        bands[0] = (a1, a1)
    a = _central(n, bands, rates, accepted)
    return None if a is None else (a, tuple(hi - lo for lo, hi in bands))


def _round_counts(lineno: int, accepted: int, drafted: int, mean: str, k: int,
                  ctx: ReadContext) -> list[int]:
    """Every N the printed mean length 1 + accepted / N and the drafted total allow."""
    m, e = _digits(mean)
    lo_n, hi_n = max(ceil(drafted / k), 1), max(drafted, 1)  # each round drafts 1..K tokens
    if accepted == 0:  # mean 1.00 says nothing of N: only Drafted = N*K does
        return [drafted // k] if drafted % k == 0 and drafted else []
    over = Fraction(2 * m + 1 - 2 * 10**e, 2 * 10**e)
    under = Fraction(2 * m - 1 - 2 * 10**e, 2 * 10**e)
    if over <= 0:
        raise ctx.error(f"mean acceptance length {mean} with {accepted} accepted", lineno)
    lo_n = max(lo_n, ceil(accepted / over))
    if under > 0:
        hi_n = min(hi_n, floor(accepted / under))
    if hi_n - lo_n > 10**7:
        raise ctx.error(f"counts cannot be recovered: mean length {mean} leaves "
                        f"{hi_n - lo_n + 1} round counts N", lineno)
    return list(range(lo_n, hi_n + 1))


def _exact(ns: np.ndarray, accepted: int, rates: list[tuple[int, int]],
           a1: int | None) -> list[tuple[int, tuple[int, ...]]]:
    """Every N with one whole count per rate, summing to ``accepted``, non-increasing."""
    if ns.size == 0:
        return []
    a = np.empty((len(rates), ns.size), dtype=np.int64)
    ok = np.ones(ns.size, dtype=bool)
    for i, (r, d) in enumerate(rates):
        lo = -((-(2 * r - 1) * ns) // (2 * 10**d))
        a[i] = ((2 * r + 1) * ns) // (2 * 10**d)
        ok &= lo == a[i]
    if a1 is not None:
        ok &= a[0] == a1
    prev = np.vstack([ns, a[:-1]])
    ok &= (a.sum(axis=0) == accepted) & (a <= prev).all(axis=0)
    return [(int(n), tuple(int(x) for x in col)) for n, col in zip(ns[ok], a[:, ok].T,
                                                                   strict=True)]
