#!/usr/bin/env python3
"""Render the committed reference reports again from their committed results, after a change
to how findings or reports are made (issue 32: every reference report regenerated).

For each study folder under ``reports/`` (one with ``comparison/provenance.json``, and
``vrn-weight``'s tuning sweep), this tool

* renders every run's analysis again from its ``analysis/result.json``
  (:func:`cl_diag.report.render_analysis`) and keeps every file no ``.gitignore`` leaves out (a
  lean study's leaves its per-run HTML and figures out), new ones too;
* makes the comparison again as ``cl-diag compare`` did, from the committed results and the
  sweep its provenance.json records (what ``tests/test_reference_reports.py`` checks byte for
  byte);
* re-seals each folder's ownership listing for the files it rewrote (they are cl-diag's own:
  it just wrote them), so that a later run into the folder replaces them as before.

Run it from the repository root, then ``python tools/quote_findings.py`` for the READMEs::

    python tools/regenerate_reports.py reports/toy-vrn reports/digits-batch-study
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

from cl_diag.io.output import OWNED_FILES, listing_text, read_listing, seal
from cl_diag.orchestration.compare import CompareConfig, compare
from cl_diag.report import render_analysis
from cl_diag.result import load


def _tracked(folder: Path) -> set[str]:
    """The names of the files git tracks directly in ``folder``."""
    out = subprocess.run(
        ["git", "ls-files", "--", str(folder)], capture_output=True, text=True, check=True
    ).stdout
    return {Path(line).name for line in out.splitlines() if Path(line).parent == folder}


def _ignored(path: Path) -> bool:
    """Whether a .gitignore leaves ``path`` out of the repository (a lean study's per-run HTML)."""
    return subprocess.run(["git", "check-ignore", "-q", str(path)], check=False).returncode == 0


def _reseal(folder: Path, names: set[str]) -> None:
    """Seal ``names`` anew in ``folder``'s listing (the others keep their seals)."""
    found = read_listing(folder)
    if found.kind is None:
        return
    seals = {name: set(digests) for name, digests in found.seals.items()}
    for name in names:
        digest = seal(folder / name, name)
        if digest is not None:
            seals[name] = {digest}
    (folder / OWNED_FILES).write_text(listing_text(found.kind, seals), encoding="utf-8")


def regenerate_analyses(study: Path) -> int:
    """Every run's committed analysis files of ``study``, rendered again; the count."""
    count = 0
    for path in sorted(study.glob("*/analysis/result.json")):
        folder = path.parent
        kept = _tracked(folder) - {"result.json", OWNED_FILES}
        with tempfile.TemporaryDirectory() as tmp:
            written = render_analysis(load(path), Path(tmp))
            # a file reports newly render (result.csv) joins the ones the repository holds
            kept |= {f.name for f in written if not _ignored(folder / f.name)}
            for file in written:
                if file.name in kept:
                    (folder / file.name).write_bytes(file.read_bytes())
        _reseal(folder, kept)
        count += 1
    return count


def study_plan(runs: Path) -> Path | None:
    """The plans/*.toml whose ``study`` is the folder ``runs`` (relative to the repository
    root), None when no plan names it."""
    from cl_diag.io.plans import load_plan

    target = runs.resolve()
    for path in sorted(Path("plans").glob("*.toml")):
        if (Path(load_plan(path).plan.study)).resolve() == target:
            return path
    return None


def regenerate_comparison(runs: Path, comparison: Path) -> None:
    """The comparison of the runs under ``runs`` into ``comparison``, with its recorded sweep
    and the study's plan (plans/*.toml naming the folder)."""
    recorded = json.loads((comparison / "provenance.json").read_text(encoding="utf-8"))
    inputs = sorted(p.parent for p in runs.glob("*/analysis/result.json"))
    plan = study_plan(runs)
    compare(CompareConfig(inputs=inputs, out=comparison, sweep=recorded["sweep"], plan=plan))


def _untracked_run_pages(runs: Path) -> list[Path]:
    """Per-run report.html files that exist here but that git does not hold.

    A comparison links each run's report.html when the file exists, so rendering one beside
    pages a fresh clone lacks writes links that a clean checkout cannot reproduce.
    """
    pages = sorted(runs.glob("*/analysis/report.html"))
    return [page for page in pages if page.name not in _tracked(page.parent)]


def _untracked_run_pages_under(folder: Path) -> list[Path]:
    """:func:`_untracked_run_pages` for every study under ``folder`` (vrn-weight's too)."""
    homes = {p.parent.parent for p in folder.glob("**/comparison/provenance.json")}
    found: list[Path] = []
    for home in sorted(homes):
        runs = home / "test" if (home / "test").is_dir() else home
        found += _untracked_run_pages(runs)
    return found


def main(argv: list[str]) -> int:
    for name in argv or ["reports"]:
        stray = _untracked_run_pages_under(Path(name))
        if stray:
            print(
                f"error: {len(stray)} per-run report.html files under {name} are not in git "
                f"(e.g. {stray[0]}); the comparison would link them and a fresh clone would "
                f"render it differently. Remove them first: git clean -fdX {name}",
                file=sys.stderr,
            )
            return 2
    for name in argv or ["reports"]:
        folder = Path(name)
        studies = sorted(p.parent.parent for p in folder.glob("**/comparison/provenance.json"))
        for comparison_home in studies:
            # vrn-weight's test stage keeps its runs under test/, its comparison beside it
            runs = (
                comparison_home / "test" if (comparison_home / "test").is_dir() else comparison_home
            )
            n = regenerate_analyses(runs)
            regenerate_comparison(runs, comparison_home / "comparison")
            print(f"{comparison_home}: {n} analyses and the comparison rendered again")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
