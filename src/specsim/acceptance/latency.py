"""A measured latency profile: seconds of one forward pass by role, batch size and tokens.

The file is a CSV with one row per measured forward (extra columns are ignored)::

    role,batch,tokens,seconds,seconds_low,seconds_high
    target,1,1,0.0210,0.0205,0.0216
    target,1,5,0.0224,0.0219,0.0231
    draft,1,1,0.0031,,

- ``role``: ``target`` or ``draft``;
- ``batch``: sequences in the forward (>= 1);
- ``tokens``: new tokens per sequence in it (1 for plain decoding and for a draft step; K + 1
  when the target verifies K drafts);
- ``seconds``: the median wall time of one such forward (> 0);
- ``seconds_low``/``seconds_high`` (optional, may be empty on a row): a spread of that time
  (say the quartiles, or an interval of the median), ``seconds_low <= seconds <= seconds_high``.

Cells not measured are **interpolated, never extrapolated**: at a measured batch size, linearly
in ``tokens`` between the two nearest measured token counts; between two measured batch sizes,
linearly in ``batch`` between the two values so found (each must cover the tokens asked). A
batch size below the smallest or above the largest measured, or tokens beyond the largest
measured at a bracketing batch, is refused with the file, role and cell named: the profile does
not cover it. The spread is interpolated the same way (a row without one counts as
``seconds_low = seconds_high = seconds``).

:meth:`LatencyProfile.from_roofline` builds the same profile from :mod:`specsim.costs`'
roofline (a transformer shape pair on a device) for a user without measurements.
"""

from __future__ import annotations

import csv
import math
from bisect import bisect_left
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from specsim.acceptance.cells import number, whole
from specsim.acceptance.cost import RoundCost

__all__ = ["ROLES", "LatencyError", "LatencyProfile", "Seconds", "profile_of"]

ROLES: Final = ("target", "draft")
REQUIRED: Final = ("role", "batch", "tokens", "seconds")


class LatencyError(ValueError):
    """A latency profile that cannot be used: the message names the file, the line or column
    and the problem, on one line."""


@dataclass(frozen=True)
class Seconds:
    """One forward's time: its median and its spread."""

    median: float
    low: float
    high: float


