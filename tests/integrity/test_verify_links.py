"""``specsim verify`` names a file under results/ that is a link to a place outside the tree -- a
symbolic link, or a hard link with a name outside -- as it names other damage, even when the
content it leads to is an identical copy (a file outside results/ could then change a result,
or vouch for one)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from specsim.cli import main
from specsim.integrity import damaged_files
from specsim.io import atomic_path, checksum_path, write_text


@pytest.fixture
def results(tmp_path: Path) -> Path:
    base = tmp_path / "results"
    write_text(base / "figures" / "a.png", "PNG" * 100)
    with atomic_path(base / "sim" / "p.parquet") as tmp:
        tmp.write_bytes(bytes(range(256)))
    return base


def _problems(results: Path) -> dict[str, str]:
    return {str(Path(d.path).relative_to(results)): d.problem for d in damaged_files(results)}


def test_a_point_file_symlinked_to_an_identical_copy_outside_is_named(
        results: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    point = results / "sim" / "p.parquet"
    copy = tmp_path / "elsewhere" / "p.parquet"
    copy.parent.mkdir()
    shutil.copyfile(point, copy)
    point.unlink()
    point.symlink_to(copy)  # same bytes: its sidecar still matches
    assert _problems(results) == {
        "sim/p.parquet": f"a symbolic link to {copy}, outside the results tree"}
    assert main(["verify", "--results-dir", str(results)]) == 1
    assert "sim/p.parquet" in capsys.readouterr().err


def test_a_sidecar_symlinked_outside_is_named(results: Path, tmp_path: Path) -> None:
    side = checksum_path(results / "figures" / "a.png")
    outside = tmp_path / "a.png.sha256"
    shutil.copyfile(side, outside)
    side.unlink()
    side.symlink_to(outside)
    assert list(_problems(results)) == ["figures/a.png.sha256"]


def test_a_hard_link_shared_with_a_file_outside_is_named(results: Path, tmp_path: Path) -> None:
    point = results / "sim" / "p.parquet"
    os.link(point, tmp_path / "p-backup.parquet")
    assert _problems(results) == {
        "sim/p.parquet": "a hard link: 2 names, 1 of them outside the results tree"}


def test_links_within_the_tree_and_symlinked_directories_are_fine(results: Path,
                                                                  tmp_path: Path) -> None:
    """results/exact on scratch space (a symlinked directory) is the tree; links between two
    names inside it lead nowhere outside."""
    scratch = tmp_path / "scratch"
    write_text(scratch / "x.parquet", "data")
    (results / "exact").symlink_to(scratch)
    os.link(results / "figures" / "a.png", results / "figures" / "b.png")
    os.link(checksum_path(results / "figures" / "a.png"), results / "figures" / "b.png.sha256")
    (results / "figures" / "b.png.sha256").unlink()
    write_text(results / "figures" / "b.png.sha256",
               checksum_path(results / "figures" / "a.png").read_text().replace("a.png",
                                                                                "b.png"))
    assert _problems(results) == {}
