"""Prometheus scrapes of the engines' cumulative counters -> counters per draft length.

Read from each engine's source (stored index; commits named):

- **vLLM** ``/metrics`` -- ``vllm/v1/spec_decode/metrics.py`` (``SpecDecodingProm``) at
  ee4ceaae5953d367d8edd2132fd86d6c42506e1e: ``vllm:spec_decode_num_drafts_total`` (N),
  ``..._num_draft_tokens_total``, ``..._num_accepted_tokens_total``,
  ``..._num_accepted_tokens_per_pos_total{position="i"}`` (a_{i+1}; one per position 0..K-1),
  labels ``model_name``, ``engine`` (one series per engine). Scraped as OpenMetrics or by a
  Prometheus that escapes names, ``vllm:`` becomes ``vllm_`` (``vllm_spec_decode_*``): read
  the same.
- **llama-server** ``/metrics`` -- ``tools/server/server-task.cpp``
  (``server_task_result_metrics::to_metrics``, ggml-org/llama.cpp PR #26389; read from the
  index, where the file's one pinned commit, 17f5f8a80d8ac9c18c23ecb2321640daeec77096,
  predates it, so no commit is named): the same four names under
  ``llamacpp:``, no labels. The totals are C++ doubles written with ``operator<<`` (6
  significant digits: ``1.23457e+06``); the per-position counts are integers, exact. The
  accepted total is checked against the per-position sum within its printed precision, and
  a rounded N is carried into the intervals (:mod:`.rounding`).
- **TensorRT-LLM** ``/prometheus/metrics`` -- ``tensorrt_llm/metrics/collector.py``
  (``MetricsCollector.log_request_metrics_dict``, PR NVIDIA/TensorRT-LLM#12636; read from the
  index, where the file's one pinned commit, 89fd9b74ab7ae753b4c6b3db25a400dca7ea54a0,
  predates the counters): ``trtllm_spec_decode_drafted_tokens_
  total{token_position="i"}`` (rounds that drafted position i) and ``..._accepted_tokens_total
  {token_position="i"}`` (rounds that accepted it), incremented per finished request only
  where the count is > 0 (an absent accepted position is 0). N = drafted at position 0. If
  every round drafted K tokens, the counters are exact at K; if not, positions 1..m drafted
  in every round are exact at K = m (truncating a round to m drafts does not change its first
  m verdicts), and ``--short-drafts`` takes all positions as drafts cut short.

Scrapes with no per-position counts are refused, naming what to collect instead: SGLang's
``sglang:spec_accept_length``/``spec_accept_rate`` gauges, TensorRT-LLM's
``trtllm_spec_decode_num_draft_tokens_total``/``acceptance_length``. ``--baseline`` takes the
scrape before the run: every series is the difference after - before; one that went down (the
server restarted) is refused naming it. ``--label`` chooses series; ``--sum-series`` pools
every series (replicas, data-parallel engines) when they ran one K.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from specsim.acceptance import prometheus as prom
from specsim.acceptance.counts import AcceptanceCounts
from specsim.acceptance.formats.context import ReadContext
from specsim.acceptance.formats.rounding import pooled, rounded

__all__ = ["ENGINES", "PREFIXES", "read_scrape"]

_ROLES = {"drafts": "num_drafts_total", "draft_tokens": "num_draft_tokens_total",
          "accepted": "num_accepted_tokens_total", "per_pos": "num_accepted_tokens_per_pos_total"}
_TRT = {"drafted": "trtllm_spec_decode_drafted_tokens_total",
        "accepted": "trtllm_spec_decode_accepted_tokens_total"}
#: engine -> its counter-name prefix (after unescaping)
ENGINES = {"vllm": "vllm:spec_decode_", "llamacpp": "llamacpp:spec_decode_",
           "trtllm": "trtllm_spec_decode_"}
_ESCAPED = {"vllm_spec_decode_": "vllm:spec_decode_",
            "llamacpp_spec_decode_": "llamacpp:spec_decode_"}
_NO_POS = {"sglang:spec_": "SGLang's sglang:spec_accept_length / spec_accept_rate gauges",
           "sglang_spec_": "SGLang's sglang:spec_accept_length / spec_accept_rate gauges",
           "trtllm_spec_decode_num_": "TensorRT-LLM's trtllm_spec_decode_num_draft_tokens_total",
           "trtllm_spec_decode_acc": "TensorRT-LLM's trtllm_spec_decode_acceptance_length"}
_USE = {"SGLang": "per-request spec_correct_drafts_histogram (sglext.spec_tokens_details with "
                  "return_spec_tokens_details, or meta_info)",
        "TensorRT-LLM": "trtllm_spec_decode_drafted_tokens_total / accepted_tokens_total "
                        "{token_position} (return_perf_metrics)"}
PREFIXES = (*ENGINES.values(), *_ESCAPED, *_NO_POS)

Key = tuple[str, tuple[tuple[str, str], ...]]


@dataclass(frozen=True)
class Value:
    """A counter's value, its half-width of printing (0: exact) and where it stood."""

    value: float
    err: float
    lineno: int
    raw: str = ""


