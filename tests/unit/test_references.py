"""References resolve for users: the project cites public sources and its own docs/ pages, never
notes outside the repository, and every docs/ page it cites exists."""
from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TEXT = (".py", ".toml", ".md", ".sh", ".go", ".txt", ".cfg", ".ini", ".json")
PLACES = ["src", "notebooks", "tests", "docs", "scripts", "benchmarks", "lab", "README.md", "data/README.md"]
# research notes kept outside the project, and absolute paths of the machine it was built on
OUTSIDE = re.compile("shared" + r"/(reference|seeds)/|" + "/wo" + "rk/")


def _files():
    for place in PLACES:
        root = REPO / place
        paths = [root] if root.is_file() else sorted(root.rglob("*")) if root.is_dir() else []
        for path in paths:
            if path.is_file() and path.suffix in TEXT and "bin" not in path.parts and path.stat().st_size < 2_000_000:
                yield path


def test_no_citation_points_outside_the_project():
    bad = [f"{p.relative_to(REPO)}:{i}" for p in _files()
           for i, line in enumerate(p.read_text(errors="replace").splitlines(), 1) if OUTSIDE.search(line)]
    assert not bad, "cite the public source (docs/references.md) instead of notes outside the project:\n" + \
        "\n".join(bad)


def test_cited_docs_pages_exist():
    cited = {m for p in _files() for m in re.findall(r"(?<![\w/-])docs/[\w-]+\.md", p.read_text(errors="replace"))}
    assert cited, "no docs/ page is cited"
    missing = sorted(c for c in cited if not (REPO / c).is_file())
    assert not missing, missing
