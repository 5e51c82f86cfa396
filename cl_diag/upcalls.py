"""What the result model calls above itself, put here by the package root.

:meth:`cl_diag.result.Result.save` writes reports and a result's ``repr`` is the headline of
:mod:`cl_diag.report.headline`; both live above the result model, which may not import them.
The package root puts them here and the model reads them at call time. This module imports
nothing, so that the root fills it without importing the result model (issue 25).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

# The result is typed Any here: naming cl_diag.result, even for the type checker alone, would
# be an import circle (tests/test_architecture.py counts those too).


class AnalysisWriter(Protocol):
    def __call__(self, result: Any, out: Path, *, overwrite: bool = False) -> object: ...


#: a result's short form, text or HTML
Display = Callable[[Any], str]

#: writes a result's analysis folder (:func:`cl_diag.orchestration.analyze.write_analysis`)
analysis_writer: AnalysisWriter | None = None
#: a result's ``repr`` and ``_repr_html_`` (:mod:`cl_diag.report.headline`)
display_text: Display | None = None
display_html: Display | None = None


def install(writer: AnalysisWriter, text: Display, html: Display) -> None:
    """Make ``writer`` what :meth:`~cl_diag.result.Result.save` writes an analysis folder with,
    and ``text`` and ``html`` a result's short form; the package root calls this once."""
    global analysis_writer, display_text, display_html
    analysis_writer, display_text, display_html = writer, text, html
