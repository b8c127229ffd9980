"""Target/draft model pairs as explicit probability tables: the math every family builds on.

What each family of ``models:`` entries is -- how its entry is read and checked, how a point
turns it into tables, simulates it and computes its exact reference -- lives in
:mod:`specsim.families` (one module per family behind one interface). This module holds the
pieces they share:

* the from-scratch program's order-1 tables (row = current token, row contents = next-token
  distribution), built by :func:`random_table` exactly as the program builds them, with drafts
  from :func:`blend`, :func:`temper` or the α-calibrated construction :func:`calibrate`
  (:func:`table_pair`); user tables read and checked by :func:`load_table` / :func:`check_table`;
* the notebook's stub (:func:`iid_pairs`): fresh target logits ``N(0, sigma^2)``, draft = target
  log-probabilities plus ``N(0, noise^2)`` logit noise, and its frozen Markov form
  (:func:`iid_frozen_markov`);
* :class:`ModelSpec`, one validated ``models:`` entry, whose canonical :meth:`ModelSpec.to_dict`
  is the model's identity (point ids and seeds derive from it).

Sampling temperature follows Leviathan et al. 2022 §2.2: target and draft are both standardised
at the same temperature ``T`` (``T > 0`` divides the logits by ``T``; ``T = 0`` is argmax, one-hot).
"""

from __future__ import annotations

import hashlib
import math
import os
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]

SEED_VOCAB = 6
IID_EPS = 1e-12  # the notebook's log(target + 1e-12)


def random_table(seed: int, sharpness: float = 1.0, vocab: int = SEED_VOCAB) -> FloatArray:
    """A row-stochastic (vocab, vocab) table, bit for bit the seed program's ``random_table``."""
    rng = np.random.default_rng(seed)
    logits = rng.normal(0, sharpness, (vocab, vocab))
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def blend(target: FloatArray, other: FloatArray, weight: float) -> FloatArray:
    """Draft = weight*target + (1-weight)*other (the seed program's ``blend``)."""
    return weight * target + (1.0 - weight) * other


def temper(table: FloatArray, temperature: float) -> FloatArray:
    """Re-sharpen (T<1) or flatten (T>1) each row; T = 0 gives the one-hot argmax row.

    For T > 0 this is the seed program's ``temper`` verbatim (log of the table clipped at 1e-12,
    divided by T, softmax). T = 1 returns the table unchanged, so seed tables stay bit-exact.
    """
    if temperature < 0 or not np.isfinite(temperature):
        raise ValueError(f"temperature must be a finite number >= 0, got {temperature!r}")
    if temperature == 0:
        return one_hot_argmax(table)
    if temperature == 1:
        return np.array(table, dtype=np.float64, copy=True)
    logits = np.log(np.clip(table, 1e-12, None)) / temperature
    e = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def one_hot_argmax(table: FloatArray) -> FloatArray:
    """Greedy decoding as a distribution: all mass on the row's argmax (first index on ties)."""
    out = np.zeros_like(table, dtype=np.float64)
    np.put_along_axis(out, table.argmax(axis=-1)[..., None], 1.0, axis=-1)
    return out


def one_hot_argmin(table: FloatArray) -> FloatArray:
    """All mass on the row's least likely token: the 'far' draft base of :func:`calibrate`."""
    out = np.zeros_like(table, dtype=np.float64)
    np.put_along_axis(out, table.argmin(axis=-1)[..., None], 1.0, axis=-1)
    return out


def softmax(logits: FloatArray, temperature: float = 1.0) -> FloatArray:
    """Softmax over the last axis at a temperature; T = 0 is the one-hot argmax."""
    if temperature == 0:
        return one_hot_argmax(logits)
    z = logits / temperature
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def overlap(p: FloatArray, q: FloatArray) -> FloatArray:
    """Per-context acceptance probability beta = sum_x min(p, q) (Leviathan Def. 3.1)."""
    return np.minimum(p, q).sum(axis=-1)


