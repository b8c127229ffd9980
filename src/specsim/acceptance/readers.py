"""An engine's speculative-decoding metrics file -> :class:`~.counts.AcceptanceCounts`.

Each format is taken from the engine's source (the repositories are too large to fetch whole
here; files were read from a stored index at the commits named; for SGLang's and llama-server's
lines no commit of the file could be pinned, so the PR that wrote the line is named):

``prometheus`` -- vLLM's ``/metrics`` scrape (:mod:`.prometheus`): ``vllm:spec_decode_num_drafts_
  total`` (N), ``..._num_draft_tokens_total``, ``..._num_accepted_tokens_total`` and
  ``..._num_accepted_tokens_per_pos_total{position="i"}`` (a_{i+1}, 0-based), labels
  ``model_name``, ``engine``. ``labels={"engine": "0"}`` picks series; several left -> refused.
  Checked: positions 0..K-1 all present, sum of a_i == accepted tokens.
``vllm-log`` -- ``SpecDecodingLogging.log`` (``vllm/v1/spec_decode/metrics.py`` at
  ee4ceaae5953d367d8edd2132fd86d6c42506e1e): ``SpecDecoding metrics: Mean acceptance length:
  %.2f, Accepted throughput: %.2f tokens/s, Drafted throughput: %.2f tokens/s, Accepted: %d
  tokens, Drafted: %d tokens, Per-position acceptance rate: %s, Avg Draft acceptance rate:
  %.1f%%``, the rates ``%.3f`` of sum(per-pos counts) / num_drafts over the interval.
``llamacpp`` -- llama-server's per-request line (``tools/server/server-context.cpp``, PR
  ggml-org/llama.cpp#24536, June 2026): ``draft acceptance = %0.5f (%5d accepted / %5d
  generated), mean acceptance length = %5.2f, acceptance rate per position = (%.3f, ...)``
  and its later form ``..., mean len = %5.2f`` with the rates on the next line ``acc per pos =
  (...)`` (``SLT_TRC``: trace verbosity only); mean = 1 + accepted / n_draft_verif_steps,
  rate_i = n_accepted_per_pos[i] / n_draft_verif_steps. Older lines (``draft acceptance rate =
  ...``) carry no positions: refused; examples/speculative prints only totals (``n_drafted``,
  ``n_accept``, examples/speculative/speculative.cpp at fe0686164dc1b6cadca7d96115b9c33c59471a5f):
  not a format here.
``histograms`` -- JSON: a list (or JSON lines) of per-request histograms h_0..h_K, h_j the
  rounds that accepted exactly j drafts: vLLM ``acceptance_histogram`` (docs/features/
  speculative_decoding/acceptance_metrics.md at cd199986df1171c3255ce2e07e2c63be4385ef9f: a
  sparse ``{"j": count}`` map under a choice's ``speculative_decoding_stats``, with
  ``num_spec_tokens`` = K, ``num_spec_steps`` = sum h, ``num_accepted_draft_tokens`` =
  sum j h_j, both checked; PR vllm-project/vllm#48915 wrote a dense list under
  ``metrics.speculative_decoding``), SGLang ``spec_accept_histogram`` (PR sgl-project/sglang
  #18332, ``Req.update_spec_acceptance_histogram`` in ``managers/schedule_batch.py``: index =
  accepted drafts, grown only as far as the longest accepted run, so K is the longest list
  unless an entry says ``num_spec_tokens``; under ``meta_info`` in a response), alias
  ``spec_correct_drafts_histogram``; or bare lists. Entries without a histogram (no speculation
  ran) are skipped.

Logs (``vllm-log``, ``llamacpp``) print rates, not counts: N is recovered from the mean
acceptance length and Accepted, a_i = rate_i * N, and every candidate (N, a) must reproduce the
printed digits, sum to Accepted and be monotone; a unique one is taken (among several, the one
with N*K = Drafted), else the file is refused -- 3-decimal rates fix a_i only below ~1000
rounds per line. ``lines="sum"`` recovers each line and pools them; ``"last"`` takes the last.

Draft tokens vs N*K: more is refused; fewer means some rounds drafted fewer than K tokens
(trimmed, dynamic or confidence-cut drafts), and a_i/N then mixes draft lengths -- refused
unless ``allow_short_drafts=True``. Format autodetection (``format="auto"``): JSON if the text
starts with ``[`` or ``{``; ``prometheus`` if a line starts with ``vllm:spec_decode_`` or
``# TYPE vllm:spec_decode_``; ``vllm-log`` if a line holds ``SpecDecoding metrics:``;
``llamacpp`` if one holds ``draft acceptance``. Every refusal is one :class:`MetricsError`
line naming the file (and line).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from specsim.acceptance import loglines
from specsim.acceptance import prometheus as prom
from specsim.acceptance.counts import AcceptanceCounts

__all__ = ["FORMATS", "MetricsError", "read_many", "read_metrics", "to_prometheus"]

FORMATS = ("prometheus", "vllm-log", "llamacpp", "histograms")
MAX_BYTES = 256 << 20


class MetricsError(ValueError):
    """A metrics file refused: ``str(err)`` is one line naming the file and what is wrong."""


def to_prometheus(counts: AcceptanceCounts, labels: Mapping[str, str] | None = None) -> str:
    """``counts`` as vLLM's four counters (:func:`.prometheus.to_prometheus`)."""
    return prom.to_prometheus(counts.rounds, counts.accepted, labels)