def _err(engine: str, raw: str) -> float:
    """Half a unit of the last printed digit where the engine rounds (llama-server's %g)."""
    if engine != "llamacpp" or "e" not in raw.lower():
        return 0.0
    mant, _, exp = raw.lower().partition("e")
    decimals = len(mant.partition(".")[2])
    return 0.5 * 10.0 ** (int(exp) - decimals)


def _scan(path: Path, ctx: ReadContext) -> dict[Key, Value]:
    with path.open(encoding="utf-8") as f:
        try:
            samples = prom.scan_exposition(f, PREFIXES)
        except prom.ExpositionError as e:
            raise ctx.error(str(e), e.lineno) if path == ctx.path else \
                ctx.error(f"--baseline {path}:{e.lineno}: {e}") from None
    out: dict[Key, Value] = {}
    for s in samples:
        name = s.name
        for esc, canon in _ESCAPED.items():
            if name.startswith(esc):
                name = canon + name[len(esc):]
        engine = next((e for e, p in ENGINES.items() if name.startswith(p)), "")
        out[(name, tuple(sorted(s.labels)))] = Value(s.value, _err(engine, s.raw), s.lineno,
                                                     s.raw)
    return out


def _series_text(key: Key) -> str:
    return key[0] + "{" + ",".join(f'{k}="{v}"' for k, v in key[1]) + "}"


def _minus(after: dict[Key, Value], before: dict[Key, Value], base: Path,
           ctx: ReadContext) -> dict[Key, Value]:
    """after - before per series; a counter that went down or vanished is a restart."""
    for key, b in before.items():
        a = after.get(key)
        if a is None:
            raise ctx.error(f"series {_series_text(key)} is in --baseline {base} but not here: "
                            f"the server restarted or the files are not one server's")
        if a.value < b.value - a.err - b.err:
            raise ctx.error(f"series {_series_text(key)} went down from {b.value:g} "
                            f"(--baseline {base}) to {a.value:g}: the server restarted; "
                            f"scrape again after the restart", a.lineno)
    return {k: Value(v.value - before[k].value if k in before else v.value,
                     v.err + (before[k].err if k in before else 0.0), v.lineno,
                     f"{v.raw} - {before[k].raw}" if k in before else v.raw)
            for k, v in after.items()}


def read_scrape(ctx: ReadContext, baseline: Path | None = None) -> dict[int, AcceptanceCounts]:
    values = _scan(ctx.path, ctx)
    if baseline is not None:
        values = _minus(values, _scan(baseline, ctx), baseline, ctx)
    engine = next((e for e, p in ENGINES.items() if any(
        k[0].startswith(p) and (e != "trtllm" or k[0] in _TRT.values()) for k in values)), "")
    if not engine:
        what = next((w for p, w in _NO_POS.items() if any(k[0].startswith(p) for k in values)),
                    "")
        if what:
            use = _USE["SGLang" if "SGLang" in what else "TensorRT-LLM"]
            raise ctx.error(f"{what} carry no per-position counts; use {use}")
        raise ctx.error("no speculative-decoding counters (vllm:spec_decode_*, "
                        "llamacpp:spec_decode_*, trtllm_spec_decode_*_tokens_total"
                        "{token_position}): was speculative decoding on?")
    prefix = ENGINES[engine]
    keep = set(_TRT.values()) if engine == "trtllm" else {prefix + r for r in _ROLES.values()}
    values = {k: v for k, v in values.items() if k[0] in keep}
    pos_label = "token_position" if engine == "trtllm" else "position"
    groups = _select(values, pos_label, ctx)
    per_series = [(g, (_trtllm if engine == "trtllm" else _vllm_like)(
        group, prefix, engine, ctx)) for g, group in groups.items()]
    if len(per_series) == 1:
        return per_series[0][1]
    ks = {tuple(sorted(c)) for _, c in per_series}
    if len(ks) > 1:
        what = "; ".join(f"{_labels(g)}: K={','.join(map(str, sorted(c)))}"
                         for g, c in per_series)
        raise ctx.error(f"--sum-series: the series ran different draft lengths ({what}); "
                        f"choose one with --label")
    out: dict[int, AcceptanceCounts] = {}
    for _, counts in per_series:
        for k, c in counts.items():
            out[k] = pooled(out[k], c) if k in out else c
    ctx.note(f"{len(per_series)} series pooled (--sum-series): "
             f"{'; '.join(_labels(g) for g, _ in per_series)}")
    return out