def calibration_weights(target: FloatArray, other: FloatArray, alpha: float) -> FloatArray:
    """Blend weights w per row with sum_x min(p, w p + (1-w) o) = alpha exactly.

    Since min(p, w p + (1-w) o) = w p + (1-w) min(p, o) elementwise for w in [0, 1],
    beta(w) = w + (1-w) beta0 and w = (alpha - beta0) / (1 - beta0).
    """
    if not (np.isfinite(alpha) and 0.0 <= alpha <= 1.0):
        raise ValueError(f"alpha={alpha} must be a number in [0, 1]")
    beta0 = overlap(target, other)
    if np.any(alpha < beta0 - 1e-12):
        worst = float(beta0.max())
        raise ValueError(
            f"alpha={alpha} is below the draft base's own overlap with the target "
            f"(max over contexts {worst:.6f}); reachable alpha is [{worst:.6f}, 1]"
        )
    with np.errstate(invalid="ignore", divide="ignore"):
        w = np.where(beta0 >= 1.0, 1.0, (alpha - beta0) / (1.0 - beta0))
    return np.clip(w, 0.0, 1.0)


def calibrate(target: FloatArray, other: FloatArray, alpha: float) -> FloatArray:
    """α-calibrated draft: every context accepts with probability exactly alpha."""
    w = calibration_weights(target, other, alpha)[..., None]
    return w * target + (1.0 - w) * other


# --------------------------------------------------------------------------------------------
# Model specifications (what config.yaml describes) and their realisation at a grid point.
# --------------------------------------------------------------------------------------------
DraftKind = Literal["blend", "temper", "calibrated", "identical", "uniform", "noise", "file"]

# A table file: a relative path of plain names, no '..', no shell metacharacters.
TABLE_PATH = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*(/[A-Za-z0-9_][A-Za-z0-9_.-]*)*$")
ROW_SUM_TOL = 1e-9  # rows off by more than this are an error, never silently renormalised


class TableFileError(ValueError):
    """A user-supplied table that cannot be used as a row-stochastic Markov table."""


class ConfigError(ValueError):
    """A config value that cannot be used; the message names the key, the value and the fix.

    Re-exported as :class:`specsim.grid.ConfigError` (its historical home); defined here so the
    model families can raise it without importing the grid.
    """


def check_path(path: str, root: Path | None = None) -> Path:
    """Refuse paths that could escape the working directory or reach a shell."""
    if not TABLE_PATH.match(path) or ".." in Path(path).parts:
        raise TableFileError(f"{path!r} is not an allowed table path: use a relative path of "
                             f"letters, digits, '_', '-', '.' and '/', without '..'")
    base = (root or Path.cwd()).resolve()
    full = (base / path).resolve()
    if not full.is_relative_to(base):
        raise TableFileError(f"{path!r} resolves outside the working directory {base}")
    if full.suffix not in (".npy", ".csv"):
        raise TableFileError(f"{path!r}: tables are .npy or .csv files")
    if not full.is_file():
        raise TableFileError(f"{path!r}: no such file (relative to {base})")
    return full


def file_digest(path: str | Path) -> str:
    """sha256 of a table file. Every point's identity includes it, so a grid asks for it once
    per point; the content is hashed once per (file, size, mtime) and a stat answers the rest."""
    st = Path(path).stat()
    return _content_digest(str(Path(path).resolve()), st.st_size, st.st_mtime_ns)


@lru_cache(maxsize=256)
def _content_digest(path: str, size: int, mtime_ns: int) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _refuse_dtype(dtype: np.dtype[Any], where: str) -> None:
    """Only real numbers (floats, integers) are tables; say what else was found and the fix."""
    if dtype.kind in "fiu":
        return
    if dtype.kind == "c":
        what = "complex numbers; save the real part (table.real) if that is the table"
    elif dtype.kind == "b":
        what = "booleans, not probabilities; save table.astype(float) if that is the table"
    else:
        what = f"dtype {dtype}, not numbers; save a float array with numpy.save"
    raise TableFileError(f"{where} holds {what}")


