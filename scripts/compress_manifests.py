"""Rewrite every lab run's plain ``manifest.json`` as ``manifest.json.gz`` and stage the change in git.

    python scripts/compress_manifests.py [DATA_LAB] [--no-git]      (DATA_LAB: default data/lab)

The lab writes its runs' manifests gzip-compressed (:mod:`cfsim.io.manifest`: most of a manifest
is raw /metrics snapshots, and ``data/lab`` travels with every clone); this converts the runs
collected before. Only run folders, ``DATA_LAB/<grid>/<run>/`` beside a ``summary.json``, are
touched: ``DATA_LAB/manifest.json`` (the grids' index) stays plain JSON.

Each file is converted with :func:`cfsim.io.manifest.write_manifest`, then the compressed file is
read back and compared (parsed JSON) with the plain one before the plain one is gone for good: on a
difference the plain file is put back, the ``.gz`` removed, and the script stops. In a git work
tree the plain files that git tracks are ``git rm``'d and their ``.gz`` files ``git add``'ed
(``--no-git``: leave the index alone). Idempotent: a folder holding only ``manifest.json.gz`` is
skipped; one holding both (an interrupted write) loses its plain file if the two agree.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from cfsim.io.manifest import MANIFEST_GZ, MANIFEST_JSON, read_json_file, write_manifest

# paths per git invocation: well below any command-line limit
_GIT_BATCH = 200


def run_manifests(data_lab: Path) -> list[Path]:
    """The plain manifests of run folders (``<grid>/<run>/``, holding ``summary.json``)."""
    return sorted(p for p in data_lab.glob(f"*/*/{MANIFEST_JSON}") if (p.parent / "summary.json").is_file())


def compress_one(plain: Path) -> str:
    """Replace ``plain`` by its ``.gz`` beside it, checked; returns what was done."""
    raw = plain.read_bytes()
    before: Any = json.loads(raw)
    gz = plain.with_name(MANIFEST_GZ)
    if gz.is_file():
        # both: write_manifest was interrupted between its rename and removing the plain file
        if read_json_file(gz) != before:
            raise SystemExit(f"{plain.parent}: {MANIFEST_GZ} and {MANIFEST_JSON} differ; resolve by hand")
        plain.unlink()
        return "stale plain file removed"
    write_manifest(plain.parent, before)
    if read_json_file(gz) != before:
        plain.write_bytes(raw)
        gz.unlink()
        raise SystemExit(f"{plain}: the compressed copy reads back differently; left as it was")
    return "compressed"


def git_tracked(paths: list[Path], cwd: Path) -> set[Path]:
    """Those of ``paths`` git tracks (none outside a git work tree)."""
    if not paths:  # git ls-files without paths would list the whole tree
        return set()
    out = subprocess.run(["git", "ls-files", "-z", "--", *map(str, paths)], cwd=cwd, capture_output=True)
    if out.returncode != 0:
        return set()
    return {(cwd / p).resolve() for p in out.stdout.decode().split("\0") if p}


def git_stage(removed: list[Path], added: list[Path], cwd: Path) -> None:
    for i in range(0, len(removed), _GIT_BATCH):
        batch = map(str, removed[i:i + _GIT_BATCH])
        subprocess.run(["git", "rm", "-q", "--cached", "--", *batch], cwd=cwd, check=True)
    for i in range(0, len(added), _GIT_BATCH):
        subprocess.run(["git", "add", "--", *map(str, added[i:i + _GIT_BATCH])], cwd=cwd, check=True)


def size_bytes(paths: list[Path]) -> int:
    return sum(p.stat().st_size for p in paths if p.is_file())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("data_lab", nargs="?", default="data/lab", type=Path)
    ap.add_argument("--no-git", action="store_true", help="convert the files only; leave git's index alone")
    args = ap.parse_args(argv)
    data_lab = args.data_lab.resolve()
    plains = run_manifests(data_lab)
    tracked = set() if args.no_git else git_tracked(plains, data_lab)
    plain_bytes = size_bytes(plains)
    done: dict[str, int] = {}
    for plain in plains:
        what = compress_one(plain)
        done[what] = done.get(what, 0) + 1
    gzs = [p.with_name(MANIFEST_GZ) for p in plains]
    staged = [p for p in plains if p.resolve() in tracked]
    git_stage(staged, [p.with_name(MANIFEST_GZ) for p in staged], data_lab)
    print(f"{len(plains)} run manifests under {data_lab}: "
          + (", ".join(f"{n} {what}" for what, n in sorted(done.items())) or "nothing to do")
          + (f"; {plain_bytes / 1e6:.1f} MB plain -> {size_bytes(gzs) / 1e6:.1f} MB gzip" if plains else "")
          + (f"; {len(staged)} staged in git" if staged else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