def _labels(group: tuple[tuple[str, str], ...]) -> str:
    return ",".join(f"{k}={v}" for k, v in group) or "(no labels)"


def _select(values: dict[Key, Value], pos_label: str,
            ctx: ReadContext) -> dict[tuple[tuple[str, str], ...], dict[Key, Value]]:
    """The series left after ``--label``, grouped by their labels less the position."""
    names = sorted({k for key in values for k, _ in key[1]} - {pos_label})
    for label, want in ctx.labels.items():
        have = sorted({v for key in values for k, v in key[1] if k == label})
        if not have:
            raise ctx.error(f"--label {label}={want}: no label {label!r} on the counters "
                            f"(labels: {', '.join(names) or 'none'})")
        if want not in have:
            raise ctx.error(f"--label {label}={want}: no counters with it (values: "
                            f"{', '.join(have)})")
    groups: dict[tuple[tuple[str, str], ...], dict[Key, Value]] = {}
    for key, v in values.items():
        lab = dict(key[1])
        if all(lab.get(k) == w for k, w in ctx.labels.items()):
            g = tuple((k, x) for k, x in key[1] if k != pos_label)
            groups.setdefault(g, {})[key] = v
    if len(groups) > 1 and not ctx.options.sum_series:
        mixed = [(k, sorted({dict(g).get(k, "") for g in groups})) for k in names]
        mixed = [(k, vs) for k, vs in mixed if len(vs) > 1]
        what = " and ".join(f"label {k!r} ({', '.join(map(repr, vs))})" for k, vs in mixed)
        k0, v0 = mixed[0][0], mixed[0][1][0]
        raise ctx.error(f"counters of {len(groups)} series: {what}; choose one with --label "
                        f"{k0}={v0}, or pool them with --sum-series")
    return groups


def _positions(group: dict[Key, Value], name: str, pos_label: str,
               ctx: ReadContext) -> dict[int, Value]:
    out: dict[int, Value] = {}
    for (n, labels), v in group.items():
        if n == name:
            p = dict(labels).get(pos_label, "")
            if not p.isdigit():
                raise ctx.error(f"{n}: {pos_label} {p!r} is not a 0-based index", v.lineno)
            out[int(p)] = v
    return out


def _count(name: str, v: Value, ctx: ReadContext) -> int:
    if not (math.isfinite(v.value) and v.value >= 0 and (v.err or v.value == int(v.value))):
        raise ctx.error(f"{name}: {v.value!r} is not a count (a whole number >= 0)", v.lineno)
    return round(v.value)