def _refuse_bad_entries(t: FloatArray, where: str) -> None:
    """Refuse NaN/inf and negative entries of a 2-D table, naming the first one's position."""
    for bad, what in ((~np.isfinite(t), "non-finite"), (t < 0, "negative")):
        if bad.any():
            r, c = map(int, np.argwhere(bad)[0])
            raise TableFileError(f"{where} has a {what} entry {t[r, c]} at row {r}, column {c}; "
                                 f"every entry must be a probability in [0, 1]")


def check_table(table: Any, name: str, role: str) -> FloatArray:
    """Validate a user table: real numbers, square, finite, non-negative, rows summing to one.

    Semantics (as production implementations): q(x) = 0 where p(x) > 0 is allowed -- the draft
    never proposes x and the residual norm(max(p - q, 0)) supplies that mass on a rejection.
    A draft row with no mass at all is an error (the draft would have to propose from it), as
    is a target row with no mass. Rows are used exactly as given (bit for bit), so they must sum
    to one within 1e-9 -- a CSV written with 17 significant digits does.
    """
    try:
        arr = np.asarray(table)
    except ValueError as err:  # ragged nested lists
        raise TableFileError(f"{name}: the {role} table is not a rectangular array "
                             f"({err})") from None
    _refuse_dtype(arr.dtype, f"{name}: the {role} table")
    t = np.asarray(arr, dtype=np.float64)
    if t.ndim != 2 or t.shape[0] != t.shape[1] or t.shape[0] < 2:
        raise TableFileError(f"{name}: the {role} table must be a square (V, V) array with "
                             f"V >= 2, got shape {t.shape}")
    _refuse_bad_entries(t, f"{name}: the {role} table")
    sums = t.sum(axis=1)
    empty = np.flatnonzero(sums == 0)
    if empty.size:
        what = "the draft would have to propose from it" if role == "draft" else \
            "the target has no next-token distribution there"
        raise TableFileError(f"{name}: row {int(empty[0])} of the {role} table has no mass "
                             f"({what})")
    off = np.flatnonzero(np.abs(sums - 1.0) > ROW_SUM_TOL)
    if off.size:
        r = int(off[0])
        raise TableFileError(f"{name}: row {r} of the {role} table sums to {sums[r]:.9g}, not 1 "
                             f"(tolerance {ROW_SUM_TOL}); {off.size} row(s) off")
    return t


def _read_npy(full: Path, where: str) -> NDArray[Any]:
    """A .npy file's array, read by its header alone: never unpickled, never over-allocated.

    The header's shape and dtype must account for the file's size exactly, so an empty,
    truncated or padded file is refused before any data is read.
    """
    with full.open("rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            raise TableFileError(f"{where} is empty (0 bytes); save the table again with "
                                 f"numpy.save")
        try:
            version = np.lib.format.read_magic(f)
            if version == (1, 0):
                shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
            elif version == (2, 0):
                shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
            else:
                raise ValueError(f"unsupported .npy format version {version}")
        except ValueError as err:
            raise TableFileError(f"{where} is not a readable .npy file ({err}); save the table "
                                 f"with numpy.save") from None
        _refuse_dtype(dtype, where)
        nbytes = math.prod(shape) * dtype.itemsize
        if size != f.tell() + nbytes:
            raise TableFileError(f"{where} has {size} bytes but its header describes "
                                 f"{f.tell() + nbytes} (shape {shape}, {dtype}); the file is "
                                 f"truncated or corrupt -- save the table again with numpy.save")
        data = np.frombuffer(f.read(nbytes), dtype=dtype)
    return data.reshape(shape, order="F" if fortran else "C")


