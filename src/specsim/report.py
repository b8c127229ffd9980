"""What people read beside the numbers, written from the declarations of :mod:`specsim.outputs`.

* the HTML rendering beside each table's CSV (``results/tables/<name>.html``, :func:`write_html`),
  which the Snakemake report shows inline: a title, what the table answers, the table, and
  every column's meaning (also as a tooltip on its header);
* the report captions, ``workflow/report/tables/<name>.rst`` (:func:`caption`) and
  ``workflow/report/figures/<name>.rst`` (the figure's declared caption), written by
  ``python -m specsim.report`` and compared with the declarations by the tests, so caption,
  HTML page and declaration cannot drift apart. They are kept in the repository rather than
  written by a rule: Snakemake reads a caption when it builds the report, also of a run that
  never wrote it (``--report`` after a partial run, or on another machine).

Kept free of pandas and matplotlib: Snakemake imports it to plan the DAG.
"""

from __future__ import annotations

import argparse
import textwrap
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from specsim.outputs import FIGURES, TABLES, figure, table

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

CAPTION_DIR = Path("workflow") / "report"  # relative to the repository root
GENERATED = ("tables", "figures")  # its subdirectories written here (the rest by hand)


def undocumented(name: str, columns: Iterable[str]) -> list[str]:
    """The columns of table ``name`` its declaration does not describe."""
    d = table(name)
    return [c for c in columns if d.describe(str(c)) is None]


def caption(name: str) -> str:
    """The report caption (reStructuredText) of table ``name``."""
    d = table(name)
    csv = d.csv or f"results/tables/{name}.csv"
    lines = [f"**{d.title}.** {d.about}", "",
             f"Columns (the full-precision CSV is ``{csv}``):", ""]
    for col, text in d.columns.items():
        lines.append(f"- ``{col}``: {text}")
    return "\n".join(lines) + "\n"


def figure_caption(name: str) -> str:
    """The report caption (reStructuredText) of figure ``name``: its declared caption."""
    return textwrap.fill(figure(name).caption, 100, break_on_hyphens=False,
                         break_long_words=False) + "\n"


def captions() -> dict[str, str]:
    """Every generated caption file, by its path under :data:`CAPTION_DIR`."""
    return ({f"tables/{n}.rst": caption(n) for n in TABLES}
            | {f"figures/{n}.rst": figure_caption(n) for n in FIGURES})


def write_captions(out_dir: str | Path) -> list[Path]:
    """(Re)write ``<out_dir>/tables/*.rst`` and ``<out_dir>/figures/*.rst``, one per declared
    table and figure, and remove those of outputs no longer declared; returns the paths
    written."""
    out = Path(out_dir)
    wanted = {out / rel: text for rel, text in captions().items()}
    for sub in GENERATED:
        (out / sub).mkdir(parents=True, exist_ok=True)
        for stale in set((out / sub).glob("*.rst")) - set(wanted):
            stale.unlink()
    for path, text in wanted.items():
        path.write_text(text, encoding="utf-8", newline="\n")
    return list(wanted)


def write_html(df: pd.DataFrame, name: str, path: str | Path) -> None:
    """The table as a small static HTML page (see :func:`specsim.io.write_html_table`)."""
    from specsim.io import write_html_table

    d = table(name)
    about = d.about.replace("``", "")
    if name == "checks" and "passed" in df.columns:
        failed = int((~df["passed"].astype(bool)).sum())
        about += (f" Here: all {len(df)} passed." if not failed else
                  f" Here: {failed} of {len(df)} FAILED (marked red).")
    columns = {str(c): (d.describe(str(c)) or "").replace("``", "") for c in df.columns}
    write_html_table(df, path, title=d.title, about=about, columns=columns,
                     fail_column="passed" if name == "checks" else None)


def main(argv: list[str] | None = None) -> int:
    """``python -m specsim.report [DIR]``: rewrite the tables' and figures' report captions
    (default workflow/report, run from the repository root)."""
    parser = argparse.ArgumentParser(prog="python -m specsim.report",
                                     description="rewrite the tables' and figures' report "
                                                 "captions from their declarations")
    parser.add_argument("dir", nargs="?", type=Path, default=CAPTION_DIR,
                        help=f"where the captions go (default {CAPTION_DIR})")
    for path in write_captions(parser.parse_args(argv).dir):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
