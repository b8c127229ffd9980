"""Prometheus text exposition: a strict parser, and vLLM's speculative-decoding counters.

The format is Prometheus' text exposition 0.0.4 (what ``prometheus_client.generate_latest``
writes and vLLM serves at ``/metrics``), with OpenMetrics' ``# EOF`` and exemplars tolerated:
``# HELP``/``# TYPE`` and other comments are skipped, a sample is
``name{label="value",...} value [timestamp]`` with label values escaped (``\\\\``, ``\\"``,
``\\n``), values Go floats (``1.2e3``, ``+Inf``, ``NaN``). Errors carry the line number; the
reader (:mod:`.readers`) adds the file.

vLLM's counters (``vllm/v1/spec_decode/metrics.py``, class ``SpecDecodingProm``, at vLLM commit
ee4ceaae5953d367d8edd2132fd86d6c42506e1e; labels ``model_name``, ``engine`` from
``vllm/v1/metrics/loggers.py`` at a6f0308cfe806b7731ad4979c9bea6e470c35efd), each a
``prometheus_client.Counter`` and so exposed with the ``_total`` suffix (and a ``_created``
sample, ignored here):
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

__all__ = ["COUNTERS", "ExpositionError", "Sample", "parse_exposition", "scan_exposition",
           "to_prometheus"]

DRAFTS = "vllm:spec_decode_num_drafts_total"
DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens_total"
ACCEPTED = "vllm:spec_decode_num_accepted_tokens_total"
PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
#: name -> vLLM's ``documentation=`` string (the ``# HELP`` text)
COUNTERS = {
    DRAFTS: "Number of spec decoding drafts.",
    DRAFT_TOKENS: "Number of draft tokens.",
    ACCEPTED: "Number of accepted tokens.",
    PER_POS: "Accepted tokens per draft position.",
}
__doc__ = (__doc__ or "") + "".join(f"\n- ``{n}``: {d}" for n, d in COUNTERS.items()) + "\n"

_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_UNESCAPE = {"\\": "\\", '"': '"', "n": "\n"}


class ExpositionError(ValueError):
    """A malformed exposition line: ``lineno`` (1-based, 0 for the whole text) and what."""

    def __init__(self, lineno: int, message: str) -> None:
        super().__init__(message)
        self.lineno = lineno


@dataclass(frozen=True)
class Sample:
    """One sample line: metric name, its labels, value, and where it stood."""

    name: str
    labels: tuple[tuple[str, str], ...]
    value: float
    lineno: int
    #: the value as printed (llama-server prints 6 significant digits: the text says how many)
    raw: str = ""

    def label(self, key: str) -> str | None:
        return dict(self.labels).get(key)


def parse_exposition(text: str) -> list[Sample]:
    """Every sample of an exposition text; refuses a malformed line or a repeated series."""
    return scan_exposition(text.splitlines())


def scan_exposition(lines: Iterable[str], prefixes: tuple[str, ...] = ("",)) -> list[Sample]:
    """The samples whose names start with one of ``prefixes``, read a line at a time (a
    100 MB scrape holds few of them: other lines are skipped unparsed); refuses a malformed
    kept line or a repeated series."""
    samples: list[Sample] = []
    seen: dict[tuple[str, tuple[tuple[str, str], ...]], int] = {}
    for lineno, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line.startswith("#") or not line.startswith(prefixes):
            continue
        sample = _parse_sample(line, lineno)
        key = (sample.name, tuple(sorted(sample.labels)))
        if key in seen:
            raise ExpositionError(lineno, f"series {_series(sample)} again (first on line "
                                          f"{seen[key]}): one scrape per file")
        seen[key] = lineno
        samples.append(sample)
    return samples


def _parse_sample(line: str, lineno: int) -> Sample:
    m = _NAME.match(line)
    if m is None:
        raise ExpositionError(lineno, f"no metric name at {line[:40]!r}")
    name, i = m.group(), m.end()
    labels: list[tuple[str, str]] = []
    if i < len(line) and line[i] == "{":
        labels, i = _parse_labels(line, i + 1, lineno)
    rest = line[i:]
    if rest and not rest[0].isspace():
        raise ExpositionError(lineno, f"{name}: unexpected {rest[:20]!r} after the name")
    fields = rest.split(" # ", 1)[0].split()  # an OpenMetrics exemplar follows " # "
    if len(fields) not in (1, 2):
        raise ExpositionError(lineno, f"{name}: expected a value and an optional timestamp, "
                                      f"got {rest.strip()[:40]!r}")
    try:
        value = float(fields[0])
    except ValueError:
        raise ExpositionError(lineno, f"{name}: value {fields[0]!r} is not a number") from None
    if len(fields) == 2 and re.fullmatch(r"-?\d+(\.\d+)?", fields[1]) is None:
        raise ExpositionError(lineno, f"{name}: timestamp {fields[1]!r} is not a number")
    names = [k for k, _ in labels]
    if len(set(names)) != len(names):
        raise ExpositionError(lineno, f"{name}: a label repeated in {names}")
    return Sample(name, tuple(labels), value, lineno, fields[0])


def _parse_labels(line: str, i: int, lineno: int) -> tuple[list[tuple[str, str]], int]:
    """Labels from just after ``{`` to just after ``}``."""
    labels: list[tuple[str, str]] = []
    while True:
        while i < len(line) and line[i] in " \t":
            i += 1
        if i < len(line) and line[i] == "}":
            return labels, i + 1
        m = _LABEL.match(line, i)
        if m is None or line[m.end():m.end() + 2] != '="':
            raise ExpositionError(lineno, f"malformed label at {line[i:i + 30]!r}")
        i, chars = m.end() + 2, []
        while i < len(line) and line[i] != '"':
            if line[i] == "\\":
                if line[i + 1:i + 2] not in _UNESCAPE:
                    raise ExpositionError(lineno, f"bad escape {line[i:i + 2]!r} in label "
                                                  f"{m.group()}")
                chars.append(_UNESCAPE[line[i + 1]])
                i += 2
            else:
                chars.append(line[i])
                i += 1
        if i >= len(line):
            raise ExpositionError(lineno, f"label {m.group()}: unterminated value")
        labels.append((m.group(), "".join(chars)))
        i += 1
        if line[i:i + 1] == ",":
            i += 1
        elif line[i:i + 1] != "}":
            raise ExpositionError(lineno, f"expected ',' or '}}' after label {m.group()}")


def _series(sample: Sample) -> str:
    return sample.name + _labels_text(sample.labels)


def _labels_text(labels: tuple[tuple[str, str], ...] | list[tuple[str, str]]) -> str:
    def esc(v: str) -> str:
        return v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")

    return "{" + ",".join(f'{k}="{esc(v)}"' for k, v in labels) + "}" if labels else ""


def _go_float(x: int) -> str:
    """A count as prometheus_client's ``floatToGoString`` prints it: ``123.0``, and from 10^6
    on Go's exponent form ``1.234567e+06``."""
    s = repr(float(x))
    dot = s.find(".")
    if x > 0 and dot > 6:
        return f"{s[0]}.{s[1:dot]}".rstrip("0.") + f"e+0{dot - 1}"
    return s