# One CSV cell: a decimal number (or nan/inf, refused later with its position), spaces around.
_CSV_CELL = r"\s*[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|nan|inf|infinity)\s*"
_CSV_ROW = re.compile(rf"{_CSV_CELL}(?:,{_CSV_CELL})*", re.IGNORECASE)
_CSV_CELL_RE = re.compile(_CSV_CELL, re.IGNORECASE)


def _read_csv(full: Path, where: str) -> FloatArray:
    """Comma-separated decimal numbers, one row per line; '#' comments and blank lines skipped.

    Strict where numpy is lenient: every cell must be a plain decimal number (no '1_000', no
    empty cells), every row must have the same number of cells, the text must be UTF-8.
    """
    try:
        text = full.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise TableFileError(f"{where} is not UTF-8 text (byte {err.start} cannot be decoded); "
                             f"save it as UTF-8 comma-separated numbers") from None
    rows: list[list[str]] = []
    first = 0
    for lineno, line in enumerate(text.split("\n"), start=1):
        body = line.split("#", 1)[0]
        if not body.strip():
            continue
        cells = body.split(",")
        if not _CSV_ROW.fullmatch(body):
            col, cell = next((i, c) for i, c in enumerate(cells, start=1)
                             if not _CSV_CELL_RE.fullmatch(c))
            raise TableFileError(f"{where}: line {lineno}, column {col}: {cell.strip()[:24]!r} "
                                 f"is not a number; write only comma-separated decimal numbers")
        if not rows:
            first = lineno
        elif len(cells) != len(rows[0]):
            raise TableFileError(f"{where}: line {lineno} has {len(cells)} values but line "
                                 f"{first} has {len(rows[0])}; every row needs one value per "
                                 f"token")
        rows.append(cells)
    if not rows:
        raise TableFileError(f"{where} holds no numbers; write one comma-separated row of "
                             f"next-token probabilities per token")
    return np.array(rows, dtype=np.float64)


def load_table(path: str) -> FloatArray:
    """Read a 2-D table of finite, non-negative reals from a .npy or comma-separated .csv file.

    The path must pass :func:`check_path`. Every fault of the file itself (unreadable, empty,
    truncated, not numbers, complex, boolean, not 2-D, NaN/inf, negative) is a one-line
    :class:`TableFileError` naming the file; :func:`check_table` then checks it as a table.
    Cached by resolved path, size and mtime: a long-lived process (a point-job runner) never
    serves an edited file's old contents.
    """
    full = check_path(path)
    st = full.stat()
    return _load_table(path, full, st.st_size, st.st_mtime_ns)


@lru_cache(maxsize=64)
def _load_table(path: str, full: Path, size: int, mtime_ns: int) -> FloatArray:
    where = repr(path)
    try:
        data = _read_npy(full, where) if full.suffix == ".npy" else _read_csv(full, where)
    except OSError as err:
        raise TableFileError(f"{where} cannot be read ({err.strerror})") from None
    if data.ndim != 2:
        raise TableFileError(f"{where} holds an array of shape {data.shape}; a table is a 2-D "
                             f"(V, V) array, one row per token")
    table = data.astype(np.float64)
    _refuse_bad_entries(table, where)
    return table


load_table.cache_clear = _load_table.cache_clear  # type: ignore[attr-defined]


@dataclass(frozen=True)
class TableSpec:
    """A ``random_table(seed, sharpness)`` or the special bases ``far`` / ``uniform``."""

    seed: int | None = None
    sharpness: float = 1.0
    special: str | None = None  # "far" or "uniform"

    @classmethod
    def from_dict(cls, d: Any) -> TableSpec:
        if isinstance(d, str):
            return cls(special=d)
        return cls(seed=int(d["seed"]), sharpness=float(d.get("sharpness", 1.0)))

    def to_dict(self) -> Any:
        return self.special if self.special else {"seed": self.seed, "sharpness": self.sharpness}

    def realise(self, target: FloatArray, vocab: int) -> FloatArray:
        if self.special == "far":
            return one_hot_argmin(target)
        if self.special == "uniform":
            return np.full((vocab, vocab), 1.0 / vocab)
        assert self.seed is not None
        return random_table(self.seed, self.sharpness, vocab)


