"""Per-request acceptance data in JSON -> counters per draft length.

An entry is one response (a JSON list, JSON lines, or a server-sent-events capture whose
``data:`` lines hold the chunks; ``[DONE]`` ends a stream). Read from the engines' source:

- **vLLM** ``metrics.speculative_decoding`` (``docs/features/speculative_decoding/
  acceptance_metrics.md`` at 02cf515f0b62e6fc36d5ff8fb9b486a30e8dbe08; older builds put the
  same object under a choice's ``speculative_decoding_stats`` with a sparse ``{"j": count}``
  histogram): ``acceptance_histogram`` (index j = rounds that accepted exactly j drafts,
  dense, K + 1 long, pooled over draft lengths), ``acceptance_histogram_by_draft_length``
  (``{"k": [k + 1 buckets]}``: the rounds that proposed k drafts, exact per k; a ``"0"`` row is
  a round left with no valid draft, skipped and counted), ``per_step_accepted`` /
  ``per_step_drafted`` (``detailed``), ``num_spec_steps`` (= sum h), ``num_accepted_draft_
  tokens`` (= sum j h_j), ``num_draft_tokens``, ``num_spec_tokens`` (K). In a stream the object
  rides the final usage chunk.
- **SGLang** ``sglext.spec_tokens_details`` of an OpenAI-compatible response
  (``python/sglang/srt/entrypoints/openai/utils.py``, ``spec_tokens_details_from_meta_info``,
  PR sgl-project/sglang#33518; read from the index, where the file's one pinned commit,
  9e738dbafab35954e694d4f038a29ea48923ff6e, predates it), or ``meta_info``
  of ``/generate``: ``spec_correct_drafts_histogram`` (legacy ``spec_accept_histogram``; index
  = accepted drafts, grown only as far as the longest accepted run, so its length does not
  give K), ``spec_verify_ct`` (N), ``spec_num_correct_drafts`` (= sum j h_j),
  ``spec_num_proposed_drafts`` and, where the build writes it, ``spec_proposed_drafts_
  histogram`` (rounds per proposed length). A request's K is the one proposed length of that
  histogram, else proposed / verify rounds when it is whole (SGLang's chain drafter proposes
  ``speculative_num_steps`` a round; adaptive steps change it between batches), else
  ``num_spec_tokens`` or ``--draft-length``. Requests of different K are kept apart (exact
  per K); a request whose own rounds changed K cannot be split and is refused (or, with
  ``--short-drafts``, pooled as drafts cut short).
- bare lists ``[h_0, ..., h_K]`` (dense, K = length - 1).

Refused as carrying no per-position counts, naming what to use: llama.cpp's ``timings.draft_n``
/ ``draft_n_accepted``, TensorRT-LLM's iteration stats (``specDecodingStats``), SGLang
``spec_accept_length`` / ``spec_verify_ct`` without a histogram.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from specsim.acceptance.counts import AcceptanceCounts
from specsim.acceptance.formats.context import SHORT_HINT, ReadContext

__all__ = ["entries", "read_requests"]

_VLLM = ("acceptance_histogram", "acceptance_histogram_by_draft_length", "per_step_accepted")
_SGL = ("spec_correct_drafts_histogram", "spec_accept_histogram")
_NESTED = ("speculative_decoding_stats", "meta_info", "spec_tokens_details")


def entries(text_lines: Iterator[tuple[int, str]], whole: str | None,
            ctx: ReadContext) -> list[tuple[str, Any]]:
    """(where, object) per response: a JSON document, JSON lines, or an SSE capture."""
    if whole is not None:
        data = json.loads(whole)
        return [(f"entry {i}", x) for i, x in enumerate(data if isinstance(data, list)
                                                         else [data])]
    out: list[tuple[str, Any]] = []
    streams: dict[str, int] = {}
    for n, line in text_lines:
        body = line.strip()
        sse = body.startswith("data:")
        if sse:
            body = body[5:].strip()
            if body == "[DONE]":
                continue
        elif not body or body.startswith((":", "event:", "id:", "retry:")):
            continue
        try:
            obj = json.loads(body)
        except json.JSONDecodeError as e:
            raise ctx.error(f"not a JSON {'data: line' if sse else 'line'}: {e.msg} (column "
                            f"{e.colno})", n) from None
        key = obj.get("id") if sse and isinstance(obj, dict) else None
        if isinstance(key, str) and _stats(obj):  # a stream's last statistics replace earlier
            if key in streams:
                out[streams[key]] = (f"line {n}", obj)
                continue
            streams[key] = len(out)
        out.append((f"line {n}", obj))
    return out


def _stats(obj: Any) -> list[dict[str, Any]]:
    """The dicts holding acceptance data: the entry, or where vLLM and SGLang nest them."""
    if not isinstance(obj, dict):
        return []
    if any(k in obj for k in (*_VLLM, *_SGL)) or ("spec_verify_ct" in obj):
        return [obj]
    inner = [obj.get(k) for k in _NESTED]
    metrics, ext = obj.get("metrics"), obj.get("sglext")
    inner += [metrics.get("speculative_decoding") if isinstance(metrics, dict) else None,
              ext.get("spec_tokens_details") if isinstance(ext, dict) else None]
    choices = obj.get("choices")
    listed = choices if isinstance(choices, list) else []
    return [d for x in [*inner, *listed] for d in _stats(x)]


def _no_positions(obj: Any) -> str:
    if isinstance(obj, dict):
        timings = obj.get("timings")
        if isinstance(timings, dict) and "draft_n" in timings:
            return ("llama.cpp's timings.draft_n / draft_n_accepted carry no per-position "
                    "counts; use llama-server's /metrics (llamacpp:spec_decode_num_accepted_"
                    "tokens_per_pos_total) or its 'statistics ... #acc rate/pos' log line")
        if "specDecodingStats" in obj:
            return ("TensorRT-LLM iteration stats (specDecodingStats) carry no per-position "
                    "counts; use /prometheus/metrics trtllm_spec_decode_drafted_tokens_total / "
                    "accepted_tokens_total{token_position} (return_perf_metrics)")
    return ""


def read_requests(items: list[tuple[str, Any]], ctx: ReadContext) -> dict[int, AcceptanceCounts]:
    if not items:
        raise ctx.error("an empty list: no request")
    totals: dict[int, list[int]] = {}
    skipped = 0
    for at, x in items:
        if isinstance(x, list):
            h = _dense(x, at, ctx)
            _add(totals, len(h) - 1, h, at, ctx)
            continue
        found = _stats(x)
        if not found and (why := _no_positions(x)):
            raise ctx.error(f"{at}: {why}")
        for d in found:
            rows = _vllm(d, at, ctx) if any(k in d for k in _VLLM) else _sglang(d, at, ctx)
            skipped += not rows
            for k, h in rows.items():
                _add(totals, k, h, at, ctx)
    if not totals:
        raise ctx.error("no entry carries acceptance_histogram or spec_correct_drafts_histogram "
                        "(per-request counts: vLLM --per-request-spec-decode-metrics, SGLang "
                        "return_spec_tokens_details)")
    if skipped:
        ctx.note(f"{skipped} requests without speculative rounds skipped")
    if 0 in totals:
        ctx.note(f"{sum(totals.pop(0))} rounds with no valid draft (draft length 0) skipped")
        if not totals:
            raise ctx.error("every round had draft length 0")
    if ctx.options.short_drafts and len(totals) > 1:
        k = max(totals)
        ctx.note(f"rounds of draft lengths {', '.join(map(str, sorted(totals)))} pooled at "
                 f"K = {k} as drafts cut short (--short-drafts)")
        ctx.cut_short = True
        pooled = [sum(h[j] for h in totals.values() if j < len(h)) for j in range(k + 1)]
        totals = {k: pooled}
    return {k: AcceptanceCounts.from_histogram(h, ctx.source) for k, h in totals.items()}


def _add(totals: dict[int, list[int]], k: int, h: list[int], at: str, ctx: ReadContext) -> None:
    if len(h) - 1 > k:
        raise ctx.error(f"{at}: histogram of {len(h)} entries, more than draft length {k} + 1")
    if k < 1 and len(h) > 1:
        raise ctx.error(f"{at}: no draft length")
    row = totals.setdefault(k, [0] * (k + 1))
    for j, c in enumerate(h):
        row[j] += c


def _is_count(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x >= 0


def _dense(h: Any, at: str, ctx: ReadContext) -> list[int]:
    bad = [x for x in h if not _is_count(x)] if isinstance(h, list) else [h]
    if bad:
        raise ctx.error(f"{at}: histogram {str(h)[:60]} needs whole counts >= 0 "
                        f"(got {bad[0]!r})")
    return list(h)


def _hist(h: Any, at: str, ctx: ReadContext) -> list[int]:
    """A dense list, or vLLM's older sparse ``{"j": count}`` map."""
    if not isinstance(h, dict):
        return _dense(h, at, ctx)
    if not all(isinstance(j, str) and j.isdigit() for j in h):
        raise ctx.error(f"{at}: histogram keys {list(h)[:5]} are not accepted-draft counts")
    out = [0] * (max((int(j) for j in h), default=-1) + 1)
    for j, c in h.items():
        out[int(j)] = _dense([c], at, ctx)[0]
    return out


