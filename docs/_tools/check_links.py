"""Every internal link of the built site resolves: ``python docs/_tools/check_links.py site``.

``mkdocs build --strict`` validates the links written in the Markdown pages, anchors included
(``validation:`` in mkdocs.yml). This checks what it cannot see: every ``href`` and ``src`` of
every built HTML page -- the theme's navigation, mkdocstrings' cross-references, raw HTML --
names a file of the site and, with ``#fragment``, an ``id`` on that page. External links
(``http:``, ``https:``, ``mailto:``) are not followed. Exit status 1, naming each broken link.
"""

from __future__ import annotations

import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name in ("id", "name") and value:
                self.ids.add(value)
            if value and ((name == "href" and tag in ("a", "link")) or
                          (name == "src" and tag in ("img", "script"))):
                self.links.append(value)


def _parse(path: Path) -> _Page:
    page = _Page()
    page.feed(path.read_text(encoding="utf-8"))
    return page


def broken(site: Path) -> list[str]:
    """``page: link (why)`` for every internal link of ``site`` that does not resolve."""
    pages = {p: _parse(p) for p in sorted(site.rglob("*.html"))}
    out = []
    for path, page in pages.items():
        for link in page.links:
            parts = urlsplit(link)
            if parts.scheme or parts.netloc or link.startswith(("mailto:", "data:")):
                continue
            # an absolute path is the site's (404.html links so: it is served at any depth)
            base = site if parts.path.startswith("/") else path.parent
            target = (base / unquote(parts.path).lstrip("/")).resolve() if parts.path else path
            if target.is_dir():
                target = target / "index.html"
            if not target.is_file():
                out.append(f"{path.relative_to(site)}: {link} (no such file)")
                continue
            if parts.fragment and target.suffix == ".html":
                ids = (pages.get(target) or _parse(target)).ids
                if unquote(parts.fragment) not in ids:
                    out.append(f"{path.relative_to(site)}: {link} (no such anchor)")
    return out


def main(argv: list[str]) -> int:
    site = Path(argv[0] if argv else "site").resolve()
    if not (site / "index.html").is_file():
        print(f"check_links: {site} has no index.html: build the site first (make docs)",
              file=sys.stderr)
        return 2
    bad = broken(site)
    for line in bad:
        print(f"broken link: {line}", file=sys.stderr)
    n = sum(1 for _ in site.rglob("*.html"))
    print(f"check_links: {n} pages, {len(bad)} broken internal links", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