@dataclass(frozen=True)
class ModelSpec:
    """One entry of ``models:`` in config.yaml, read by its family (:mod:`specsim.families`).

    The fields are the union of what the families store; each family reads and describes only
    its own (:meth:`specsim.families.Family.build`, :meth:`~specsim.families.Family.describe`).
    Job descriptions carry every field (:func:`specsim.job.describe`), identities only the
    canonical :meth:`to_dict`.
    """

    name: str
    family: str  # a key of specsim.families.FAMILIES
    vocab: int
    draft: DraftKind
    target_seed: int = 1  # markov
    sharpness: float = 2.5  # markov
    weight: float = 1.0  # blend
    draft_temperature: float = 1.0  # temper
    other: TableSpec = TableSpec(special="far")  # blend / calibrated base
    sigma: float = 1.0  # iid
    noise: float = 0.3  # iid
    share: Literal["round", "position"] = "round"  # iid: one (p, q) per round or per position
    seed: int = 0  # iid: seed of the frozen pairs used for the equivalence study
    target_file: str | None = None  # custom: the target table file
    draft_file: str | None = None  # custom: the draft table file (draft kind 'file')

    @property
    def calibrated(self) -> bool:
        return self.draft == "calibrated"

    @classmethod
    def from_dict(cls, name: str, d: dict[str, Any]) -> ModelSpec:
        """The spec of a schema-valid entry, without the family's cross-field checks
        (:meth:`specsim.families.Family.parse` runs those first)."""
        from specsim.families import family_of  # the families import this module

        return family_of(d["family"]).build(name, d)

    def draft_dict(self) -> dict[str, Any]:
        """The draft's canonical description (the same for every family)."""
        draft: dict[str, Any] = {"kind": self.draft}
        if self.draft == "blend":
            draft |= {"weight": self.weight, "other": self.other.to_dict()}
        elif self.draft == "temper":
            draft["temperature"] = self.draft_temperature
        elif self.draft == "calibrated":
            draft["other"] = self.other.to_dict()
        elif self.draft == "file":
            assert self.draft_file is not None
            draft |= {"file": self.draft_file, "sha256": file_digest(check_path(self.draft_file))}
        return draft

    def to_dict(self) -> dict[str, Any]:
        """Canonical description: two specs are the same model iff their dicts are equal.

        ``family``, ``vocab``, the draft (:meth:`draft_dict`), then the family's own settings
        (:meth:`specsim.families.Family.describe`). Point ids and seeds hash this dict, so its
        output for an existing model must never change (tests/test_families.py pins it).
        """
        from specsim.families import family_of

        out: dict[str, Any] = {"family": self.family, "vocab": self.vocab,
                               "draft": self.draft_dict()}
        return out | family_of(self.family).describe(self)


def table_pair(
    spec: ModelSpec, base: FloatArray, temperature: float, alpha: float | None
) -> tuple[FloatArray, FloatArray]:
    """Target P and draft Q (both (V, V)) from the untempered target ``base``.

    Drafts are built from the untempered target, then both tables are standardised at the
    temperature (Leviathan §2.2). Calibrated drafts are built *after* tempering, so that the
    per-context acceptance is exactly ``alpha`` at every temperature.
    """
    target = temper(base, temperature)
    if spec.draft == "calibrated":
        if alpha is None:
            raise ValueError(f"model {spec.name!r} has a calibrated draft and needs an alpha")
        return target, calibrate(target, calibration_base(spec, target, temperature), alpha)
    return target, temper(seed_draft(spec, base), temperature)


def calibration_base(spec: ModelSpec, target: FloatArray, temperature: float) -> FloatArray:
    """The 'other' table a calibrated draft blends the (tempered) target with."""
    other = spec.other.realise(target, spec.vocab)
    if spec.other.special is None:
        other = temper(other, temperature)
    return other


