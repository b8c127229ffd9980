"""An engine's speculative-decoding metrics files -> :class:`~.counts.AcceptanceCounts`.

Formats (each from the engine's source, named in its module's docstring):

``prometheus`` -- a ``/metrics`` scrape: vLLM ``vllm:spec_decode_*`` (also OpenMetrics-escaped
  ``vllm_spec_decode_*``), llama-server ``llamacpp:spec_decode_*``, TensorRT-LLM
  ``trtllm_spec_decode_{drafted,accepted}_tokens_total{token_position}``
  (:mod:`.formats.scrapes`);
``vllm-log`` -- vLLM's ``SpecDecoding metrics:`` interval lines; ``llamacpp`` -- llama-server's
  per-request ``draft acceptance = ...`` lines; ``llamacpp-stats`` -- llama.cpp's ``statistics
  ... #acc rate/pos`` lines (:mod:`.formats.loglines`);
``histograms`` -- per-request JSON (a document, JSON lines, or an SSE ``data:`` capture): vLLM
  ``metrics.speculative_decoding``, SGLang ``sglext.spec_tokens_details`` / ``meta_info``
  (:mod:`.formats.requests`).

``format="auto"`` detects JSON by parsing it (a log whose lines start with ``[`` is a log),
then an SSE capture by its ``data:`` lines, then the engine's lines (llama.cpp: its per-request
lines where they carry positions, else its ``statistics`` lines).

Each file yields counters per draft length K (:mod:`.formats.context`); several files are
pooled per K. One K is then used: ``--draft-length K``, else the largest K carrying rounds;
:class:`Reading` says which, which others the data held, and every note (drafts cut short,
rounds skipped, rounding carried into the intervals). ``--baseline`` files (scrapes before the
run) pair with the ``--metrics`` files in order. Every refusal is one :class:`MetricsError`
line naming the file (and line or series) and the flag that helps.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from specsim.acceptance import prometheus as prom
from specsim.acceptance.counts import AcceptanceCounts
from specsim.acceptance.formats import loglines, requests, scrapes
from specsim.acceptance.formats.context import MetricsError, ReadContext, ReadOptions
from specsim.acceptance.formats.rounding import pooled

__all__ = ["FORMATS", "MetricsError", "ReadOptions", "Reading", "read_counts", "read_file",
           "read_many", "read_metrics", "to_prometheus"]

FORMATS = ("prometheus", "vllm-log", "llamacpp", "llamacpp-stats", "histograms")
MAX_JSON_BYTES = 256 << 20
_HEAD = 1 << 16
CUT_SHORT = ("drafts cut short per round (--short-drafts): tokens per call is exact for the "
             "engine as it ran; the cost (fewer than K drafts a round) and the tail beyond K "
             "are not those of a fixed K")


@dataclass(frozen=True)
class Reading:
    """What the metrics files say: the counters at the K used, every K they carry (rounds
    each), whether drafts were cut short, and the notes to print."""

    counts: AcceptanceCounts
    gamma: int
    by_length: Mapping[int, int]
    cut_short: bool
    notes: tuple[str, ...]

    def summary(self) -> str:
        """Lines for the output: the K used and why, then every note."""
        lengths = ", ".join(f"K={k}: {n} rounds" for k, n in sorted(self.by_length.items()))
        head = f"counters at draft length K = {self.gamma} ({self.counts.rounds} rounds)"
        if len(self.by_length) > 1:
            head += f"; the data hold {lengths} (--draft-length to choose)"
        return "\n".join([head, *(f"  note: {n}" for n in self.notes)])


def to_prometheus(counts: AcceptanceCounts, labels: Mapping[str, str] | None = None) -> str:
    """``counts`` as vLLM's four counters (:func:`.prometheus.to_prometheus`)."""
    return prom.to_prometheus(counts.rounds, counts.accepted, labels)


def _detect(path: Path, fmt: str) -> tuple[str, str | None]:
    """The format and, for a JSON document, its text. JSON is detected by parsing: the
    file's head is parsed, and only a head cut off mid-document is worth reading whole (a log
    whose lines start with ``[`` fails within its first line and is read a line at a time)."""
    size = path.stat().st_size
    with path.open(encoding="utf-8") as f:
        head = f.read(_HEAD)
    whole_head = size <= len(head.encode())
    if not head.strip() and whole_head:
        raise MetricsError(f"{path}: empty file")
    if fmt in ("auto", "histograms") and head.lstrip()[:1] in ("[", "{"):
        try:
            json.loads(head)
            return "histograms", head
        except json.JSONDecodeError as e:
            if e.msg == "Extra data":  # one value, then more: JSON lines
                return "histograms", None
            cut = not whole_head and (e.pos >= len(head.rstrip()) - 1
                                      or e.msg.startswith("Unterminated string"))
            if cut and size > MAX_JSON_BYTES:
                raise MetricsError(f"{path}: a JSON document of {size} bytes, more than "
                                   f"{MAX_JSON_BYTES >> 20} MiB: write it as JSON lines "
                                   f"(one response a line)") from None
            if cut:
                whole = path.read_text(encoding="utf-8")
                try:
                    json.loads(whole)
                    return "histograms", whole
                except json.JSONDecodeError as e2:
                    e = e2
            if fmt == "histograms" or not _has_marker(path):
                raise MetricsError(f"{path}:{e.lineno}: not JSON: {e.msg} (column "
                                   f"{e.colno})") from None
    if fmt != "auto":
        return fmt, None
    if any(ln.lstrip().startswith("data:") for ln in head.splitlines()[:50]):
        return "histograms", None
    found = _has_marker(path)
    if found:
        return found, None
    raise MetricsError(f"{path}: unknown format: not JSON, no vllm:spec_decode_* / llamacpp: / "
                       f"trtllm_spec_decode_* counter, no 'SpecDecoding metrics:' line, no "
                       f"llama.cpp 'draft acceptance' or 'statistics' line (--format to name "
                       f"one: {', '.join(FORMATS)})")