@dataclass(frozen=True)
class LatencyProfile:
    """Measured forward times: ``cells[role][batch][tokens]`` -> :class:`Seconds`; a cost
    model (:meth:`round_cost`, :class:`specsim.acceptance.cost.CostModel`)."""

    cells: Mapping[str, Mapping[int, Mapping[int, Seconds]]]
    source: str = "latency profile"
    spread: bool = field(default=False)  # whether any row gave seconds_low / seconds_high

    # ------------------------------------------------------------------ reading
    @classmethod
    def read(cls, path: str | Path, required: Sequence[str] = ROLES) -> LatencyProfile:
        """Read and check a profile CSV (module docstring); LatencyError names what is wrong.
        ``required``: the roles it must have rows of (with measured runs, only the target's
        verify growth is used: ``("target",)``)."""
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8-sig")  # a BOM (spreadsheet exports)
        except (OSError, UnicodeDecodeError) as err:
            raise LatencyError(f"{path}: cannot read the latency profile "
                               f"({getattr(err, 'strerror', None) or err})") from None
        rows = list(csv.reader(text.splitlines()))
        if not rows:
            raise LatencyError(f"{path}: empty latency profile; need a header "
                               f"{','.join(REQUIRED)}[,seconds_low,seconds_high]")
        header = [h.strip() for h in rows[0]]
        missing = [c for c in REQUIRED if c not in header]
        if missing:
            raise LatencyError(f"{path}: line 1: missing column(s) {', '.join(missing)} (header "
                               f"{','.join(header)}; need {','.join(REQUIRED)})")
        col = {name: header.index(name) for name in header}
        cells: dict[str, dict[int, dict[int, Seconds]]] = {r: {} for r in ROLES}
        spread = False
        for n, row in enumerate(rows[1:], start=2):
            if not any(x.strip() for x in row):
                continue
            where = f"{path}: line {n}"
            if len(row) < len(header):
                raise LatencyError(f"{where}: {len(row)} fields, the header has {len(header)}")
            value = {name: row[i].strip() for name, i in col.items()}
            role = value["role"]
            if role not in ROLES:
                raise LatencyError(f"{where}: column role: {role!r} is not one of {list(ROLES)}")
            batch = _count(value["batch"], f"{where}: column batch")
            tokens = _count(value["tokens"], f"{where}: column tokens")
            sec = _seconds(value["seconds"], f"{where}: column seconds")
            low = high = sec
            for name in ("seconds_low", "seconds_high"):
                if value.get(name):
                    spread = True
                    v = _seconds(value[name], f"{where}: column {name}")
                    if name == "seconds_low":
                        low = v
                    else:
                        high = v
            if not low <= sec <= high:
                raise LatencyError(f"{where}: need seconds_low <= seconds <= seconds_high "
                                   f"(got {low:g}, {sec:g}, {high:g})")
            if tokens in cells[role].get(batch, {}):
                raise LatencyError(f"{where}: a second {role} row at batch {batch}, tokens "
                                   f"{tokens}: give one median per cell")
            cells[role].setdefault(batch, {})[tokens] = Seconds(sec, low, high)
        for role in required:
            if not cells[role]:
                raise LatencyError(f"{path}: no {role} rows: the profile needs the target's and "
                                   f"the draft's forward times (a draft that costs nothing, "
                                   f"such as n-gram lookup, is a row of ~0 seconds)")
        return cls(_frozen(cells), str(path), spread)

    @classmethod
    def from_roofline(cls, target: str, draft: str, device: str, batches: Iterable[int],
                      max_tokens: int, n_ctx: int = 512) -> LatencyProfile:
        """The roofline's times (:mod:`specsim.intensity`) of the ``target`` and ``draft``
        shapes on ``device`` at each batch size, tokens 1..max_tokens (no spread)."""
        from specsim.costs import DEVICE_NAMES, SHAPE_NAMES
        from specsim.intensity import batch_roofline_time

        for name, known in ((target, SHAPE_NAMES), (draft, SHAPE_NAMES), (device, DEVICE_NAMES)):
            if name not in known:
                raise LatencyError(f"roofline: {name!r} is not one of {sorted(known)}")
        t, d, dev = SHAPE_NAMES[target], SHAPE_NAMES[draft], DEVICE_NAMES[device]
        cells: dict[str, dict[int, dict[int, Seconds]]] = {"target": {}, "draft": {}}
        for b in sorted(set(int(x) for x in batches)):
            cells["target"][b] = {}
            for n in range(1, max_tokens + 1):
                s = batch_roofline_time(t, dev, n, b, n_ctx)
                cells["target"][b][n] = Seconds(s, s, s)
            s = batch_roofline_time(d, dev, 1, b, n_ctx)
            cells["draft"][b] = {1: Seconds(s, s, s)}
        return cls(_frozen(cells), f"roofline {target}/{draft} on {device}", False)

    # ------------------------------------------------------------------ lookup
    def batches(self, role: str = "target") -> tuple[int, ...]:
        return tuple(sorted(self.cells[role]))

    def max_tokens(self, batch: int) -> int:
        """The most tokens per sequence the target's times cover at ``batch``."""
        lo, hi = self._bracket("target", batch, 1)
        return min(max(self.cells["target"][b]) for b in {lo, hi})

    def target(self, batch: int, tokens: int) -> Seconds:
        """T_target(batch, tokens)."""
        return self._at("target", batch, tokens)

    def draft(self, batch: int) -> Seconds:
        """T_draft(batch, 1): one draft step of one token per sequence."""
        return self._at("draft", batch, 1)

    def check_covers(self, batches: Sequence[int], max_gamma: int, draft: bool = True) -> None:
        """Refuse (naming the file and the first cell missing) unless the profile covers the
        target at tokens 1..max_gamma+1 and (``draft``) the draft at 1 token for every batch
        size."""
        for b in batches:
            if draft:
                self.draft(b)
            self.target(b, 1)
            self.target(b, max_gamma + 1)

    def round_cost(self, batch: int, gamma: int) -> RoundCost:
        """The profile as a cost model (:class:`specsim.acceptance.cost.CostModel`): a round
        of K' = ``gamma`` drafts costs K' T_draft(b, 1) + T_target(b, K' + 1), a plain step
        T_target(b, 1); the ratio's interval takes the slow ends of the round over the fast
        end of the plain step, and the other way round."""
        plain = self.target(batch, 1)
        if not plain.low > 0:
            raise LatencyError(f"{self.source}: the target's time at batch {batch}, tokens 1 "
                               f"is 0 seconds: a speedup over plain decoding needs it > 0")
        draft = self.draft(batch) if gamma else Seconds(0.0, 0.0, 0.0)
        verify = self.target(batch, gamma + 1)
        return RoundCost(gamma, plain.median, draft.median, verify.median,
                         (gamma * draft.low + verify.low) / plain.high,
                         (gamma * draft.high + verify.high) / plain.low)

    def describe(self) -> str:
        """The profile's model and assumptions (Markdown; ``schedule.md``)."""
        from specsim.acceptance.model_report import describe_profile
        return describe_profile(self)

    def _bracket(self, role: str, batch: int, tokens: int) -> tuple[int, int]:
        known = self.batches(role)
        if batch < known[0] or batch > known[-1]:
            raise LatencyError(f"{self.source}: no {role} time at batch {batch} (tokens "
                               f"{tokens}): measured batches are {list(known)}, and a latency "
                               f"profile is interpolated, never extrapolated")
        i = bisect_left(known, batch)
        if known[i] == batch:
            return batch, batch
        return known[i - 1], known[i]

    def _at(self, role: str, batch: int, tokens: int) -> Seconds:
        lo, hi = self._bracket(role, batch, tokens)
        a = self._in_tokens(role, lo, tokens, batch)
        if lo == hi:
            return a
        b = self._in_tokens(role, hi, tokens, batch)
        w = (batch - lo) / (hi - lo)
        return _mix(a, b, w)

    def _in_tokens(self, role: str, batch: int, tokens: int, asked: int) -> Seconds:
        row = self.cells[role][batch]
        if tokens in row:
            return row[tokens]
        known = sorted(row)
        if tokens < known[0] or tokens > known[-1]:
            via = "" if batch == asked else f" (needed to interpolate batch {asked})"
            raise LatencyError(f"{self.source}: no {role} time at batch {batch}, tokens "
                               f"{tokens}{via}: measured tokens there are {known}, and a "
                               f"latency profile is interpolated, never extrapolated")
        i = bisect_left(known, tokens)
        t0, t1 = known[i - 1], known[i]
        return _mix(row[t0], row[t1], (tokens - t0) / (t1 - t0))