def _vllm_like(group: dict[Key, Value], prefix: str, engine: str,
               ctx: ReadContext) -> dict[int, AcceptanceCounts]:
    one = {k[0]: v for k, v in group.items() if not k[0].endswith(_ROLES["per_pos"])}
    for role in ("drafts", "draft_tokens", "accepted"):
        if prefix + _ROLES[role] not in one:
            raise ctx.error(f"no {prefix + _ROLES[role]} among the counters")
    pos = _positions(group, prefix + _ROLES["per_pos"], "position", ctx)
    if not pos:
        raise ctx.error(f"no {prefix + _ROLES['per_pos']} counters: per-position counts are "
                        f"needed (llama-server writes them since PR #26389)")
    missing = sorted(set(range(max(pos) + 1)) - set(pos))
    if missing:
        raise ctx.error(f"position {missing[0]} missing (positions "
                        f"{','.join(map(str, sorted(pos)))})")
    drafts = one[prefix + _ROLES["drafts"]]
    n = _count(prefix + _ROLES["drafts"], drafts, ctx)
    a = [_count(prefix + _ROLES["per_pos"], pos[i], ctx) for i in range(len(pos))]
    prev, what = n + drafts.err, f"{n} drafts"
    for i, x in enumerate(a):
        if x > prev:
            raise ctx.error(f"position {i}: {x} accepted exceeds {what} (counts must not "
                            f"increase along the draft)", pos[i].lineno)
        prev, what = x, f"position {i}'s {x}"
    acc = one[prefix + _ROLES["accepted"]]
    for role in ("accepted", "draft_tokens"):
        _count(prefix + _ROLES[role], one[prefix + _ROLES[role]], ctx)
    if abs(sum(a) - acc.value) > acc.err:
        raise ctx.error(f"{prefix + _ROLES['accepted']} {acc.value:g} != {sum(a)}, the sum of "
                        f"the per-position counts", acc.lineno)
    dt = one[prefix + _ROLES["draft_tokens"]]
    ctx.drafted(dt.value, n, len(a), dt.lineno, tolerance=dt.err + len(a) * drafts.err)
    n = max(n, a[0]) if a else n
    counts = ctx.counts(n, a)
    if drafts.err:
        lo, hi = math.ceil(drafts.value - drafts.err), math.floor(drafts.value + drafts.err)
        why = (f"{prefix}{_ROLES['drafts']} printed as {drafts.raw or drafts.value} "
               f"(6 significant digits): N in {max(lo, a[0])}..{hi}, carried into the intervals")
        ctx.note(why)
        counts = rounded(counts, rounds=(max(lo, a[0], 1), hi), why=why)
    return {len(a): counts}


def _trtllm(group: dict[Key, Value], prefix: str, engine: str,
            ctx: ReadContext) -> dict[int, AcceptanceCounts]:
    drafted = _positions(group, _TRT["drafted"], "token_position", ctx)
    accepted = _positions(group, _TRT["accepted"], "token_position", ctx)
    if not drafted:
        raise ctx.error(f"no {_TRT['drafted']} counters: the drafted count per position is "
                        f"needed")
    k = max(drafted) + 1
    missing = sorted(set(range(k)) - set(drafted))
    if missing or (accepted and max(accepted) >= k):
        where = missing[0] if missing else max(accepted)
        raise ctx.error(f"{_TRT['drafted']}: position {where} missing (positions "
                        f"{','.join(map(str, sorted(drafted)))})")
    d = [_count(_TRT["drafted"], drafted[i], ctx) for i in range(k)]
    a = [_count(_TRT["accepted"], accepted[i], ctx) if i in accepted else 0 for i in range(k)]
    for i in range(k):
        if a[i] > d[i] or (i and (d[i] > d[i - 1] or a[i] > a[i - 1])):
            raise ctx.error(f"position {i}: drafted {d[i]}, accepted {a[i]} after drafted "
                            f"{d[i - 1] if i else '-'}, accepted {a[i - 1] if i else '-'}: "
                            f"counts must not increase along the draft nor exceed drafted",
                            (accepted.get(i) or drafted[i]).lineno)
    n = d[0]
    if all(x == n for x in d):
        return {k: ctx.counts(n, a)}
    m = max(i + 1 for i in range(k) if d[i] == n)
    by_len = ", ".join(f"{j + 1}: {d[j] - (d[j + 1] if j + 1 < k else 0)}" for j in range(k)
                       if d[j] - (d[j + 1] if j + 1 < k else 0))
    if ctx.options.short_drafts:
        ctx.drafted(sum(d), n, k)
        return {k: ctx.counts(n, a)}
    ctx.note(f"rounds by draft length ({by_len}): every round drafted positions 1..{m}, so "
             f"the counts are exact at K = {m}; --short-drafts takes all {k} positions as "
             f"drafts cut short")
    return {m: ctx.counts(n, a[:m])}
