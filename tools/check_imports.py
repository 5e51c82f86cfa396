#!/usr/bin/env python3
"""Fail when code imports a distribution that pyproject.toml does not declare.

A module that imports a package only this machine happens to have passes here and crashes on a
fresh one (cl-diag once shipped a CLI that died importing click). Rules:

* ``cl_diag/``: a module-level import must come from a runtime dependency. An import inside a
  function or a ``try`` block (an optional feature) may also come from an optional extra.
* ``tests/``, ``benchmarks/``, ``docs/examples/``: runtime dependencies and the extras.

An import that no installed distribution provides is an error too (it cannot be checked, and a
fresh machine would not have it either). Run it with the Python that has cl-diag installed, from
the repository root: ``python tools/check_imports.py``. Exit 1 on a problem, 0 otherwise.
"""

from __future__ import annotations

import ast
import re
import sys
from importlib import metadata
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
OWN = {"cl_diag"}
FOLDERS = {"cl_diag": "runtime", "tests": "all", "benchmarks": "all", "docs/examples": "all"}


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_names(requirements: list[str]) -> set[str]:
    return {normalise(re.split(r"[\s<>=!~;\[(]", r, maxsplit=1)[0]) for r in requirements}


def imports(tree: ast.Module) -> list[tuple[int, str, bool]]:
    """``(line, top-level module, guarded)``: guarded means inside a function or a try block."""
    found: list[tuple[int, str, bool]] = []

    def visit(node: ast.AST, guarded: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = guarded or isinstance(
                child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Try, ast.Lambda)
            )
            if isinstance(child, ast.Import):
                found.extend((child.lineno, a.name.split(".")[0], guarded) for a in child.names)
            elif isinstance(child, ast.ImportFrom) and child.level == 0 and child.module:
                found.append((child.lineno, child.module.split(".")[0], guarded))
            visit(child, inner)

    visit(tree, False)
    return found


def problems(root: Path = ROOT) -> list[str]:
    project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    runtime = requirement_names(project.get("dependencies", []))
    extras = set().union(*map(requirement_names, project.get("optional-dependencies", {}).values()))
    providers = {
        module: {normalise(d) for d in dists}
        for module, dists in metadata.packages_distributions().items()
    }
    local = {p.stem for folder in FOLDERS for p in (root / folder).glob("*.py")} | {"conftest"}
    out = []
    for folder, scope in FOLDERS.items():
        for path in sorted((root / folder).rglob("*.py")):
            for line, module, guarded in imports(
                ast.parse(path.read_text(encoding="utf-8"), str(path))
            ):
                if (
                    module in OWN
                    or module in local
                    or module in sys.stdlib_module_names
                    or module == "__future__"
                ):
                    continue
                allowed = runtime | extras if scope == "all" or guarded else runtime
                where = f"{path.relative_to(root)}:{line}: imports {module}"
                # a declared requirement whose marker excludes this Python (tomli on 3.11+) is not
                # installed here: its import name is its distribution name
                dists = providers.get(module) or ({normalise(module)} & (runtime | extras))
                if not dists:
                    out.append(
                        f"{where}, which no installed distribution provides; declare it in "
                        "pyproject.toml"
                    )
                elif not dists & allowed:
                    kind = (
                        "an optional extra (import it inside a function)"
                        if dists & extras
                        else "pyproject.toml"
                    )
                    out.append(
                        f"{where} (from {', '.join(sorted(dists))}), which is not declared in "
                        f"{kind}"
                    )
    return out


if __name__ == "__main__":
    found = problems()
    for problem in found:
        print(problem)
    sys.exit(1 if found else 0)
