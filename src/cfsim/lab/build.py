"""Build the lab's Go module (``lab/``) with the machine's Go: ``go build -o bin/ ./cmd/...``."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

BINARIES = ("workload", "loadgen", "profsplit", "wakebench", "faultbench", "c2cbench", "switchbench", "stwbench",
            "scavbench", "chasebench", "packbench")


class BuildError(RuntimeError):
    pass


def lab_dir() -> Path:
    """``lab/`` at the repository root (this file is ``src/cfsim/lab/build.py``)."""
    env = os.environ.get("CFSIM_LAB_DIR")
    return Path(env) if env else Path(__file__).resolve().parents[3] / "lab"


def go_binary() -> str | None:
    return shutil.which("go")


def go_version(go: str) -> str:
    return subprocess.run([go, "version"], capture_output=True, text=True, timeout=60).stdout.strip()


def _stale(lab: Path) -> bool:
    bins = [lab / "bin" / b for b in BINARIES]
    if not all(b.exists() for b in bins):
        return True
    oldest = min(b.stat().st_mtime for b in bins)
    sources = [p for p in lab.rglob("*") if p.suffix in (".go", ".mod", ".sum") and "bin" not in p.parts]
    return any(p.stat().st_mtime > oldest for p in sources)


def build(lab: Path | None = None, force: bool = False) -> dict[str, Path]:
    """Build the binaries if missing or older than a source file; return name -> path.

    Raises :class:`BuildError` with go's own output and the command to reproduce it."""
    lab = lab or lab_dir()
    if not (lab / "go.mod").exists():
        raise BuildError(f"no Go module at {lab} (expected lab/go.mod at the repository root)")
    out = {b: lab / "bin" / b for b in BINARIES}
    if not force and not _stale(lab):
        return out
    go = go_binary()
    if go is None:
        raise BuildError("Go is not installed: install Go >= 1.25 (https://go.dev/dl/ or apt-get install golang-go)")
    cmd = [go, "build", "-o", "bin/", "./cmd/..."]
    res = subprocess.run(cmd, cwd=lab, capture_output=True, text=True, timeout=900)
    if res.returncode != 0:
        raise BuildError(f"`{' '.join(cmd[1:])}` failed in {lab} (exit {res.returncode}):\n"
                         f"{res.stderr.strip() or res.stdout.strip()}\n"
                         "(dependencies come from the Go module proxy: check GOPROXY and network access)")
    return out
