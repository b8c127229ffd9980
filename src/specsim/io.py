"""Reading and writing results: one Parquet file per grid point, atomic file writes.

Every file is written to a temporary name in its destination directory and renamed into place,
so a reader (or a resumed run) never sees half a file. A point file (``results/sim/...`` and
``results/exact/...``) is one row under an explicit schema; its Parquet metadata carries

* ``specsim.schema``         ``sim/1`` or ``exact/1`` (``scheme_sim/1``, ``scheme_exact/1`` for
                             a ``schemes`` point: :func:`point_kinds`),
* ``specsim.point_digest``   the digest of the job that wrote it (:func:`specsim.job.describe`):
                             the point's identity, budget, root seed and numbers version,
* ``specsim.payload_sha256`` sha256 of the row's canonical JSON, re-computed by every reader,
* ``specsim.versions``       the software that wrote it;

and its data pages carry Parquet CRC checksums (verified on read). A reader refuses, naming the
file and what to do, a file that is truncated, undecodable, of another schema, whose payload
does not hash to its recorded digest, or that was written for another identity (stale).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import specsim

if TYPE_CHECKING:  # pandas costs ~0.5 s to import: point jobs never load it
    import pandas as pd

_LIST_I64 = pa.list_(pa.int64())
_LIST_F64 = pa.list_(pa.float64())

# What every Monte Carlo point file starts with: its point, its budget and its seed.
_RUN_FIELDS = [
    pa.field("point_id", pa.string(), nullable=False),
    pa.field("measure", pa.string(), nullable=False),
    pa.field("gamma", pa.int32(), nullable=False),
    pa.field("vocab", pa.int32(), nullable=False),
    pa.field("chains", pa.int64(), nullable=False),
    pa.field("rounds", pa.int64(), nullable=False),
    pa.field("burn_in", pa.int64(), nullable=False),
    pa.field("batches", pa.int32(), nullable=False),
    pa.field("trials", pa.int64(), nullable=False),
    pa.field("seed_entropy", pa.uint64(), nullable=False),
    pa.field("seed_key", pa.list_(pa.uint32()), nullable=False),
]

SCHEMAS = {
    # Monte Carlo sufficient statistics of one point.
    "sim": pa.schema([
        *_RUN_FIELDS,
        # accepted-drafts histogram per batch of chains, flattened (batches * (gamma + 1))
        pa.field("accepted_hist", _LIST_I64, nullable=False),
        # counts of the first two emitted tokens, flattened (vocab * vocab); empty if unused
        pa.field("joint2", _LIST_I64, nullable=False),
    ]),
    # Exact reference values of one point; a field the point's measure has no value for is null.
    "exact": pa.schema([
        pa.field("point_id", pa.string(), nullable=False),
        pa.field("exact_method", pa.string(), nullable=False),
        pa.field("tokens_exact", pa.float64()),
        pa.field("tokens_exact_se", pa.float64()),
        pa.field("tokens_stationary", pa.float64()),
        pa.field("accept_rate_exact", pa.float64()),
        pa.field("accept_fraction_exact", pa.float64()),
        pa.field("alpha_bar", pa.float64()),
        pa.field("joint_target", _LIST_F64),
        pa.field("joint_exact", _LIST_F64),
        pa.field("tv_exact", pa.float64()),
        pa.field("tokens_closed_form", pa.float64()),
    ]),
    # A ``schemes`` point (specsim.schemes.measure): long run and lossless check in one job.
    "scheme_sim": pa.schema([
        *_RUN_FIELDS,
        # tokens emitted per round: histogram per batch of chains, flattened (batches * width)
        pa.field("width", pa.int32(), nullable=False),
        pa.field("tokens_hist", _LIST_I64, nullable=False),
        # draft tokens proposed, summed per batch (batches,)
        pa.field("drafted", _LIST_I64, nullable=False),
        pa.field("joint2", _LIST_I64, nullable=False),
    ]),
    "scheme_exact": pa.schema([
        pa.field("point_id", pa.string(), nullable=False),
        pa.field("exact_method", pa.string(), nullable=False),
        pa.field("tokens_exact", pa.float64()),
        pa.field("drafted_exact", pa.float64()),
        pa.field("tokens_stationary", pa.float64()),
        pa.field("drafted_stationary", pa.float64()),
        pa.field("tokens_law", _LIST_F64),
        pa.field("joint_target", _LIST_F64),
        pa.field("joint_exact", _LIST_F64),
        pa.field("tv_exact", pa.float64()),
    ]),
}
SCHEMA_TAG = {kind: f"{kind}/1".encode() for kind in SCHEMAS}


def point_kinds(measure: str) -> tuple[str, str]:
    """The schemas of a point's (results/sim/, results/exact/) files, by its measure."""
    return ("scheme_sim", "scheme_exact") if measure == "scheme" else ("sim", "exact")