def read_metrics(path: str | Path, format: str = "auto", labels: Mapping[str, str] | None = None,
                 lines: str = "sum", allow_short_drafts: bool = False) -> AcceptanceCounts:
    """The acceptance counters in one metrics file (module docstring: formats, checks)."""
    p = Path(path)
    if lines not in ("sum", "last"):
        raise MetricsError(f"{p}: lines={lines!r}: choose 'sum' or 'last'")
    try:
        if p.stat().st_size > MAX_BYTES:
            raise MetricsError(f"{p}: {p.stat().st_size} bytes, more than a metrics file "
                               f"holds ({MAX_BYTES >> 20} MiB)")
        text = p.read_bytes().decode("utf-8")
    except OSError as e:
        raise MetricsError(f"{p}: cannot read: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise MetricsError(f"{p}: not UTF-8 text (byte {e.start})") from None
    if not text.strip():
        raise MetricsError(f"{p}: empty file")
    fmt = _detect(p, text) if format == "auto" else format
    if fmt not in FORMATS:
        raise MetricsError(f"{p}: unknown format {fmt!r} (known: {', '.join(FORMATS)})")
    reader = {"prometheus": _prometheus, "vllm-log": loglines.vllm_log,
              "llamacpp": loglines.llamacpp, "histograms": _histograms}[fmt]
    ctx = ReadContext(p, fmt, labels or {}, lines, allow_short_drafts)
    try:
        return reader(text, ctx)
    except ValueError as e:  # AcceptanceCounts' own checks; MetricsError passes through
        if isinstance(e, MetricsError):
            raise
        raise MetricsError(str(e) if str(e).startswith(str(p)) else f"{p}: {e}") from None


def read_many(paths: Iterable[str | Path], format: str = "auto",
              labels: Mapping[str, str] | None = None, lines: str = "sum",
              allow_short_drafts: bool = False) -> AcceptanceCounts:
    """Several files' counters pooled (each read by :func:`read_metrics`; one K for all)."""
    counts = [read_metrics(p, format, labels, lines, allow_short_drafts) for p in paths]
    if not counts:
        raise MetricsError("no metrics file given")
    total = counts[0]
    for c in counts[1:]:
        try:
            total = total + c
        except ValueError as e:
            raise MetricsError(str(e)) from None
    return total


class ReadContext:
    """One read: the file, its format and the caller's choices; makes its refusals."""

    def __init__(self, path: Path, fmt: str, labels: Mapping[str, str], lines: str,
                 allow_short: bool) -> None:
        self.path, self.fmt, self.lines = path, fmt, lines
        self.labels = {str(k): str(v) for k, v in labels.items()}
        self.allow_short = allow_short
        self.source = f"{path} ({fmt})"

    def error(self, msg: str, lineno: int = 0) -> MetricsError:
        return MetricsError(f"{self.path}:{lineno}: {msg}" if lineno else f"{self.path}: {msg}")

    def check_drafted(self, drafted: int, n: int, k: int, lineno: int = 0, what: str = "") -> None:
        if drafted > n * k:
            raise self.error(f"{what}{drafted} draft tokens exceed {n} rounds x {k} positions",
                             lineno)
        if drafted < n * k and not self.allow_short:
            raise self.error(f"{what}{drafted} draft tokens < {n} rounds x {k} positions: some "
                             f"rounds drafted fewer than K={k} tokens (dynamic or trimmed "
                             f"drafts), so a_i/N mixes draft lengths; pass "
                             f"allow_short_drafts=True to take the counts as they are", lineno)


def _detect(path: Path, text: str) -> str:
    head = text.lstrip()[:1]
    if head in ("[", "{"):
        return "histograms"
    if re.search(r"^\s*(# TYPE )?vllm:spec_decode_", text, re.M):
        return "prometheus"
    if "SpecDecoding metrics:" in text:
        return "vllm-log"
    if "draft acceptance" in text:
        return "llamacpp"
    raise MetricsError(f"{path}: unknown format: not JSON, no vllm:spec_decode_* counter, no "
                       f"'SpecDecoding metrics:' line, no llama.cpp 'draft acceptance' line")


# ---------------------------------------------------------------------------- prometheus
def _prometheus(text: str, ctx: ReadContext) -> AcceptanceCounts:
    try:
        samples = [s for s in prom.parse_exposition(text) if s.name in prom.COUNTERS]
    except prom.ExpositionError as e:
        raise ctx.error(str(e), e.lineno) from None
    if not samples:
        raise ctx.error("no vllm:spec_decode_* counters (was speculative decoding on?)")
    for key, want in ctx.labels.items():
        have = sorted({v for s in samples if (v := s.label(key)) is not None})
        if not have:
            names = sorted({k for s in samples for k, _ in s.labels} - {"position"})
            raise ctx.error(f"no label {key!r} on the counters (labels: {', '.join(names)})")
        if want not in have:
            raise ctx.error(f"no counters with {key}={want!r} (values: {', '.join(have)})")
    samples = [s for s in samples if all(s.label(k) == v for k, v in ctx.labels.items())]
    groups: dict[tuple[tuple[str, str], ...], list[prom.Sample]] = {}
    for s in samples:
        groups.setdefault(tuple(sorted(x for x in s.labels if x[0] != "position")), []).append(s)
    if len(groups) > 1:
        keys = sorted({k for g in groups for k, _ in g})
        mixed = [(k, sorted({dict(g).get(k, "") for g in groups})) for k in keys]
        mixed = [(k, vs) for k, vs in mixed if len(vs) > 1]
        what = " and ".join(f"label {k!r} ({', '.join(map(repr, vs))})" for k, vs in mixed)
        k0, v0 = mixed[0][0], mixed[0][1][0]
        raise ctx.error(f"counters of several series: {what}; choose one with "
                        f"labels={{{k0!r}: {v0!r}}}")
    (series,) = groups.values()
    for s in series:
        if not prom.is_count(s.value):
            raise ctx.error(f"{s.name}: {s.value!r} is not a count (a whole number >= 0)",
                            s.lineno)
    one = {s.name: s for s in series if s.name != prom.PER_POS}
    for name in (prom.DRAFTS, prom.DRAFT_TOKENS, prom.ACCEPTED):
        if name not in one:
            raise ctx.error(f"no {name} among the counters")
    pos: dict[int, prom.Sample] = {}
    for s in series:
        if s.name == prom.PER_POS:
            p = s.label("position") or ""
            if not p.isdigit():
                raise ctx.error(f"{s.name}: position {p!r} is not a 0-based index", s.lineno)
            pos[int(p)] = s
    if not pos:
        raise ctx.error(f"no {prom.PER_POS} counters: per-position counts are needed")
    missing = sorted(set(range(max(pos) + 1)) - set(pos))
    if missing:
        raise ctx.error(f"position {missing[0]} missing (positions "
                        f"{','.join(map(str, sorted(pos)))})")
    n, a = int(one[prom.DRAFTS].value), [int(pos[i].value) for i in range(len(pos))]
    prev, what = n, f"{n} drafts"
    for i, x in enumerate(a):
        if x > prev:
            raise ctx.error(f"position {i}: {x} accepted exceeds {what} (counts must not "
                            f"increase along the draft)", pos[i].lineno)
        prev, what = x, f"position {i}'s {x}"
    acc = one[prom.ACCEPTED]
    if sum(a) != int(acc.value):
        raise ctx.error(f"{prom.ACCEPTED} {int(acc.value)} != {sum(a)}, the sum of the "
                        f"per-position counts", acc.lineno)
    dt = one[prom.DRAFT_TOKENS]
    ctx.check_drafted(int(dt.value), n, len(a), dt.lineno)
    return AcceptanceCounts(n, tuple(a), ctx.source)


# ---------------------------------------------------------------------------- histograms
_KEYS = ("acceptance_histogram", "spec_accept_histogram", "spec_correct_drafts_histogram")


def _stats(obj: Any) -> list[dict[str, Any]]:
    """The dicts holding a histogram: the entry, or where vLLM and SGLang nest them."""
    if not isinstance(obj, dict):
        return []
    if any(k in obj for k in _KEYS):
        return [obj]
    inner = [obj.get("speculative_decoding_stats"), obj.get("meta_info"),
             (obj.get("metrics") or {}).get("speculative_decoding")
             if isinstance(obj.get("metrics"), dict) else None]
    choices = obj.get("choices") if isinstance(obj.get("choices"), list) else []
    return [d for x in [*inner, *choices] for d in _stats(x)]


def _histograms(text: str, ctx: ReadContext) -> AcceptanceCounts:
    rows = [(n, r) for n, r in enumerate(text.splitlines(), 1) if r.strip()]
    try:
        data = json.loads(text)
        entries, where = list(enumerate(data if isinstance(data, list) else [data])), "entry"
    except json.JSONDecodeError as e:
        if len(rows) < 2 or not _parses(rows[0][1]):
            raise ctx.error(f"not JSON: {e.msg} (column {e.colno})", e.lineno) from None
        entries, where = [], "line"  # JSON lines: one request a line
        for n, r in rows:
            try:
                entries.append((n, json.loads(r)))
            except json.JSONDecodeError as e2:
                raise ctx.error(f"not a JSON line: {e2.msg} (column {e2.colno})", n) from None
    if not entries:
        raise ctx.error("an empty list: no request")
    hists: list[tuple[str, list[int], int | None]] = []
    for i, x in entries:
        at = f"{where} {i}"
        if isinstance(x, list):
            hists.append((at, _dense(x, at, ctx), None))
            continue
        for d in _stats(x):
            key = next(k for k in _KEYS if k in d)
            h = d[key]
            if h is None or h == [] or h == {}:
                continue
            h = _sparse(h, at, ctx) if isinstance(h, dict) else _dense(h, at, ctx)
            hists.append((at, h, _check_vllm(d, h, at, ctx)))
    if not hists:
        raise ctx.error(f"no entry carries {' or '.join(_KEYS)}")
    ks = {k for _, _, k in hists if k is not None}
    if len(ks) > 1:
        raise ctx.error(f"requests ran different draft lengths (num_spec_tokens "
                        f"{', '.join(map(str, sorted(ks)))}): one per file")
    big = max(len(h) - 1 for _, h, _ in hists)
    k = ks.pop() if ks else big
    total = [0] * (k + 1)
    for at, h, _ in hists:
        if len(h) - 1 > k:
            raise ctx.error(f"{at}: histogram of {len(h)} entries, more than num_spec_tokens "
                            f"{k} + 1")
        for j, c in enumerate(h):
            total[j] += c
    if k < 1:
        raise ctx.error("no draft length: no round accepted a draft and no entry says "
                        "num_spec_tokens")
    return AcceptanceCounts.from_histogram(total, ctx.source)


def _parses(line: str) -> bool:
    try:
        json.loads(line)
    except json.JSONDecodeError:
        return False
    return True


def _is_count(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x >= 0


def _dense(h: Sequence[Any], at: str, ctx: ReadContext) -> list[int]:
    bad = [x for x in h if not _is_count(x)]
    if bad or not isinstance(h, list):
        raise ctx.error(f"{at}: histogram {str(h)[:60]} needs whole counts >= 0 "
                        f"(got {bad[0] if bad else type(h).__name__!r})")
    return list(h)


def _sparse(h: dict[str, Any], at: str, ctx: ReadContext) -> list[int]:
    if not all(isinstance(j, str) and j.isdigit() for j in h):
        raise ctx.error(f"{at}: histogram keys {list(h)[:5]} are not accepted-draft counts")
    out = [0] * (max(int(j) for j in h) + 1)
    for j, c in h.items():
        out[int(j)] = _dense([c], at, ctx)[0]
    return out


def _check_vllm(d: dict[str, Any], h: list[int], at: str, ctx: ReadContext) -> int | None:
    """vLLM's own totals against the histogram; its K (``num_spec_tokens``) if given."""
    steps, acc = sum(h), sum(j * c for j, c in enumerate(h))
    for key, want in (("num_spec_steps", steps), ("num_accepted_draft_tokens", acc)):
        if key in d and d[key] != want:
            raise ctx.error(f"{at}: {key} {d[key]} != {want} from its histogram {h}")
    k = d.get("num_spec_tokens")
    if k is not None and (not _is_count(k) or k < 1):
        raise ctx.error(f"{at}: num_spec_tokens {k!r} is not a draft length")
    if k is not None and "num_draft_tokens" in d:
        ctx.check_drafted(d["num_draft_tokens"], steps, k, what=f"{at}: ")
    return k
