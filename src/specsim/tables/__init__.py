"""``specsim tables``: one tidy table per analysis, computed from ``results/points.parquet``.

Which tables there are, what each answers and its builder: :mod:`specsim.outputs`. Each is
written as CSV (full precision, with its checksum), Markdown and HTML (for people; the report
shows the HTML).
"""

from __future__ import annotations

from specsim.grid import Grid
from specsim.io import read_frame, write_table
from specsim.outputs import TABLE_NEEDS, table
from specsim.report import write_html


def write_analyses(grid: Grid, points_path: str, names: list[str], out_dir: str) -> None:
    unknown = sorted(set(names) - set(TABLE_NEEDS))
    if unknown:
        raise ValueError(f"unknown tables {unknown}; known: {sorted(TABLE_NEEDS)}")
    points = read_frame(points_path)
    for name in names:
        df = write_table(table(name).build()(grid, points), f"{out_dir}/{name}.csv")
        write_html(df, name, f"{out_dir}/{name}.html")  # for people: the report shows it