class IntegrityError(RuntimeError):
    """A result file that is unreadable, corrupt, tampered with or stale; the message names
    the file and what to delete or rerun."""


class PointFileError(IntegrityError):
    """A point file that is unreadable, corrupt, of another schema, or stale."""


NOT_INSTALLED = "not installed"
# PEP 508: a requirement starts with its project name; extras, versions, markers follow.
_REQUIREMENT_NAME = re.compile(r"\s*([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)")


def _canonical_name(name: str) -> str:
    """PEP 503 normalised project name: lower case, runs of -_. as one '-'."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(requirement: str) -> str | None:
    """Project name of one requirement string (``'snakemake>=9; extra == "workflow"'`` ->
    ``'snakemake'``); None for a blank line or a comment."""
    m = _REQUIREMENT_NAME.match(requirement)
    return _canonical_name(m.group(1)) if m else None


@functools.cache
def _versions(dist: str) -> tuple[tuple[str, str], ...]:
    import importlib.metadata  # here, not at the top: a point job never scans the metadata

    try:
        requires = importlib.metadata.requires(dist) or []
    except importlib.metadata.PackageNotFoundError:
        requires = []  # running from a source tree that was never installed
    names = {n for r in requires if (n := requirement_name(r)) is not None} - {dist}
    found = {"python": platform.python_version(), dist: specsim.__version__}
    for name in names:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = NOT_INSTALLED
    return tuple(sorted(found.items()))


def point_versions() -> dict[str, str]:
    """The software that shapes a point file's numbers, read from the imported modules (a
    point job cannot afford :func:`versions`' ~0.3 s metadata scan; grid.json has the full
    list)."""
    return {"numpy": np.__version__, "pyarrow": pa.__version__,
            "python": platform.python_version(), "specsim": specsim.__version__}


def versions(dist: str = "specsim") -> dict[str, str]:
    """Version of python, of specsim (the code imported) and of every package specsim's
    distribution requires, extras included (snakemake, pytest, torch, ...), sorted by name.

    Names come from ``importlib.metadata.requires``, so a dependency added to pyproject.toml
    is recorded without editing this list; one that is not installed is recorded as
    ``"not installed"``, never an error.
    """
    return dict(_versions(dist))


_PROC_STATUS = Path("/proc/self/status")  # Linux >= 4.7 reports the umask here


def _umask() -> int:
    """The process umask, read from /proc on Linux so no other thread sees it change.

    Elsewhere it is read the only portable way, by setting it and restoring it at once.
    """
    try:
        for line in _PROC_STATUS.read_text(encoding="ascii").splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


@contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it onto ``path`` only on success.

    ``mkstemp`` creates the temporary file 0600; before the rename it gets the mode any new
    file would get, ``0o666 & ~umask``, so outputs stay readable by the group/others the user
    allows (0644 under umask 022, 0664 under 002).
    """
    dest = Path(path)
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, dest)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` atomically as UTF-8 with ``\\n`` line ends, whatever the locale/platform."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8", newline="\n")


def write_json(path: str | os.PathLike[str], obj: Any, sort_keys: bool = True) -> None:
    write_text(path, json.dumps(obj, indent=2, sort_keys=sort_keys, allow_nan=False) + "\n")


def write_table(df: pd.DataFrame, csv_path: str | os.PathLike[str]) -> pd.DataFrame:
    """Tidy CSV for machines plus a Markdown twin for people (same stem, ``.md``), every float
    rounded as :func:`specsim.precision.printable` says (the same bytes on every CPU). Returns
    the rounded frame, for writers of further renderings of the same numbers."""
    from specsim.precision import printable

    out = printable(df)
    data = out.to_csv(index=False, lineterminator="\n").encode()
    with atomic_path(csv_path) as tmp:
        tmp.write_bytes(data)
    write_checksum(csv_path, data)
    md = Path(csv_path).with_suffix(".md")
    write_text(md, to_markdown(out))
    return out


def checksum_path(path: str | os.PathLike[str]) -> Path:
    """``<file>.sha256`` beside ``path``, in ``sha256sum`` format (``sha256sum -c`` reads it)."""
    return Path(f"{path}.sha256")


def write_checksum(path: str | os.PathLike[str], data: bytes) -> None:
    write_text(checksum_path(path), f"{hashlib.sha256(data).hexdigest()}  {Path(path).name}\n")


def read_verified(path: str | os.PathLike[str]) -> bytes:
    """The bytes of ``path`` after checking them against its ``.sha256`` sidecar."""
    fix = "delete it and rerun snakemake to rebuild it"
    data = Path(path).read_bytes()  # a missing table is a missing input, not corruption
    try:
        recorded = checksum_path(path).read_text(encoding="ascii").split()[0]
    except FileNotFoundError as err:
        raise IntegrityError(f"{path}: {Path(err.filename).name} is missing; {fix}") from None
    except (OSError, UnicodeDecodeError, IndexError) as err:
        raise IntegrityError(f"{path}: cannot read it or its checksum ({type(err).__name__}); "
                             f"{fix}") from None
    if hashlib.sha256(data).hexdigest() != recorded:
        raise IntegrityError(f"{path}: content does not match {checksum_path(path).name} "
                             f"(corrupt or edited); {fix}")
    return data


def read_table(path: str | os.PathLike[str]) -> pd.DataFrame:
    """A table written by :func:`write_table`, verified against its checksum first."""
    import io as _io

    import pandas as pd

    data = read_verified(path)
    try:
        return pd.read_csv(_io.BytesIO(data))
    except Exception as err:
        raise IntegrityError(f"{path}: not a readable table ({type(err).__name__}: {err}); "
                             f"delete it and rerun snakemake") from None


def write_json_verified(path: str | os.PathLike[str], obj: dict[str, Any]) -> None:
    """JSON with a ``sha256`` member over the canonical JSON of everything else. Key order is
    kept as given (a config's order of models and studies means something: the first model is
    a default, and a point shared by two model names takes the first name)."""
    body = {k: v for k, v in obj.items() if k != "sha256"}
    write_json(path, {**body, "sha256": payload_digest(body)}, sort_keys=False)


def read_json_verified(path: str | os.PathLike[str]) -> dict[str, Any]:
    fix = "delete it and rerun snakemake to rebuild it"
    try:
        obj = json.loads(Path(path).read_bytes().decode("utf-8"))
    except FileNotFoundError:
        raise IntegrityError(f"{path}: no such file; rerun snakemake to build it") from None
    except (OSError, UnicodeDecodeError, ValueError) as err:
        raise IntegrityError(f"{path}: not JSON ({type(err).__name__}); {fix}") from None
    if not isinstance(obj, dict) or "sha256" not in obj:
        raise IntegrityError(f"{path}: no checksum member (not written by specsim); {fix}")
    body = {k: v for k, v in obj.items() if k != "sha256"}
    if payload_digest(body) != obj["sha256"]:
        raise IntegrityError(f"{path}: content does not match its checksum (corrupt or edited); "
                             f"{fix}")
    return body


def _table_digest(table: pa.Table) -> str:
    """sha256 of the table's values as canonical JSON, column by column (types that Parquet
    may map differently on reading -- string vs large_string -- give the same digest)."""
    return payload_digest(table.to_pydict())


def write_frame(df: pd.DataFrame, path: str | os.PathLike[str]) -> None:
    """A DataFrame as Parquet with page checksums and a digest of its data in the metadata."""
    table = pa.Table.from_pandas(df, preserve_index=False)
    meta = {**(table.schema.metadata or {}),
            b"specsim.payload_sha256": _table_digest(table).encode()}
    with atomic_path(path) as tmp:
        pq.write_table(table.replace_schema_metadata(meta), tmp, compression="zstd",
                       write_page_checksum=True)


def read_frame(path: str | os.PathLike[str]) -> pd.DataFrame:
    """Read and verify a :func:`write_frame` file."""
    fix = "delete it and rerun snakemake to rebuild it"
    try:
        table = pq.read_table(path, page_checksum_verification=True)
        recorded = (table.schema.metadata or {}).get(b"specsim.payload_sha256", b"").decode()
        ok = recorded == _table_digest(table)
        if ok:
            return table.to_pandas()
    except Exception as err:
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise IntegrityError(f"{path}: not a readable Parquet file ({reason}); {fix}") from None
    raise IntegrityError(f"{path}: content does not match its recorded checksum; {fix}")


_HTML_STYLE = """
body{font:13px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;
color:#1f2328;background:#fff;margin:0;padding:14px 18px}
h1{font-size:16px;margin:0 0 4px}p.about{margin:0 0 10px;max-width:62em;color:#444}
.wrap{overflow:auto;max-height:70vh;border:1px solid #d0d7de;border-radius:4px}
table{border-collapse:collapse;font-variant-numeric:tabular-nums}
th,td{padding:3px 8px;border-bottom:1px solid #eaeef2;text-align:left;vertical-align:top}
th,td.num,td.na{white-space:nowrap}td{min-width:6em}
th{position:sticky;top:0;background:#f0f3f6;border-bottom:1px solid #d0d7de;cursor:help;
font-weight:600}
tbody tr:nth-child(even){background:#f8fafc}tbody tr:hover{background:#eef4ff}
td.num{text-align:right}td.na{color:#aaa;text-align:center}
tr.fail td{background:#ffe4e4;color:#8b0000}td.pass{color:#116329;font-weight:600}
td.failed{font-weight:700}
p.shape{color:#666;margin:6px 0 12px}
dl{display:grid;grid-template-columns:max-content 1fr;gap:2px 14px;margin:0;max-width:70em}
dt{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12px}dd{margin:0}
""".strip()


def _html_cell(value: Any) -> tuple[str, str]:
    """(text, CSS class) of one table cell: 4 significant digits, booleans as yes/no."""
    import html

    if value is None or (isinstance(value, float | np.floating) and np.isnan(value)):
        return "\u2013", "na"
    if isinstance(value, bool | np.bool_):
        return ("yes" if value else "no"), ""
    if isinstance(value, int | np.integer):
        return (f"{int(value):,}" if abs(int(value)) >= 10_000 else str(int(value))), "num"
    if isinstance(value, float | np.floating):
        text = f"{float(value):.4g}"
        return ("0" if text == "-0" else text), "num"
    return html.escape(str(value)).replace("/", "/<wbr>"), ""  # paths may wrap at a slash


def write_html_table(df: pd.DataFrame, html_path: str | os.PathLike[str], title: str,
                     about: str = "", columns: dict[str, str] | None = None,
                     fail_column: str | None = None) -> None:
    """A small static HTML page of ``df`` for people (the Snakemake report shows it inline).

    No script, no external asset, no timestamp (the same table gives the same bytes):
    ``title`` and ``about`` above the table, numbers to 4 significant digits (the CSV keeps
    full precision), the meaning of each column (``columns``) as the tooltip of its header and
    in a list below. Rows whose ``fail_column`` is false are marked red.
    """
    import html

    columns = columns or {}
    head = "".join(
        f'<th title="{html.escape(columns.get(str(c), ""))}">{html.escape(str(c))}</th>'
        for c in df.columns)
    body = []
    fail_at = list(df.columns).index(fail_column) if fail_column in df.columns else None
    for row in df.itertuples(index=False):
        failed = fail_at is not None and not bool(row[fail_at])
        cells = []
        for i, value in enumerate(row):
            text, cls = _html_cell(value)
            if i == fail_at:
                text, cls = ("FAIL", "failed") if failed else ("pass", "pass")
            cells.append(f'<td class="{cls}">{text}</td>' if cls else f"<td>{text}</td>")
        body.append(('<tr class="fail">' if failed else "<tr>") + "".join(cells) + "</tr>")
    legend = "".join(f"<dt>{html.escape(str(c))}</dt><dd>{html.escape(columns[str(c)])}</dd>"
                     for c in df.columns if columns.get(str(c)))
    n_rows, n_cols = df.shape
    page = "\n".join([
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{html.escape(title)}</title>",
        f"<style>{_HTML_STYLE}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        f'<p class="about">{html.escape(about)}</p>' if about else "",
        f'<div class="wrap"><table><thead><tr>{head}</tr></thead><tbody>',
        *body,
        "</tbody></table></div>",
        f'<p class="shape">{n_rows:,} rows, {n_cols} columns; numbers to 4 significant '
        f"digits (the CSV beside this file has them in full).</p>",
        f"<dl>{legend}</dl>" if legend else "",
        "</body></html>",
    ])
    write_text(html_path, page + "\n")


def to_markdown(df: pd.DataFrame) -> str:
    def fmt(v: Any) -> str:
        if isinstance(v, float | np.floating):
            return "" if np.isnan(v) else f"{v:.4g}"
        return str(v)

    head = "| " + " | ".join(df.columns) + " |"
    sep = "|" + "---|" * len(df.columns)
    rows = ["| " + " | ".join(fmt(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join([head, sep, *rows]) + "\n"


def payload_digest(record: dict[str, Any]) -> str:
    """sha256 of a row's canonical JSON (NaN spelled ``NaN``, keys sorted)."""
    text = json.dumps(record, sort_keys=True, separators=(",", ":"), allow_nan=True)
    return hashlib.sha256(text.encode()).hexdigest()


def _canonical_row(record: dict[str, Any], schema: pa.Schema) -> dict[str, Any]:
    """The row as the schema stores it (ints as int, floats as float, lists as lists)."""
    out: dict[str, Any] = {}
    for field in schema:
        v = record.get(field.name)
        if v is None:
            out[field.name] = None
        elif pa.types.is_list(field.type):
            cast = float if pa.types.is_floating(field.type.value_type) else int
            out[field.name] = [cast(x) for x in v]
        elif pa.types.is_floating(field.type):
            out[field.name] = float(v)
        elif pa.types.is_integer(field.type):
            out[field.name] = int(v)
        else:
            out[field.name] = str(v)
    return out


def write_point_file(path: str | os.PathLike[str], kind: str, record: dict[str, Any],
                     point_digest: str) -> None:
    """One row of ``SCHEMAS[kind]`` with its identity and payload digests, page checksums on."""
    schema = SCHEMAS[kind]
    unknown = set(record) - set(schema.names)
    if unknown:
        raise ValueError(f"{kind} record has fields outside its schema: {sorted(unknown)}")
    row = _canonical_row(record, schema)
    meta = {
        b"specsim.schema": SCHEMA_TAG[kind],
        b"specsim.point_digest": point_digest.encode(),
        b"specsim.payload_sha256": payload_digest(row).encode(),
        b"specsim.versions": json.dumps(point_versions(), sort_keys=True).encode(),
    }
    table = pa.Table.from_pylist([row], schema=schema.with_metadata(meta))
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp, compression="zstd", write_page_checksum=True)


def read_point_file(path: str | os.PathLike[str], kind: str,
                    point_digest: str | None) -> dict[str, Any]:
    """Read and verify one point file; return its row. ``point_digest`` None skips the
    staleness check (inspection only, never aggregation)."""
    fix = "delete it and rerun snakemake to regenerate it"
    try:
        table = pq.read_table(path, page_checksum_verification=True)
        meta = table.schema.metadata or {}
        tag = meta.get(b"specsim.schema")
        if tag != SCHEMA_TAG[kind]:
            raise PointFileError(f"{path}: not a specsim {kind}/1 point file (schema tag "
                                 f"{tag!r}); {fix}")
        if not table.schema.remove_metadata().equals(SCHEMAS[kind]):
            raise PointFileError(f"{path}: columns do not match the {kind}/1 schema; {fix}")
        if table.num_rows != 1:
            raise PointFileError(f"{path}: {table.num_rows} rows, a point file has one; {fix}")
        row = table.to_pylist()[0]
        recorded = meta.get(b"specsim.payload_sha256", b"").decode("ascii")
        found = meta.get(b"specsim.point_digest", b"").decode("ascii")
    except PointFileError:
        raise
    except Exception as err:
        # ArrowInvalid/IOError: truncated or bit-flipped pages (CRC), undecodable footer
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise PointFileError(f"{path}: not a readable point file ({reason}); {fix}") from None
    if payload_digest(row) != recorded:
        raise PointFileError(f"{path}: content does not match its recorded checksum (corrupt "
                             f"file); {fix}")
    if point_digest is not None and found != point_digest:
        raise PointFileError(f"{path}: written for point digest {found!r}, but this config's "
                             f"point has digest {point_digest!r} (stale file); {fix}")
    return row
