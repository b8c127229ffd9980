"""The README a newcomer reads in five minutes, and the documentation site behind it: the
configuration reference is written from the schema (every key described), the CLI reference
from the parsers, and every page the README links to exists."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from specsim import configdoc

REPO = Path(__file__).resolve().parents[2]
SCHEMA = REPO / "workflow/schemas/config.schema.yaml"


def test_every_schema_key_has_a_description() -> None:
    missing = configdoc.undescribed(configdoc.load(SCHEMA))
    assert not missing, "schema keys without a description:\n" + "\n".join(missing)


def test_undescribed_finds_a_key_without_description() -> None:
    # the test above cannot pass vacuously: nested, referenced, mapped and listed keys are seen
    schema = {"definitions": {"x": {"type": "object", "properties": {"deep": {"type": "integer"}}}},
              "properties": {"a": {"description": "a", "type": "object",
                                   "additionalProperties": {"$ref": "#/definitions/x",
                                                            "description": "an x"}},
                             "b": {"description": "b", "type": "array",
                                   "items": {"type": "object", "properties": {"c": {}}}}}}
    assert configdoc.undescribed(schema) == ["a.<name>.deep", "b[].c"]


def test_reference_lists_every_key_with_its_default() -> None:
    schema = configdoc.load(SCHEMA)
    page = configdoc.markdown(schema)
    keys = configdoc.keys(schema)
    assert len(keys) > 100
    for key in keys:
        assert f"`{key.path}`" in page, key.path
    chains = next(k for k in keys if k.path == "budget.chains")
    assert (chains.type, chains.bounds, chains.default) == ("integer", "≥ 2; ≤ 100000000", "16384")
    assert "| `models.<name>.family` (required) |" in page
    # every row of every table has the header's five cells (a pipe in a pattern is escaped)
    for line in page.splitlines():
        if line.startswith("| `"):
            assert len(re.findall(r"(?<!\\)\|", line)) == 6, line


def test_readme_is_short_and_names_no_history() -> None:
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) <= 250
    assert not re.search(r"\b(issue|branch) #?\d", readme, re.I)
    assert "make run" in readme and "make test" in readme


def test_readme_links_name_existing_pages() -> None:
    readme = (REPO / "README.md").read_text()
    links = re.findall(r"\]\(((?:docs/)[^)#]+)", readme)
    assert links
    for link in links:
        assert (REPO / link).is_file(), link


def test_every_docs_page_is_in_the_nav() -> None:
    import yaml

    nav = yaml.safe_load((REPO / "mkdocs.yml").read_text())["nav"]

    def pages(entries: list) -> list[str]:
        out = []
        for entry in entries:
            for value in entry.values():
                out += pages(value) if isinstance(value, list) else [value]
        return out

    listed = set(pages(nav))
    present = {str(p.relative_to(REPO / "docs")) for p in (REPO / "docs").rglob("*.md")
               if "_tools" not in p.parts}
    assert listed == present


def test_link_checker_finds_a_broken_link(tmp_path: Path) -> None:
    (tmp_path / "index.html").write_text('<a href="a/">a</a><a href="a/#x">x</a><h2 id="h">h</h2>'
                                         '<a href="#h">h</a><a href="https://example.org/">e</a>')
    (tmp_path / "a").mkdir()
    (tmp_path / "a/index.html").write_text('<img src="../missing.png"><a href="../#nope">n</a>')
    sys.path.insert(0, str(REPO / "docs/_tools"))
    try:
        import check_links
    finally:
        sys.path.pop(0)
    assert check_links.broken(tmp_path) == [
        "a/index.html: ../missing.png (no such file)", "a/index.html: ../#nope (no such anchor)",
        "index.html: a/#x (no such anchor)"]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("mkdocs", path=str(Path(sys.executable).parent)) is None,
                    reason="the docs extra is not installed (make docs installs it)")
def test_site_builds_strict(tmp_path: Path) -> None:
    mkdocs = str(Path(sys.executable).parent / "mkdocs")
    res = subprocess.run([mkdocs, "build", "--strict", "--site-dir", str(tmp_path / "site")],
                         cwd=REPO, capture_output=True, text=True, timeout=600, check=False)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "specsim point" in (tmp_path / "site/reference/cli/index.html").read_text()
