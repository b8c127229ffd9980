"""Compare two runs' tables byte for byte, naming the first differing cell of each table.

``python -m specsim.tablediff RUN_A/results/tables RUN_B/results/tables`` exits 0 when every
``*.csv`` of one directory is byte-identical to the same file of the other, else 1 with one line
per table that differs (or exists in only one, or fails its ``.sha256`` sidecar: each table is
verified whole before it is parsed), e.g.::

    schemes.csv: row 7 (study=schemes, model=seed_good, rule=lenient), column covered:
    'False' vs 'True'

Used by ``make test-portability`` (the same DAG with numpy's SIMD dispatch switched off must
give the same bytes) and by anyone who wants to know whether two machines agree.
"""

from __future__ import annotations

import csv
import io
import sys
from pathlib import Path

from specsim.io import IntegrityError, table_bytes

__all__ = ["compare_dirs", "first_difference", "main"]

_ROW_KEYS = ("study", "model", "rule", "gamma", "alpha", "c", "check")


def first_difference(name: str, a: bytes, b: bytes) -> str | None:
    """None if ``a == b``, else one line naming the first differing cell of the CSV table."""
    if a == b:
        return None
    rows_a = list(csv.reader(io.StringIO(a.decode("utf-8", "replace"))))
    rows_b = list(csv.reader(io.StringIO(b.decode("utf-8", "replace"))))
    header = rows_a[0] if rows_a else []
    for i, (ra, rb) in enumerate(zip(rows_a, rows_b, strict=False)):
        if ra == rb:
            continue
        if i == 0:
            return f"{name}: header differs: {ra} vs {rb}"
        for j in range(max(len(ra), len(rb))):
            ca = ra[j] if j < len(ra) else "<missing>"
            cb = rb[j] if j < len(rb) else "<missing>"
            if ca != cb:
                col = header[j] if j < len(header) else f"#{j}"
                keys = ", ".join(f"{k}={ra[header.index(k)]}" for k in _ROW_KEYS
                                 if k in header and header.index(k) < len(ra))
                where = f"row {i}" + (f" ({keys})" if keys else "")
                return f"{name}: {where}, column {col}: {ca!r} vs {cb!r}"
    if len(rows_a) != len(rows_b):
        return f"{name}: {len(rows_a) - 1} rows vs {len(rows_b) - 1} rows"
    return f"{name}: same cells, different bytes (line endings or quoting)"


def compare_dirs(dir_a: str | Path, dir_b: str | Path) -> list[str]:
    """One line per ``*.csv`` that differs between the two directories or is in only one."""
    a, b = Path(dir_a), Path(dir_b)
    names_a = {p.name for p in a.glob("*.csv")}
    names_b = {p.name for p in b.glob("*.csv")}
    out = [f"{n}: only in {a}" for n in sorted(names_a - names_b)]
    out += [f"{n}: only in {b}" for n in sorted(names_b - names_a)]
    for n in sorted(names_a & names_b):
        try:  # each table verified whole against its sidecar, bounded, before it is parsed
            data_a, data_b = table_bytes(a / n), table_bytes(b / n)
        except IntegrityError as err:
            out.append(f"{n}: {err}")
            continue
        line = first_difference(n, data_a, data_b)
        if line:
            out.append(line)
    return out


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2 or not all(Path(d).is_dir() for d in args):
        print("usage: python -m specsim.tablediff DIR_A DIR_B (two directories of tables)",
              file=sys.stderr)
        return 2
    diffs = compare_dirs(*args)
    count = len(list(Path(args[0]).glob("*.csv")))
    if not count:
        print(f"tablediff: no *.csv in {args[0]}", file=sys.stderr)
        return 2
    for line in diffs:
        print(line)
    print(f"tablediff: {count} tables in {args[0]}, {len(diffs)} differ from {args[1]}",
          file=sys.stderr)
    return 1 if diffs else 0


if __name__ == "__main__":
    raise SystemExit(main())
