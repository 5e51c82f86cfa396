"""``compare``: several result.json files side by side, never recomputed.

(:mod:`cl_diag.cli.compare` is its command line: the same concept one layer up.)

Reads the result files (or folders holding one) with :func:`cl_diag.result.load`,
which checks each is a result of the schema this version reads, builds the one
comparison frame (:class:`cl_diag.report.Comparison`) and renders report.md,
report.html, comparison.csv and the figures from it into a staging folder on
``--out``'s file system that is moved into place only when complete.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import pandas as pd

from cl_diag.errors import UserError
from cl_diag.io.output import OWNED_FILES, check_targets, ensure_writable_parent, staged_output
from cl_diag.report import Comparison, comparison_warnings, render_comparison
from cl_diag.result import RESULT_NAME, Result, load


@dataclass
class CompareConfig:
    inputs: list[Path]
    """result.json files, or folders holding one (``cl-diag analyze --out`` folders)."""
    out: Path
    baseline: Path | None = None
    """One run (file or folder) the others are differenced against; added if not among
    ``inputs``."""
    overwrite: bool = False
    """Replace files in ``out`` that cl-diag cannot prove it wrote (see cl_diag.io.output)."""


@dataclass
class CompareResult:
    out: Path
    report_md: Path
    report_html: Path
    csv: Path
    files: list[Path] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)
    """run name (as given) -> label used in the report"""
    warnings: list[str] = field(default_factory=list)
    frame: pd.DataFrame | None = field(default=None, repr=False)
    """one row per run (display order): label, config facts and every compared metric"""


@dataclass(frozen=True)
class _Run:
    name: str
    path: Path
    result: Result = field(repr=False)


def _result_path(given: Path) -> Path:
    path = Path(given)
    if not path.exists():
        raise UserError(
            f"{given} does not exist. Pass result.json files or the folders "
            "`cl-diag analyze --out` wrote."
        )
    if path.is_dir():
        candidate = path / RESULT_NAME
        if not candidate.is_file():
            raise UserError(
                f"The folder {given} has no {RESULT_NAME}. Pass a folder written by "
                "`cl-diag analyze --out` (or the result file itself); run `cl-diag analyze` first "
                "if this run was never analysed."
            )
        return candidate
    return path


def _run_name(given: Path, result_path: Path) -> str:
    # the folder the user named (the label fallback); a bare result.json names its folder
    source = (
        Path(given)
        if Path(given).is_dir()
        else (result_path.parent if result_path.name == RESULT_NAME else result_path)
    )
    name = source.as_posix()
    if name in (".", ""):
        name = source.resolve().name or "."
    return name


def _load(given: Path) -> _Run:
    path = _result_path(given)
    return _Run(name=_run_name(given, path), path=path.resolve(), result=load(path))


def _check_out(out: Path, runs: list[_Run]) -> None:
    target = Path(out).resolve()
    for run in runs:
        if run.path.parent == target:
            raise UserError(
                f"--out {out} is the folder of the run {run.name}; writing there would replace "
                "that run's own reports. Choose another folder for the comparison."
            )
    if (Path(out) / RESULT_NAME).exists():
        raise UserError(
            f"--out {out} holds a {RESULT_NAME} (an analysis folder). Choose another folder for "
            "the comparison."
        )


def _report_links(runs: list[_Run], out: Path) -> dict[str, str]:
    """Run name -> the link from the comparison's folder to the run's own report.html, for the
    runs that have one. A run named by a relative path gets a relative link (the report opens
    wherever the folders move together); one named by an absolute path, an absolute link, so
    that the same inputs give the same bytes wherever the comparison is written."""
    links = {}
    for run in runs:
        if not (run.path.parent / "report.html").is_file():
            continue
        named = PurePosixPath(Path(run.name).as_posix())
        # the name is the run's folder, or (a result file not called result.json) the file
        folder = named.parent if run.path.name != RESULT_NAME else named
        target = folder / "report.html"
        if target.is_absolute():
            links[run.name] = target.as_posix()
        else:
            links[run.name] = Path(os.path.relpath(target, out)).as_posix()
    return links


def compare(config: CompareConfig) -> CompareResult:
    """Compare the runs of ``config.inputs`` into ``config.out`` (report.md, report.html,
    comparison.csv, SVGs)."""
    if not config.inputs:
        raise UserError(
            "No runs to compare. Pass one or more result.json files or analysis folders."
        )
    ensure_writable_parent(Path(config.out))  # a bad --out is named before the inputs are read
    runs: list[_Run] = []
    seen: set[Path] = set()
    for given in config.inputs:
        run = _load(given)
        if run.path not in seen:  # a file named twice (e.g. by overlapping globs) is one run
            seen.add(run.path)
            runs.append(run)
    baseline_name = None
    if config.baseline is not None:
        base_path = _result_path(config.baseline).resolve()
        match = [r for r in runs if r.path == base_path]
        if match:
            baseline_name = match[0].name
        else:
            base = _load(config.baseline)
            runs.insert(0, base)
            baseline_name = base.name
    names = [r.name for r in runs]
    if len(set(names)) != len(names):
        # distinct files whose given names coincide (e.g. "x.json" in two folders named alike):
        # fall back to the resolved paths, which are distinct
        runs = [_Run(name=r.path.as_posix(), path=r.path, result=r.result) for r in runs]
        if baseline_name is not None:
            baseline_name = next(r.name for r in runs if r.path == base_path)
    _check_out(config.out, runs)
    check_targets(
        config.out, ["report.md", "report.html"], overwrite=config.overwrite, kind="comparison"
    )

    pairs = [(r.name, r.result) for r in runs]
    # the CLI's warnings name the runs in the order given; the report's, in display order
    warnings = comparison_warnings(pairs)
    comparison = Comparison(
        pairs, baseline=baseline_name, reports=_report_links(runs, Path(config.out))
    )
    label_of = dict(zip(comparison.names, comparison.labels, strict=True))
    out = Path(config.out)
    with staged_output(out, kind="comparison", overwrite=config.overwrite) as staging:
        written = render_comparison(comparison, staging)
        files = [out / p.relative_to(staging) for p in written] + [out / OWNED_FILES]
    return CompareResult(
        out=out,
        report_md=out / "report.md",
        report_html=out / "report.html",
        csv=out / "comparison.csv",
        files=files,
        labels={r.name: label_of[r.name] for r in runs},
        warnings=warnings,
        frame=comparison.frame,
    )