def seed_draft(spec: ModelSpec, base: FloatArray) -> FloatArray:
    """A table model's own (uncalibrated) draft from its untempered target ``base``."""
    if spec.draft == "file":
        assert spec.draft_file is not None
        return check_table(load_table(spec.draft_file), spec.name, "draft")
    if spec.draft == "blend":
        return blend(base, spec.other.realise(base, spec.vocab), spec.weight)
    if spec.draft == "temper":
        return temper(base, spec.draft_temperature)
    if spec.draft == "identical":
        return base.copy()
    if spec.draft == "uniform":
        return np.full_like(base, 1.0 / spec.vocab)
    raise ValueError(f"unknown draft kind {spec.draft!r} for model {spec.name!r}")


def iid_pairs(
    spec: ModelSpec,
    temperature: float,
    alpha: float | None,
    rng: np.random.Generator,
    shape: tuple[int, ...],
) -> tuple[FloatArray, FloatArray]:
    """Draw fresh (p, q) pairs of the notebook's stub, arrays of shape ``shape + (vocab,)``.

    Target logits ~ N(0, sigma^2); draft logits = log(p + 1e-12) + N(0, noise^2) with p the
    T = 1 target (the notebook's ``draft_dist``); both then standardised at the temperature.
    Calibrated drafts blend p with the one-hot on p's least likely token, per pair.
    """
    logits = rng.normal(0.0, spec.sigma, (*shape, spec.vocab))
    p1 = softmax(logits)
    target = p1 if temperature == 1 else softmax(logits, temperature)
    if spec.draft == "calibrated":
        if alpha is None:
            raise ValueError(f"model {spec.name!r} has a calibrated draft and needs an alpha")
        return target, calibrate(target, one_hot_argmin(target), alpha)
    if spec.draft == "identical":
        return target, target.copy()
    if spec.draft == "uniform":
        return target, np.full_like(target, 1.0 / spec.vocab)
    if spec.draft not in ("noise", "temper"):
        raise ValueError(f"draft kind {spec.draft!r} is not available for iid model {spec.name!r}")
    noise_scale = spec.noise if spec.draft == "noise" else 0.0
    draft_logits = np.log(p1 + IID_EPS) + rng.normal(0.0, noise_scale, p1.shape)
    if spec.draft == "temper":
        draft_logits = draft_logits / spec.draft_temperature
    return target, softmax(draft_logits, temperature)


def iid_frozen_markov(
    spec: ModelSpec, temperature: float, alpha: float | None, positions: int
) -> tuple[FloatArray, FloatArray, int]:
    """The stub with one frozen (p_t, q_t) per position t, as an order-1 Markov model.

    A fixed sequence of pairs drawn from ``spec.seed`` is a position-indexed process; making the
    position part of the token (state ``t*V + x`` = token x emitted at position t, plus a start
    state) turns it into an ordinary Markov table, so the Markov engine and the exact enumeration
    apply unchanged. Returns (P, Q, start_state); tokens map back with ``state % V``.
    """
    v = spec.vocab
    rng = np.random.default_rng(spec.seed)
    p, q = iid_pairs(spec, temperature, alpha, rng, (positions,))
    n_states = positions * v + 1
    start = positions * v
    big_p = np.zeros((n_states, n_states))
    big_q = np.zeros((n_states, n_states))
    # From the start state the next token is at position 0; from (t, x) it is at position t+1.
    big_p[start, 0:v], big_q[start, 0:v] = p[0], q[0]
    for t in range(positions - 1):
        rows = slice(t * v, (t + 1) * v)
        cols = slice((t + 1) * v, (t + 2) * v)
        big_p[rows, cols], big_q[rows, cols] = p[t + 1], q[t + 1]
    last = slice((positions - 1) * v, positions * v)  # absorbing tail: reuse the last pair
    big_p[last, last], big_q[last, last] = p[-1], q[-1]
    return big_p, big_q, start