def _check(d: dict[str, Any], key: str, want: int, h: list[int], at: str,
           ctx: ReadContext) -> None:
    if key in d and d[key] is not None and d[key] != want:
        raise ctx.error(f"{at}: {key} {d[key]} != {want} from its histogram {h[:12]}")


def _k(d: dict[str, Any], at: str, ctx: ReadContext) -> int | None:
    k = d.get("num_spec_tokens")
    if k is not None and (not _is_count(k) or k < 1):
        raise ctx.error(f"{at}: num_spec_tokens {k!r} is not a draft length")
    return k


def _vllm(d: dict[str, Any], at: str, ctx: ReadContext) -> dict[int, list[int]]:
    h = _hist(d["acceptance_histogram"], at, ctx) if "acceptance_histogram" in d else None
    k = _k(d, at, ctx)
    rows: dict[int, list[int]] = {}
    by = d.get("acceptance_histogram_by_draft_length")
    steps = list(zip(d.get("per_step_drafted") or [], d.get("per_step_accepted") or [],
                     strict=False))
    if isinstance(by, dict):
        for key, row in by.items():
            if not (isinstance(key, str) and key.isdigit()):
                raise ctx.error(f"{at}: acceptance_histogram_by_draft_length key {key!r} is "
                                f"not a draft length")
            rows[int(key)] = _dense(row, at, ctx)
    elif steps:
        for drafted, acc in steps:
            if not (_is_count(drafted) and _is_count(acc) and acc <= drafted):
                raise ctx.error(f"{at}: per-step drafted {drafted!r}, accepted {acc!r}")
            row = rows.setdefault(drafted, [0] * (drafted + 1))
            row[acc] += 1
    if h is None:
        if not rows:
            return {}
        top = max(rows)
        h = [sum(r[j] for r in rows.values() if j < len(r)) for j in range(top + 1)]
    _check(d, "num_spec_steps", sum(h), h, at, ctx)
    _check(d, "num_accepted_draft_tokens", sum(j * c for j, c in enumerate(h)), h, at, ctx)
    if rows:
        pooled = [sum(r[j] for r in rows.values() if j < len(r)) for j in range(len(h))]
        if pooled[:len(h)] != h or any(len(r) > len(h) for r in rows.values()):
            raise ctx.error(f"{at}: acceptance_histogram {h} is not the sum of its rows by "
                            f"draft length {dict(sorted(rows.items()))}")
        _check(d, "num_draft_tokens", sum(kk * sum(r) for kk, r in rows.items()), h, at, ctx)
        return rows
    if sum(h) == 0:
        return {}
    k = k if k is not None else len(h) - 1
    if len(h) - 1 > k:
        raise ctx.error(f"{at}: histogram of {len(h)} entries, more than num_spec_tokens "
                        f"{k} + 1")
    if "num_draft_tokens" in d:
        ctx.drafted(d["num_draft_tokens"], sum(h), k, what=f"{at}: ")
    return {k: h}


