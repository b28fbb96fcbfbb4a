"""Dependencies point down: the rules (kernel, goruntime, autoscalers, monitoring) import no engine, reader,
command or study code, and neither do the readers (io) and the engines (engine) import what sits
above them. Checked on the source (every import statement, including those inside functions).
An import under ``if TYPE_CHECKING:`` never runs: it names a type for the type checker and the
compiled build (mypyc) and is not a dependency (import-linter's ``exclude_type_checking_imports``)."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "cfsim"

RULES = {"kernel", "goruntime", "autoscalers", "monitoring"}
ABOVE_RULES = {"engine", "io", "commands", "simulation", "sweep", "validation", "lab", "advice", "cli",
               "workloads", "scenario"}
#: package -> the cfsim packages and modules it must not import
FORBIDDEN = {
    **{rules: ABOVE_RULES for rules in RULES},
    "io": {"engine", "commands", "simulation", "sweep", "validation", "lab", "advice", "cli", "workloads"},
    "engine": {"simulation", "commands", "sweep", "validation", "lab", "advice", "cli", "io"},
    "workloads": {"simulation", "commands", "sweep", "validation", "lab", "advice", "cli", "io"},
    "scenario": {"engine", "simulation", "commands", "sweep", "validation", "lab", "advice", "cli", "io"},
}


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, imported cfsim module) for every import in a file, relative ones resolved."""
    return _imports_of(path.read_text(), path.relative_to(SRC.parent).with_suffix("").parts[:-1])


def _type_checking_only(tree: ast.AST) -> set[int]:
    """ids of the import nodes inside ``if TYPE_CHECKING:`` (or ``typing.TYPE_CHECKING``) blocks."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
            for stmt in node.body:
                out |= {id(n) for n in ast.walk(stmt) if isinstance(n, (ast.Import, ast.ImportFrom))}
    return out


def _imports_of(source: str, package: tuple[str, ...]) -> list[tuple[int, str]]:
    out = []
    tree = ast.parse(source)
    skip = _type_checking_only(tree)
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join([*package[:len(package) - node.level + 1], *([base] if base else [])])
            out.append((node.lineno, base))
    return [(line, m) for line, m in out if m == "cfsim" or m.startswith("cfsim.")]


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_no_import_runs_upward(package):
    bad = []
    for path in sorted((SRC / package).rglob("*.py")):
        for line, module in _imports(path):
            parts = module.split(".")
            target = parts[1] if len(parts) > 1 else "cfsim"
            if target in FORBIDDEN[package] or target == "cfsim":
                bad.append(f"{path.relative_to(SRC.parent)}:{line}: imports {module}")
    assert not bad, "imports that run upward:\n" + "\n".join(bad)


def test_the_check_sees_imports_inside_functions_and_relative_ones():
    source = "import os\nfrom . import bandwidth\ndef f():\n    from cfsim.io.usage import read_usage\n"
    assert _imports_of(source, ("cfsim", "kernel")) == [(2, "cfsim.kernel"), (4, "cfsim.io.usage")]


def test_the_check_skips_only_what_the_type_checker_alone_imports():
    source = ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from cfsim.engine.cfs import CfsEngine\n"
              "else:\n    from cfsim.io.usage import read_usage\nif not TYPE_CHECKING:\n    import cfsim.lab\n")
    assert _imports_of(source, ("cfsim", "goruntime")) == [(5, "cfsim.io.usage"), (7, "cfsim.lab")]
