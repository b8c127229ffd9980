"""Rendering tables for people: Markdown and a small static HTML page."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import numpy as np

from specsim.io.atomic import write_text

if TYPE_CHECKING:
    import pandas as pd

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
