"""Reports: pure functions of results (:class:`cl_diag.result.Result`) to Markdown, HTML, CSV
and SVG figures.

:func:`analysis_files` renders one run (report.md, report.html, result.csv, figures),
:func:`comparison_files` several side by side (``cl-diag compare``: also comparison.csv), and
:func:`write_files` writes them atomically; :func:`render_analysis` and
:func:`render_comparison` do both. Nothing is measured here: every number comes from the typed
results, so the same results give the same bytes. The content is a list of blocks
(``analysis.py``, ``comparison/``, both opening with the findings of ``claims/``; ``runs.py``
labels and groups runs) rendered by ``markdown.py`` and ``html.py``; ``figures.py`` draws.

Example::

    >>> import pathlib
    >>> from cl_diag.report import render_analysis
    >>> from cl_diag.result import load
    >>> result = load("out/result.json")                        # doctest: +SKIP
    >>> render_analysis(result, pathlib.Path("out"))            # doctest: +SKIP
    [PosixPath('out/report.md'), PosixPath('out/report.html'), ...]
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from cl_diag.io.atomic import atomic_write_bytes
from cl_diag.report.analysis import build_analysis
from cl_diag.report.comparison import (
    Comparison,
    build_comparison,
    comparison_frame,
    comparison_warnings,
    seed_frame,
)
from cl_diag.report.document import Document
from cl_diag.report.html import render_html
from cl_diag.report.markdown import render_markdown
from cl_diag.report.runs import run_labels, seed_groups
from cl_diag.result import Result

__all__ = [
    "Comparison",
    "ReportFile",
    "analysis_files",
    "comparison_files",
    "comparison_frame",
    "comparison_warnings",
    "render_analysis",
    "render_comparison",
    "run_labels",
    "seed_frame",
    "seed_groups",
    "write_files",
]

#: one file of a rendered report: its name inside the report's folder and its bytes
ReportFile = tuple[str, bytes]


def _text(text: str) -> bytes:
    return text.encode("utf-8")  # UTF-8, no newline translation: the same bytes everywhere


def _document_files(doc: Document) -> list[ReportFile]:
    return [
        ("report.md", _text(render_markdown(doc))),
        ("report.html", _text(render_html(doc))),
        *[(figure.filename, figure.svg) for figure in doc.figures],
    ]


def _csv(frame: pd.DataFrame) -> bytes:
    return _text(frame.to_csv(index=False, lineterminator="\n"))


def analysis_files(result: Result) -> list[ReportFile]:
    """report.md, report.html, result.csv and the SVG figures of one result, in the order
    written. result.csv is the comparison.csv row(s) of this one run (one per layer, the same
    columns; ``run`` is what was analysed), so the CSVs of single analyses concatenate."""
    files = _document_files(build_analysis(result))
    source = result.source
    run = source.path if source.path is not None else source.kind or "result"
    files.insert(2, ("result.csv", _csv(Comparison([(run, result)]).csv_frame())))
    return files


def comparison_files(comparison: Comparison) -> list[ReportFile]:
    """report.md, report.html, comparison.csv (comparison_by_seed.csv with seed groups) and
    the figures of a comparison, in the order written."""
    files = _document_files(build_comparison(comparison))
    tables = [("comparison.csv", comparison.csv_frame())]
    by_seed = comparison.seed_csv_frame()
    if by_seed is not None:
        tables.append(("comparison_by_seed.csv", by_seed))
    files[2:2] = [(name, _csv(table)) for name, table in tables]
    return files


def write_files(files: Sequence[ReportFile], out_dir: Path) -> list[Path]:
    """The one writer of reports: each file into ``out_dir`` (which must exist; the commands
    stage it), atomically (:func:`cl_diag.io.atomic.atomic_write_bytes`). Returns the paths
    written, in order."""
    written = []
    for name, data in files:
        path = Path(out_dir) / name
        atomic_write_bytes(path, data)
        written.append(path)
    return written


def render_analysis(result: Result, out_dir: Path) -> list[Path]:
    """Write report.md, report.html, result.csv and the SVG figures of one result into ``out_dir``
    (:func:`analysis_files`, :func:`write_files`). Returns the paths written."""
    return write_files(analysis_files(result), out_dir)


def render_comparison(
    results: Sequence[tuple[str, Result]] | Comparison,
    out_dir: Path,
    *,
    baseline: str | None = None,
) -> list[Path]:
    """Write report.md, report.html, comparison.csv and figures comparing ``results``.

    ``results`` is ``[(name, result)]`` (any order: the report orders the runs), ``name``
    the run's folder or file as the user gave it (the label fallback); ``baseline`` is one
    of the names. Or a :class:`Comparison` already made of them. Differing n_ref values are
    noted in the report; :func:`comparison_warnings` returns the same notes for the CLI.
    """
    comparison = (
        results if isinstance(results, Comparison) else Comparison(results, baseline=baseline)
    )
    return write_files(comparison_files(comparison), out_dir)