def to_prometheus(rounds: int, accepted: tuple[int, ...],
                  labels: Mapping[str, str] | None = None) -> str:
    """vLLM's four counters for N rounds of K drafts each with prefix counts a_1..a_K.

    Written as vLLM's ``prometheus_client`` writes them: HELP and TYPE per family, labels
    sorted by name (``labels`` default ``{"engine": "0", "model_name": "specsim"}``; a 0-based
    ``position`` on the per-position counter), counts as ``123.0``; ``num_draft_tokens`` is
    N*K: every specsim round drafts K tokens.
    """
    lab = sorted((labels if labels is not None else {"engine": "0",
                                                     "model_name": "specsim"}).items())
    for k, v in lab:
        if _LABEL.fullmatch(k) is None or k == "position" or not isinstance(v, str):
            raise ValueError(f"label {k!r}={v!r}: need a Prometheus label name (not "
                             f"'position') and a string value")
    values = {DRAFTS: rounds, DRAFT_TOKENS: rounds * len(accepted), ACCEPTED: sum(accepted)}
    out: list[str] = []
    for name, doc in COUNTERS.items():
        out += [f"# HELP {name} {doc}", f"# TYPE {name} counter"]
        if name == PER_POS:
            out += [f"{name}{_labels_text(sorted([*lab, ('position', str(i))]))} {_go_float(a)}"
                    for i, a in enumerate(accepted)]
        else:
            out.append(f"{name}{_labels_text(lab)} {_go_float(values[name])}")
    return "\n".join(out) + "\n"


def is_count(x: float) -> bool:
    """A counter value that is a whole non-negative number."""
    return math.isfinite(x) and x >= 0 and x == int(x)
