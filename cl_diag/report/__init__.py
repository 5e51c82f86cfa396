"""Reports: pure functions of results (:class:`cl_diag.result.Result`) to Markdown, HTML, CSV
and SVG figures.

- :func:`render_analysis` -- one run: report.md, report.html and its figures.
- :func:`render_comparison` -- several runs side by side (``cl-diag compare``):
  report.md, report.html, comparison.csv (comparison_by_seed.csv when runs differ
  only in their seed) and figures.

The commands render into a staging folder (``cl_diag.io.output.staged_output``), which
records the hash of every file it moves into ``--out``, so that a report re-rendered into the
same folder removes its own stale figures and nothing else.

Nothing is measured here: every number comes from the typed results (schema in
docs/result-schema.md; a result's JSON dict is accepted too and checked the same
way), so the same results give the same bytes. The content is built once as a list
of blocks (``analysis.py``, ``comparison.py``) and rendered by ``markdown.py`` and
``html.py``; ``figures.py`` draws the SVGs.

Example::

    >>> import pathlib
    >>> from cl_diag.report import render_analysis
    >>> from cl_diag.result import load
    >>> result = load("out/result.json")                        # doctest: +SKIP
    >>> render_analysis(result, pathlib.Path("out"))            # doctest: +SKIP
    [PosixPath('out/report.md'), PosixPath('out/report.html'), ...]
"""

from __future__ import annotations

from pathlib import Path

from cl_diag.io.atomic import atomic_write_text
from cl_diag.report.analysis import build_analysis
from cl_diag.report.comparison import (
    Comparison,
    build_comparison,
    comparison_frame,
    comparison_warnings,
    run_labels,
    seed_frame,
    seed_groups,
)
from cl_diag.report.document import Document
from cl_diag.report.html import render_html
from cl_diag.report.markdown import render_markdown
from cl_diag.result import Result

__all__ = [
    "Comparison",
    "comparison_frame",
    "comparison_warnings",
    "render_analysis",
    "render_comparison",
    "run_labels",
    "seed_frame",
    "seed_groups",
]


def _write_text(path: Path, text: str) -> Path:
    atomic_write_text(path, text)  # UTF-8, no newline translation: the same bytes everywhere
    return path


def _write_document(doc: Document, out_dir: Path) -> list[Path]:
    out_dir = Path(out_dir)
    written = [
        _write_text(out_dir / "report.md", render_markdown(doc)),
        _write_text(out_dir / "report.html", render_html(doc)),
    ]
    for figure in doc.figures:
        path = out_dir / figure.filename
        path.write_bytes(figure.svg)
        written.append(path)
    return written


def render_analysis(result: Result | dict, out_dir: Path) -> list[Path]:
    """Write report.md, report.html and the SVG figures of one result into ``out_dir``.

    ``result`` is a :class:`~cl_diag.result.Result` (or its JSON dict). ``out_dir`` must
    exist (the caller stages and moves it). Returns the paths written.
    """
    if not isinstance(result, Result):
        result = Result.from_dict(result)
    return _write_document(build_analysis(result), out_dir)


def render_comparison(
    results: list[tuple[str, Result | dict]] | Comparison,
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
    comparison = results
    if not isinstance(comparison, Comparison):
        comparison = Comparison(comparison, baseline=baseline)
    written = _write_document(build_comparison(comparison), out_dir)
    csv_path = Path(out_dir) / "comparison.csv"
    _write_text(csv_path, comparison.csv_frame().to_csv(index=False, lineterminator="\n"))
    written.insert(2, csv_path)
    by_seed = comparison.seed_csv_frame()
    if by_seed is not None:
        seed_path = Path(out_dir) / "comparison_by_seed.csv"
        _write_text(seed_path, by_seed.to_csv(index=False, lineterminator="\n"))
        written.insert(3, seed_path)
    return written
