"""The join of every point's Monte Carlo and exact files into per-point estimates.

``results/sim/<point>.parquet`` + ``results/exact/<point>.parquet`` (one pair per grid point,
each verified: schema, payload checksum, identity digest) -> ``results/points.parquet``, the
Monte Carlo estimates with confidence intervals beside the exact values.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa

from specsim.grid import Grid
from specsim.io import read_point_file, write_frame
from specsim.job import describe
from specsim.measures import MEASURES, measure_of


def read_points(grid: Grid, results_dir: str | Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Every point's sim and exact rows, each file verified against its point's digest."""
    base = Path(results_dir)
    # rows per point-file schema, in the registry's order of the measures' schemas
    schemas = {s.name: s for m in MEASURES.values() for s in (m.sim_schema, m.exact_schema)}
    rows: dict[str, list[dict[str, Any]]] = {name: [] for name in schemas}
    for point in grid.points:
        want = describe(grid, point)["digest"]
        measure = measure_of(point.measure)
        for folder, kind in (("sim", measure.sim_schema), ("exact", measure.exact_schema)):
            path = base / folder / f"{point.path}.parquet"
            row = read_point_file(path, kind, want)
            if row["point_id"] != point.point_id:  # digest matched, so this is a foreign file
                raise RuntimeError(f"{path}: holds point {row['point_id']}, not "
                                   f"{point.point_id}; delete it and rerun snakemake")
            rows[kind.name].append(row)

    def frame(kinds: dict[str, None]) -> pd.DataFrame:
        parts = [pa.Table.from_pylist(rows[k], schema=schemas[k].columns).to_pandas(
                     use_threads=False)  # no Arrow thread pool: see specsim.io.parquet
                 for k in kinds]
        return pd.concat([p for p in parts if len(p)] or parts[:1], ignore_index=True)

    return (frame(dict.fromkeys(m.sim_schema.name for m in MEASURES.values())),
            frame(dict.fromkeys(m.exact_schema.name for m in MEASURES.values())))


def collect(grid: Grid, results_dir: str | Path, out: str) -> None:
    """Join the grid, every point's Monte Carlo and exact files, and the estimates."""
    sims, exact_df = read_points(grid, results_dir)
    grid_df = pd.DataFrame([p.to_record() for p in grid.points]).drop(columns=["spec", "path"])
    df = grid_df.merge(sims.drop(columns=["measure", "gamma"]), on="point_id", how="left")
    df = df.merge(exact_df, on="point_id", how="left")
    level = float(grid.config["significance"])
    est = []
    for _, row in df.iterrows():
        est.append(measure_of(row["measure"]).estimate(row, level))
    df = pd.concat([df.reset_index(drop=True), pd.DataFrame(est)], axis=1)
    df = df.drop(columns=[c for c in ("accepted_hist", "tokens_hist", "drafted") if c in df])
    df = df.sort_values("point_id").reset_index(drop=True)
    write_frame(df, out)