def _has_marker(path: Path) -> str:
    """The first engine line's format, reading the file a line at a time."""
    llama = ""
    with path.open(encoding="utf-8") as f:
        for line in f:
            s = line.lstrip()
            if s.startswith(scrapes.PREFIXES) or (s.startswith("# TYPE ") and
                                                  s[7:].startswith(scrapes.PREFIXES)):
                return "prometheus"
            if "SpecDecoding metrics:" in line:
                return "vllm-log"
            if "acceptance rate per position" in line or "acc per pos" in line:
                return "llamacpp"  # per-request lines with positions: summed per request
            if "#acc rate/pos" in line:
                llama = "llamacpp-stats"
            elif "draft acceptance" in line and not llama:
                llama = "llamacpp"
    return llama


def read_file(path: str | Path, options: ReadOptions | None = None,
              baseline: str | Path | None = None) -> tuple[dict[int, AcceptanceCounts],
                                                           ReadContext]:
    """One file's counters per draft length, and its read context (notes, cut short)."""
    options = options or ReadOptions()
    p = Path(path)
    if options.lines not in ("sum", "last"):
        raise MetricsError(f"{p}: --lines {options.lines}: choose sum or last")
    if options.format != "auto" and options.format not in FORMATS:
        raise MetricsError(f"{p}: unknown --format {options.format} (known: "
                           f"{', '.join(FORMATS)})")
    try:
        fmt, whole = _detect(p, options.format)
        ctx = ReadContext(p, fmt, options)
        if baseline is not None and fmt != "prometheus":
            raise ctx.error(f"--baseline {baseline}: a baseline is the scrape before the run; "
                            f"this file is {fmt}, not a Prometheus scrape")
        if fmt == "prometheus":
            found = scrapes.read_scrape(ctx, Path(baseline) if baseline else None)
        elif fmt == "histograms":
            with p.open(encoding="utf-8") as f:
                items = requests.entries(enumerate(f, 1), whole, ctx)
            found = requests.read_requests(items, ctx)
        else:
            found = {"vllm-log": loglines.vllm_log, "llamacpp": loglines.llamacpp,
                     "llamacpp-stats": loglines.llamacpp_stats}[fmt](ctx)
    except OSError as e:
        where = e.filename if getattr(e, "filename", None) else p
        raise MetricsError(f"{where}: cannot read: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise MetricsError(f"{p}: not UTF-8 text (byte {e.start})") from None
    except MetricsError:
        raise
    except ValueError as e:  # AcceptanceCounts' own checks
        raise MetricsError(str(e) if str(e).startswith(str(p)) else f"{p}: {e}") from None
    return found, ctx


def read_counts(paths: Iterable[str | Path], options: ReadOptions | None = None,
                baselines: Sequence[str | Path] = ()) -> Reading:
    """Several files' counters pooled per K, one K chosen (module docstring)."""
    options = options or ReadOptions()
    paths = list(paths)
    if not paths:
        raise MetricsError("no metrics file given")
    if baselines and len(baselines) != len(paths):
        raise MetricsError(f"--baseline: {len(baselines)} files for {len(paths)} --metrics "
                           f"files: give one baseline per metrics file, in the same order")
    by: dict[int, AcceptanceCounts] = {}
    notes: list[str] = []
    cut = False
    files: dict[int, list[str]] = {}
    for i, p in enumerate(paths):
        found, ctx = read_file(p, options, baselines[i] if baselines else None)
        notes += ctx.notes
        cut |= ctx.cut_short
        for k, c in found.items():
            by[k] = pooled(by[k], c) if k in by else c
            files.setdefault(k, []).append(str(p))
    rounds = {k: c.rounds for k, c in by.items()}
    want = options.draft_length
    if want is not None:
        if want not in by:
            have = ", ".join(f"K={k} ({n} rounds)" for k, n in sorted(rounds.items()))
            raise MetricsError(f"--draft-length {want}: the metrics hold no rounds at K = "
                               f"{want} (they hold {have})")
        k = want
    else:
        k = max(by)
    unused = sorted({f for kk, fs in files.items() if kk != k for f in fs} - set(files[k]))
    if unused:
        notes.append(f"not used (no rounds at K = {k}): {', '.join(unused)}")
    if cut:
        notes.append(CUT_SHORT)
    return Reading(by[k], k, rounds, cut, tuple(dict.fromkeys(notes)))


def read_metrics(path: str | Path, format: str = "auto", labels: Mapping[str, str] | None = None,
                 lines: str = "sum", draft_length: int | None = None,
                 short_drafts: bool = False, sum_series: bool = False) -> AcceptanceCounts:
    """The counters in one metrics file, at the K :func:`read_counts` would choose."""
    opts = ReadOptions(format, labels or {}, lines, draft_length, short_drafts, sum_series)
    return read_counts([path], opts).counts


def read_many(paths: Iterable[str | Path], format: str = "auto",
              labels: Mapping[str, str] | None = None, lines: str = "sum",
              draft_length: int | None = None, short_drafts: bool = False,
              sum_series: bool = False) -> AcceptanceCounts:
    """Several files' counters pooled (:func:`read_counts`), at the K it chooses."""
    opts = ReadOptions(format, labels or {}, lines, draft_length, short_drafts, sum_series)
    return read_counts(paths, opts).counts