def _sglang(d: dict[str, Any], at: str, ctx: ReadContext) -> dict[int, list[int]]:
    key = next((k for k in _SGL if k in d), None)
    h = _dense(d.get(key) or [], at, ctx) if key else []
    verify = d.get("spec_verify_ct")
    if not h or not sum(h):
        if verify:
            raise ctx.error(f"{at}: spec_verify_ct {verify} but no spec_correct_drafts_histogram"
                            f": spec_accept_length / spec_verify_ct carry no per-position "
                            f"counts; use an SGLang build that returns the histogram")
        return {}
    _check(d, "spec_verify_ct", sum(h), h, at, ctx)
    _check(d, "spec_num_correct_drafts", sum(j * c for j, c in enumerate(h)), h, at, ctx)
    proposed = d.get("spec_num_proposed_drafts")
    lengths = [j for j, c in enumerate(d.get("spec_proposed_drafts_histogram") or []) if c]
    n = sum(h)
    k: int | None
    if lengths:
        k, mixed = max(lengths), len(lengths) > 1
        what = f"proposed draft lengths {lengths}"
    elif _is_count(proposed) and proposed:
        k, mixed = -(-proposed // n), proposed % n != 0
        what = f"{proposed} proposed drafts over {n} verify rounds ({proposed / n:.2f} a round)"
    else:
        k = _k(d, at, ctx) or ctx.options.draft_length
        mixed, what = False, ""
        if k is None:
            raise ctx.error(f"{at}: the draft length is unknown: SGLang grows "
                            f"{key} only as far as the longest accepted run (here "
                            f"{len(h) - 1}) and the entry has no spec_num_proposed_drafts; pass "
                            f"--draft-length K (the --speculative-num-steps served)")
    if mixed:
        k = ctx.options.draft_length or _k(d, at, ctx) or max(k, len(h) - 1)
        if not ctx.options.short_drafts:
            raise ctx.error(f"{at}: {what}: the draft length changed within the request "
                            f"(adaptive steps) and its histogram cannot be split by K; "
                            f"{SHORT_HINT}")
        ctx.cut_short = True
    return {k: h}