def _mix(a: Seconds, b: Seconds, w: float) -> Seconds:
    return Seconds(*((1 - w) * x + w * y for x, y in ((a.median, b.median), (a.low, b.low),
                                                    (a.high, b.high))))


def _count(text: str, where: str) -> int:
    return whole(text, where, 1, LatencyError)


def _seconds(text: str, where: str) -> float:
    value = number(text, where, LatencyError)
    if not math.isfinite(value) or value < 0:
        raise LatencyError(f"{where}: {text!r} must be a finite time >= 0 seconds")
    return value


def _frozen(cells: dict[str, dict[int, dict[int, Seconds]]]
            ) -> Mapping[str, Mapping[int, Mapping[int, Seconds]]]:
    from types import MappingProxyType
    return MappingProxyType({r: MappingProxyType({b: MappingProxyType(dict(t))
                                                  for b, t in sorted(c.items())})
                             for r, c in cells.items()})


def profile_of(latency: str, roofline: Sequence[str], batches: Sequence[int],
               max_gamma: int) -> LatencyProfile:
    """The profile a config names -- the CSV ``latency``, else the roofline of ``roofline``'s
    (target, draft, device) -- checked to cover every batch size at tokens 1..max_gamma+1:
    what the engine route's jobs will read, refused (LatencyError) before any of them runs."""
    if latency:
        profile = LatencyProfile.read(latency)
    else:
        target, draft, device = roofline
        profile = LatencyProfile.from_roofline(target, draft, device, batches, max_gamma + 1)
    profile.check_covers(sorted(set(int(b) for b in batches)), max_gamma)
    return profile

